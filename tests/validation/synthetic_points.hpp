#pragma once
// Calibration points made from a known card ("Truth") through the cost model's own formulas,
// for the fitter's tests (test_profile_fit*.cpp): fitted back, they must give the card's values.
#include <cstdint>

#include "validation/fit/points_file.hpp"

namespace kvtier::fit::fixtures {

// The noise's seed: the points are the same in every run.
inline constexpr std::uint64_t kSeed = 20261203;

// The "true" card: what the synthetic micro-benchmarks measure.
struct Truth {
  double h2d_gbps = 53.0, latency_us = 2.4, zc_read_gbps = 48.0, hbm_gbps = 4100.0;
  double attend_gbps = 2300.0, attend_fixed_us = 7.5, attend_per_cta_ns = 9.0;
  // One wide row among narrow ones: the attend's fixed part and CTAs, then its longest CTA's
  // walk, per token.
  double span_per_token_ns = 52.0;
  // Past one wave of CTAs (prefill chunks): a fixed part, per CTA and a faster rate.
  double waves_fixed_us = 30.0, waves_per_cta_ns = 4.0, waves_gbps = 4150.0;
  // The fp8 attends: two pieces in bytes (a small cost per KiB up to the knee, a rate past it)
  // and a cost per row.
  double fp8_gbps = 300.0, fp8_fixed_us = 21.0, fp8_per_row_ns = 350.0;
  double fp8_knee = 4259840, fp8_ns_per_kib = 1.2;
  double fp8_host_gbps = 30.0, fp8_host_fixed_us = 24.0, fp8_host_per_row_ns = 900.0;
  double fp8_host_knee = 1064960, fp8_host_ns_per_kib = 5.0;
  // The pool's store: 1.1 us + 0.45 ns per KiB up to 8 MiB, then 1,600 GB/s.
  double store_fixed_us = 1.1, store_hbm_gbps = 1600.0, store_knee = 8388608,
         store_ns_per_kib = 0.45;
  // The host bank's store: 2.4 us + 3.4 ns per KiB up to 128 KiB, then the link at 52 GB/s.
  double host_us = 2.4, host_knee = 131072, host_ns_per_kib = 3.4, store_zc_gbps = 52.0;
  double ensure_fixed_us = 6.0, per_lookup_ns = 0.8, per_slot_ns = 0.03, per_miss_ns = 35.0;
  // The step beside (a few blocks, beside an attention of its rows): per doubling of the rows,
  // per page entry; past 8 rows (one warp a row) its own piece, per row. Its copy's rate.
  // A step that misses goes over its pages again.
  double beside_fixed_us = 4.0, beside_per_doubling_us = 3.0, beside_per_page_ns = 1.5,
         beside_per_slot_ns = 0.05, beside_per_miss_ns = 40.0, beside_per_page_missing_ns = 0.8,
         beside_missing_us = 3.0;
  double beside_wide_fixed_us = 9.0, beside_wide_per_row_ns = 900.0, beside_wide_per_page_ns = 3.0,
         beside_wide_per_slot_ns = 0.07, beside_wide_per_miss_ns = 55.0,
         beside_wide_per_page_missing_ns = 0.6;
  double beside_copy_us = 4.5, beside_copy_gbps = 42.0;
  double indexer_ns = 0.09, indexer_fixed_us = 4.4, launch_us = 3.9;
  // Projections: up to 64 rows a fixed part, the weights at a rate and a cost per row; past
  // that (cuBLAS) a fixed part and the flops (weight bytes x rows) at a rate. The layer's small
  // kernels: a fixed part and a cost per row.
  double proj_fixed_us = 3.9, proj_gbps = 3600.0, proj_per_row_ns = 220.0;
  double wide_fixed_us = 12.0, wide_tflops = 650.0;
  double ops_fixed_us = 9.0, ops_per_row_ns = 40.0;
  // A prefill's staging windows: the gather (fixed, rate), each window's ops and fold (fixed, per
  // row), the accumulator's reset (fixed, per row).
  double staging_fixed_us = 35.0, staging_gbps = 50.0;
  double window_fixed_us = 6.0, window_per_row_ns = 22.0, reset_fixed_us = 3.0,
         reset_per_row_ns = 7.5;
};

// us for `x` bytes in two pieces: ns per KiB up to the knee, GB/s past it.
double pieces(double x, double knee, double ns_per_kib, double gbps);

// Every calibration series at the sizes the calibration sweeps, each point `t`'s price times
// (1 + a normal draw of relative deviation `noise_rel`), from a fixed seed.
PointsFile synthetic(const Truth& t, double noise_rel);

}  // namespace kvtier::fit::fixtures
