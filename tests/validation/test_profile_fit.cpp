// fit_profile: points made from a known profile through the cost model's own formulas come
// back as that profile's values, each with a source that says how it was fitted; terms without
// a series keep the base value and source.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "model/attend_grid.hpp"
#include "model/calibration_terms.hpp"
#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#include "sim/profiles.hpp"
#include "validation/fit/profile_fit.hpp"

namespace kvtier::fit {
namespace {

constexpr std::uint64_t kSeed = 20261203;

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
double pieces(double x, double knee, double ns_per_kib, double gbps) {
  return std::min(x, knee) * ns_per_kib / 1024e3 + std::max(0.0, x - knee) / (1000 * gbps);
}

PointsFile synthetic(const Truth& t, double noise_rel) {
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<double> n(0.0, noise_rel);
  auto noisy = [&](double y) { return y * (1 + n(rng)); };
  PointsFile p{"NVIDIA H200 (test)", "580.65.06", "2026-12-02", "kvtier validate calibrate", {}};
  PointSeries h2d{"h2d_copy", {{"bytes", "transfers"}, {}, {}}};
  for (double bytes : {2048.0, 262144.0, 4.0e6, 6.4e7}) {
    for (double transfers : {1.0, 4.0, 16.0, 64.0}) {
      h2d.samples.x.push_back({bytes, transfers});
      h2d.samples.y.push_back(noisy(transfers * t.latency_us + bytes / (1000 * t.h2d_gbps)));
    }
  }
  PointSeries zc{"zero_copy_read", {{"bytes"}, {}, {}}};
  PointSeries hbm{"hbm_read", {{"bytes"}, {}, {}}};
  for (double bytes = 1 << 20; bytes <= 1 << 28; bytes *= 2) {
    zc.samples.x.push_back({bytes});
    zc.samples.y.push_back(noisy(t.latency_us + bytes / (1000 * t.zc_read_gbps)));
    hbm.samples.x.push_back({bytes});
    hbm.samples.y.push_back(noisy(bytes / (1000 * t.hbm_gbps)));
  }
  // The attend over rows x selected tokens, as the calibration sweeps it: the grid the kernel
  // launches on a card of 132 SMs (model/attend_grid.hpp).
  PointSeries att{"attention", {{"hbm_bytes", "ctas"}, {}, {}}};
  PointSeries fp8{"attention_fp8", {{"hbm_bytes", "rows"}, {}, {}}};
  PointSeries fp8_host{"attention_fp8_host", {{"bytes", "rows"}, {}, {}}};
  for (int rows : {1, 2, 4, 8, 16, 32}) {
    for (int tokens : {512, 1024, 2051}) {
      const auto ctas = static_cast<double>(attend_ctas(rows, 2, tokens, 132));
      const double bytes = rows * tokens * 2048.0, bytes8 = rows * tokens * 1040.0;
      att.samples.x.push_back({bytes, ctas});
      att.samples.y.push_back(noisy(t.attend_fixed_us + bytes / (1000 * t.attend_gbps) +
                                    ctas * t.attend_per_cta_ns * 1e-3));
      fp8.samples.x.push_back({bytes8, static_cast<double>(rows)});
      fp8.samples.y.push_back(noisy(t.fp8_fixed_us +
                                    pieces(bytes8, t.fp8_knee, t.fp8_ns_per_kib, t.fp8_gbps) +
                                    rows * t.fp8_per_row_ns * 1e-3));
      fp8_host.samples.x.push_back({bytes8, static_cast<double>(rows)});
      fp8_host.samples.y.push_back(
          noisy(t.fp8_host_fixed_us +
                pieces(bytes8, t.fp8_host_knee, t.fp8_host_ns_per_kib, t.fp8_host_gbps) +
                rows * t.fp8_host_per_row_ns * 1e-3));
    }
  }
  // The wide row among narrow ones, 4 - 32 rows: its CTAs bound the attend.
  PointSeries span{"attention_span", {{"cta_tokens"}, {}, {}}};
  for (int rows : {4, 8, 16, 32}) {
    for (int wide : {4096, 8192, 16384}) {
      const double cta_tokens = attend_cta_tokens(rows, 2, wide, 132);
      span.samples.x.push_back({cta_tokens});
      // a wave's CTAs (256 - 264 on the card; one figure here, which the line's intercept takes)
      span.samples.y.push_back(noisy(t.attend_fixed_us + 264 * t.attend_per_cta_ns * 1e-3 +
                                     cta_tokens * t.span_per_token_ns * 1e-3));
    }
  }
  // Prefill chunks past one wave: every CTA walks its whole row.
  PointSeries waves{"attention_waves", {{"hbm_bytes", "ctas"}, {}, {}}};
  for (int rows : {264, 528, 1056, 2048, 4096, 8192, 16384}) {
    for (int tokens : {515, 1027, 2051}) {
      const auto ctas = static_cast<double>(attend_ctas(rows, 2, tokens, 132));
      const double bytes = rows * tokens * 2048.0;
      waves.samples.x.push_back({bytes, ctas});
      waves.samples.y.push_back(noisy(t.waves_fixed_us + bytes / (1000 * t.waves_gbps) +
                                      ctas * t.waves_per_cta_ns * 1e-3));
    }
  }
  // The store into the pool and into the host bank, as the calibration sweeps them.
  PointSeries store{"store", {{"bytes"}, {}, {}}};
  PointSeries store_host{"store_host", {{"bytes"}, {}, {}}};
  for (double tokens : {1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0}) {
    const double x = tokens * 2048;
    store.samples.x.push_back({x});
    store.samples.y.push_back(
        noisy(t.store_fixed_us + pieces(x, t.store_knee, t.store_ns_per_kib, t.store_hbm_gbps)));
    store_host.samples.x.push_back({x});
    store_host.samples.y.push_back(
        noisy(t.host_us + std::min(x, t.host_knee) * t.host_ns_per_kib / 1024e3 +
              std::max(0.0, x - t.host_knee) / (1000 * t.store_zc_gbps)));
  }
  PointSeries ens{"ensure", {{"lookups", "slots", "misses"}, {}, {}}};
  PointSeries beside{"step_beside", {{"rows", "pages", "slots", "misses"}, {}, {}}};
  PointSeries beside_wide{"step_beside_wide", {{"rows", "pages", "slots", "misses"}, {}, {}}};
  for (double lookups : {512.0, 4096.0, 32768.0}) {
    for (double slots : {1024.0, 8192.0, 65536.0}) {
      for (double misses : {0.0, 64.0, 512.0}) {
        const double scanned = CostModel::ensure_slots_scanned(slots, misses);
        ens.samples.x.push_back({lookups, slots, misses});
        ens.samples.y.push_back(
            noisy(t.ensure_fixed_us + 1e-3 * (lookups * t.per_lookup_ns + scanned * t.per_slot_ns +
                                              misses * t.per_miss_ns)));
      }
    }
  }
  for (double rows : {1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0}) {
    for (double per_row : {130.0, 460.0}) {
      for (double slots : {8192.0, 65536.0}) {
        for (double misses : {0.0, 16.0, 64.0}) {
          const double pages = rows * per_row;
          const double scanned = CostModel::ensure_slots_scanned(slots, misses);
          const double missing = misses > 0 ? pages : 0.0;
          if (rows <= kStepGroupedRows) {
            beside.samples.x.push_back({rows, pages, slots, misses});
            beside.samples.y.push_back(noisy(
                t.beside_fixed_us + std::log2(rows) * t.beside_per_doubling_us +
                1e-3 * (pages * t.beside_per_page_ns + scanned * t.beside_per_slot_ns +
                        misses * t.beside_per_miss_ns + missing * t.beside_per_page_missing_ns) +
                (misses > 0 ? t.beside_missing_us : 0.0)));
          } else {
            beside_wide.samples.x.push_back({rows, pages, slots, misses});
            beside_wide.samples.y.push_back(noisy(
                t.beside_wide_fixed_us +
                1e-3 * (rows * t.beside_wide_per_row_ns + pages * t.beside_wide_per_page_ns +
                        scanned * t.beside_wide_per_slot_ns + misses * t.beside_wide_per_miss_ns +
                        missing * t.beside_wide_per_page_missing_ns)));
          }
        }
      }
    }
  }
  // The step's copy of its misses: the first page's latency, then the bytes at the rate.
  PointSeries beside_copy{"step_beside_copy", {{"bytes"}, {}, {}}};
  for (double misses : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0}) {
    beside_copy.samples.x.push_back({misses * 131072});
    beside_copy.samples.y.push_back(
        noisy(t.beside_copy_us + misses * 131072 / (1000 * t.beside_copy_gbps)));
  }
  PointSeries idx{"indexer", {{"row_blocks"}, {}, {}}};
  PointSeries launch{"launch_eager", {{"kernels"}, {}, {}}};
  for (int i = 1; i <= 10; ++i) {
    idx.samples.x.push_back({8192.0 * i});
    idx.samples.y.push_back(noisy(t.indexer_fixed_us + 8192.0 * i * t.indexer_ns * 1e-3));
    launch.samples.x.push_back({10.0 * i});
    launch.samples.y.push_back(noisy(1.0 + 10.0 * i * t.launch_us));  // 1 us event overhead
  }
  // the grouped six and the output projection of the reference geometry
  PointSeries proj{"projection", {{"weight_bytes", "rows"}, {}, {}}};
  PointSeries wide{"projection_wide", {{"weight_byte_rows"}, {}, {}}};
  for (double w : {71.4e6, 31.5e6}) {
    for (double rows : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0}) {
      proj.samples.x.push_back({w, rows});
      proj.samples.y.push_back(
          noisy(t.proj_fixed_us + w / (1000 * t.proj_gbps) + rows * t.proj_per_row_ns * 1e-3));
    }
    for (double rows : {256.0, 1024.0, 4096.0, 16384.0}) {
      wide.samples.x.push_back({w * rows});
      wide.samples.y.push_back(noisy(t.wide_fixed_us + w * rows / (1e6 * t.wide_tflops)));
    }
  }
  PointSeries ops{"layer_ops", {{"rows"}, {}, {}}};
  for (double rows : {1.0, 8.0, 64.0, 512.0, 4096.0}) {
    ops.samples.x.push_back({rows});
    ops.samples.y.push_back(noisy(t.ops_fixed_us + rows * t.ops_per_row_ns * 1e-3));
  }
  PointSeries staging{"staging", {{"bytes"}, {}, {}}};
  for (double pages : {8.0, 32.0, 128.0, 512.0, 2048.0, 4096.0}) {
    staging.samples.x.push_back({pages * 131072});
    staging.samples.y.push_back(
        noisy(t.staging_fixed_us + pages * 131072 / (1000 * t.staging_gbps)));
  }
  PointSeries window{"window_fold", {{"rows"}, {}, {}}};
  PointSeries reset{"fold_reset", {{"rows"}, {}, {}}};
  for (double rows : {264.0, 1024.0, 2048.0, 4096.0, 16384.0}) {
    window.samples.x.push_back({rows});
    window.samples.y.push_back(noisy(t.window_fixed_us + rows * t.window_per_row_ns * 1e-3));
    reset.samples.x.push_back({rows});
    reset.samples.y.push_back(noisy(t.reset_fixed_us + rows * t.reset_per_row_ns * 1e-3));
  }
  p.series = {h2d,  zc,       store, store_host, hbm,         att,         span, waves,
              fp8,  fp8_host, ens,   beside,     beside_wide, beside_copy, idx,  launch,
              proj, wide,     ops,   staging,    window,      reset};
  return p;
}

TEST(ProfileFit, RecoversTheCardFromExactPoints) {
  const Truth t;
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const ProfileFit f = fit_profile(synthetic(t, 0.0), base);
  const HardwareProfile& p = f.profile;
  EXPECT_NEAR(p.pcie_h2d_gbps, t.h2d_gbps, 1e-6);
  EXPECT_NEAR(p.pcie_latency_us, t.latency_us, 1e-9);
  EXPECT_NEAR(p.zero_copy_read_gbps, t.zc_read_gbps, 1e-6);
  // The attend's effective rate, not the gather's ceiling, prices the attend's bytes.
  EXPECT_NEAR(p.hbm_gbps, t.attend_gbps, 1e-6);
  EXPECT_NEAR(p.attention_fixed_us, t.attend_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_ns_per_cta, t.attend_per_cta_ns, 1e-6);
  // the span's slope (its intercept, the fixed part and CTAs, is the attention series')
  EXPECT_NEAR(p.attention_ns_per_cta_token, t.span_per_token_ns, 1e-6);
  EXPECT_NEAR(p.attention_waves_fixed_us, t.waves_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_waves_ns_per_cta, t.waves_per_cta_ns, 1e-6);
  EXPECT_NEAR(p.attention_waves_gbps, t.waves_gbps, 1e-6 * t.waves_gbps);
  EXPECT_NEAR(p.attention_fp8_fixed_us, t.fp8_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_fp8_gbps, t.fp8_gbps, 1e-6);
  EXPECT_NEAR(p.attention_fp8_ns_per_row, t.fp8_per_row_ns, 1e-6);
  EXPECT_NEAR(p.attention_fp8_host_fixed_us, t.fp8_host_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_fp8_host_gbps, t.fp8_host_gbps, 1e-6);
  EXPECT_NEAR(p.attention_fp8_host_ns_per_row, t.fp8_host_per_row_ns, 1e-6);
  EXPECT_EQ(p.attention_fp8_knee_bytes, t.fp8_knee);
  EXPECT_NEAR(p.attention_fp8_ns_per_kib, t.fp8_ns_per_kib, 1e-6);
  EXPECT_EQ(p.attention_fp8_host_knee_bytes, t.fp8_host_knee);
  EXPECT_NEAR(p.attention_fp8_host_ns_per_kib, t.fp8_host_ns_per_kib, 1e-6);
  // The store into the pool and into the host bank: two pieces each.
  EXPECT_NEAR(p.store_fixed_us, t.store_fixed_us, 1e-6);
  EXPECT_NEAR(p.store_hbm_gbps, t.store_hbm_gbps, 1e-6);
  EXPECT_EQ(p.store_knee_bytes, t.store_knee);
  EXPECT_NEAR(p.store_ns_per_kib, t.store_ns_per_kib, 1e-6);
  EXPECT_NEAR(p.store_host_us, t.host_us, 1e-6);
  EXPECT_EQ(p.store_host_knee_bytes, t.host_knee);
  EXPECT_NEAR(p.store_host_ns_per_kib, t.host_ns_per_kib, 1e-6);
  EXPECT_NEAR(p.zero_copy_write_gbps, t.store_zc_gbps, 1e-6);
  EXPECT_NEAR(p.ensure_fixed_us, t.ensure_fixed_us, 1e-6);
  EXPECT_NEAR(p.ensure_ns_per_lookup, t.per_lookup_ns, 1e-9);
  EXPECT_NEAR(p.ensure_ns_per_slot, t.per_slot_ns, 1e-9);
  EXPECT_NEAR(p.ensure_ns_per_miss, t.per_miss_ns, 1e-9);
  // The step beside: its own series, its own fields, in two pieces; its copy's rate.
  EXPECT_NEAR(p.step_beside_fixed_us, t.beside_fixed_us, 1e-6);
  EXPECT_NEAR(p.step_beside_us_per_row_doubling, t.beside_per_doubling_us, 1e-6);
  EXPECT_NEAR(p.step_beside_ns_per_page, t.beside_per_page_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_ns_per_slot, t.beside_per_slot_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_ns_per_miss, t.beside_per_miss_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_ns_per_page_missing, t.beside_per_page_missing_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_us_missing, t.beside_missing_us, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_fixed_us, t.beside_wide_fixed_us, 1e-6);
  EXPECT_NEAR(p.step_beside_wide_ns_per_row, t.beside_wide_per_row_ns, 1e-6);
  EXPECT_NEAR(p.step_beside_wide_ns_per_page, t.beside_wide_per_page_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_ns_per_slot, t.beside_wide_per_slot_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_ns_per_miss, t.beside_wide_per_miss_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_ns_per_page_missing, t.beside_wide_per_page_missing_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_copy_us, t.beside_copy_us, 1e-6);
  EXPECT_NEAR(p.step_beside_copy_gbps, t.beside_copy_gbps, 1e-6);
  EXPECT_NEAR(p.indexer_ns_per_row_block, t.indexer_ns, 1e-9);
  EXPECT_NEAR(p.indexer_fixed_us, t.indexer_fixed_us, 1e-6);
  EXPECT_NEAR(p.launch_us, t.launch_us, 1e-9);
  EXPECT_NEAR(p.projection_fixed_us, t.proj_fixed_us, 1e-6);
  EXPECT_NEAR(p.projection_gbps, t.proj_gbps, 1e-6 * t.proj_gbps);
  EXPECT_NEAR(p.projection_ns_per_row, t.proj_per_row_ns, 1e-6);
  EXPECT_NEAR(p.projection_wide_fixed_us, t.wide_fixed_us, 1e-6);
  EXPECT_NEAR(p.projection_wide_tflops, t.wide_tflops, 1e-6 * t.wide_tflops);
  EXPECT_NEAR(p.layer_ops_fixed_us, t.ops_fixed_us, 1e-6);
  EXPECT_NEAR(p.layer_ops_ns_per_row, t.ops_per_row_ns, 1e-6);
  EXPECT_NEAR(p.staging_fixed_us, t.staging_fixed_us, 1e-6);
  EXPECT_NEAR(p.staging_gbps, t.staging_gbps, 1e-6);
  EXPECT_NEAR(p.window_fold_fixed_us, t.window_fixed_us, 1e-6);
  EXPECT_NEAR(p.window_fold_ns_per_row, t.window_per_row_ns, 1e-6);
  EXPECT_NEAR(p.fold_reset_fixed_us, t.reset_fixed_us, 1e-6);
  EXPECT_NEAR(p.fold_reset_ns_per_row, t.reset_per_row_ns, 1e-6);
  for (const SeriesFit& s : f.report.series)
    EXPECT_NEAR(s.linear.quality.r2, 1.0, 1e-9) << s.term;
}

TEST(ProfileFit, RecoversTheCardFromNoisyPoints) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const Truth t;
  const ProfileFit f = fit_profile(synthetic(t, 0.01), sim::load_profile("h200-pcie5"));
  const HardwareProfile& p = f.profile;
  EXPECT_NEAR(p.pcie_h2d_gbps / t.h2d_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.hbm_gbps / t.attend_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.ensure_ns_per_miss / t.per_miss_ns, 1.0, 0.05);
  EXPECT_NEAR(p.launch_us / t.launch_us, 1.0, 0.02);
  EXPECT_NEAR(p.projection_gbps / t.proj_gbps, 1.0, 0.05);
  EXPECT_NEAR(p.projection_ns_per_row / t.proj_per_row_ns, 1.0, 0.1);
  EXPECT_NEAR(p.projection_wide_tflops / t.wide_tflops, 1.0, 0.03);
  EXPECT_NEAR(p.layer_ops_ns_per_row / t.ops_per_row_ns, 1.0, 0.03);
  EXPECT_NEAR(p.layer_ops_fixed_us / t.ops_fixed_us, 1.0, 0.1);
  EXPECT_NEAR(p.staging_gbps / t.staging_gbps, 1.0, 0.03);
  EXPECT_NEAR(p.window_fold_ns_per_row / t.window_per_row_ns, 1.0, 0.03);
  EXPECT_NEAR(p.attention_fixed_us / t.attend_fixed_us, 1.0, 0.05);
  EXPECT_NEAR(p.attention_ns_per_cta / t.attend_per_cta_ns, 1.0, 0.2);
  EXPECT_NEAR(p.attention_ns_per_cta_token / t.span_per_token_ns, 1.0, 0.05);
  EXPECT_NEAR(p.attention_waves_gbps / t.waves_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.attention_fp8_ns_per_row / t.fp8_per_row_ns, 1.0, 0.2);
  EXPECT_NEAR(p.attention_fp8_host_gbps / t.fp8_host_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.attention_fp8_host_ns_per_row / t.fp8_host_per_row_ns, 1.0, 0.2);
  EXPECT_NEAR(p.store_fixed_us / t.store_fixed_us, 1.0, 0.05);
  EXPECT_NEAR(p.store_hbm_gbps / t.store_hbm_gbps, 1.0, 0.05);
  EXPECT_NEAR(p.store_host_us / t.host_us, 1.0, 0.05);
  EXPECT_NEAR(p.zero_copy_write_gbps / t.store_zc_gbps, 1.0, 0.02);
  EXPECT_EQ(p.store_knee_bytes, t.store_knee);
  EXPECT_NEAR(p.attention_fp8_gbps / t.fp8_gbps, 1.0, 0.05);
  EXPECT_NEAR(p.attention_fp8_host_gbps / t.fp8_host_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.step_beside_us_per_row_doubling / t.beside_per_doubling_us, 1.0, 0.05);
  EXPECT_NEAR(p.step_beside_wide_ns_per_page / t.beside_wide_per_page_ns, 1.0, 0.1);
  EXPECT_NEAR(p.step_beside_copy_gbps / t.beside_copy_gbps, 1.0, 0.05);
  for (const SeriesFit& s : f.report.series)
    EXPECT_GT(s.linear.quality.r2, 0.99) << s.term;
}

// Points files from before the store series time the store into the pool and the host bank
// together (zero_copy_write): it sets zero_copy_write_gbps only without a store_host series.
TEST(ProfileFit, TheStoreSeriesSetsTheWriteThroughRateOverTheOldSeries) {
  const Truth t;
  PointsFile p = synthetic(t, 0.0);
  PointSeries old{"zero_copy_write", {{"bytes"}, {}, {}}};
  for (double bytes : {2048.0, 65536.0, 2.0e6, 3.3e7}) {
    old.samples.x.push_back({bytes});
    old.samples.y.push_back(2.0 + bytes / (1000 * 40.0));
  }
  p.series.push_back(old);
  const ProfileFit both = fit_profile(p, sim::load_profile("h200-pcie5"));
  EXPECT_NEAR(both.profile.zero_copy_write_gbps, t.store_zc_gbps, 1e-6);
  EXPECT_NE(both.profile.source("zero_copy_write_gbps").find("store_host: 8 points"),
            std::string::npos);
  const SeriesFit& zw = both.report.series.back();
  EXPECT_TRUE(zw.fields.empty());
  ASSERT_EQ(zw.notes.size(), 1u);
  EXPECT_NE(zw.notes[0].find("write-through rate 40.0 GB/s; zero_copy_write_gbps comes from the "
                             "store_host series"),
            std::string::npos)
      << zw.notes[0];
  std::erase_if(p.series, [](const PointSeries& s) { return s.term == "store_host"; });
  EXPECT_NEAR(fit_profile(p, sim::load_profile("h200-pcie5")).profile.zero_copy_write_gbps, 40.0,
              1e-6);
}

TEST(ProfileFit, EveryFittedValueSaysHowItWasFittedAndAbsentTermsKeepTheBase) {
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const ProfileFit f = fit_profile(synthetic(Truth{}, 0.0), base);
  const std::string src = f.profile.source("ensure_ns_per_miss");
  for (const char* part :
       {"fitted (least squares, ensure: 27 points, R² 1.0000)", "'kvtier validate calibrate'",
        "NVIDIA H200 (test)", "driver 580.65.06", "2026-12-02"}) {
    EXPECT_NE(src.find(part), std::string::npos) << part << " not in: " << src;
  }
  EXPECT_NE(f.profile.source("hbm_gbps").find("attention: 18 points"), std::string::npos);
  EXPECT_NE(f.profile.source("attention_ns_per_cta").find("attention: 18 points"),
            std::string::npos);
  // No topk, d2h, fp8 store, graph launch or non-QSA series: base values and sources (and the
  // SM count is the card's, never fitted).
  for (const char* field : {"topk_ns_per_row_block", "pcie_d2h_gbps", "store_fp8_host_gbps",
                            "store_fp8_fixed_us", "store_fp8_host_knee_bytes", "graph_launch_us",
                            "non_qsa_forward_us", "device_memory_gib", "sm_count"}) {
    EXPECT_EQ(f.profile.param(field), base.param(field)) << field;
    EXPECT_EQ(f.profile.source(field), base.source(field)) << field;
  }
  EXPECT_EQ(f.report.kept, (std::vector<std::string>{
                               "launch_graph", "d2h_copy", "zero_copy_write", "store_fp8",
                               "store_host_fp8", "indexer_prefill", "topk", "topk_one_cta",
                               "topk_chain", "attention_warm", "store_in_forward", "non_qsa"}));
  // The fixed parts the cost model does not price are reported, not dropped.
  for (const SeriesFit& s : f.report.series) {
    if (s.term != "launch_eager") continue;
    ASSERT_EQ(s.unpriced.size(), 1u);
    EXPECT_EQ(s.unpriced[0].coefficient, "intercept");
    EXPECT_NEAR(s.unpriced[0].value, 1.0, 1e-9);
  }
  EXPECT_FALSE(f.profile.validation.has_value());
}

TEST(ProfileFit, TheStoreInAForwardAndTheL2ReuseComeFromTheirSeries) {
  const Truth t;
  PointsFile p = synthetic(t, 0.0);
  // The store before a decode-width attend, less the attend alone: 1.9 us + 0.5 ns a KiB.
  PointSeries in_forward{"store_in_forward", {{"store_bytes"}, {}, {}}};
  for (double tokens : {1.0, 1.0, 1.0, 4096.0, 4096.0, 4096.0}) {
    in_forward.samples.x.push_back({tokens * 2048});
    in_forward.samples.y.push_back(1.9 + tokens * 2048 * 0.5e-3 / 1024);
  }
  // One row's attends of 2,051 tokens (65 splits, 130 CTAs, 32 tokens each) a layer, the
  // forward before's pages in L2: 1.3 us off the fitted attend's price up to 25.2 MB, nothing
  // from 100.8 MB; two rows' points are not fitted.
  const HardwareProfile fitted = fit_profile(p, sim::load_profile("h200-pcie5")).profile;
  const CostModel cost(fitted);
  const double layer_bytes = 2051.0 * 2048;
  PointSeries warm{
      "attention_warm",
      {{"rows", "layers", "working_set_bytes", "hbm_bytes", "ctas", "cta_tokens"}, {}, {}}};
  for (int rows : {1, 2}) {
    for (int layers : {1, 2, 3, 4, 6, 8, 12, 16, 24}) {
      const double bytes = rows * layer_bytes, ws = layers * bytes;
      const double ctas = rows * 2.0 * attend_splits(rows, 2, 2051, 132);
      const double cta_tokens = attend_cta_tokens(rows, 2, 2051, 132);
      const double price =
          1e-3 * static_cast<double>(cost.attention_ns(
                     static_cast<std::int64_t>(bytes), rows, static_cast<std::int64_t>(ctas),
                     KvDtype::bf16, static_cast<std::int64_t>(cta_tokens)));
      warm.samples.x.push_back(
          {static_cast<double>(rows), static_cast<double>(layers), ws, bytes, ctas, cta_tokens});
      warm.samples.y.push_back(price - (rows == 1 ? 1.3 * CostModel::l2_reuse_reach(
                                                              ws, 6 * layer_bytes, 24 * layer_bytes)
                                                  : 0.2));
    }
  }
  p.series.push_back(warm);
  p.series.push_back(in_forward);
  const ProfileFit f = fit_profile(p, sim::load_profile("h200-pcie5"));
  EXPECT_NEAR(f.profile.store_fixed_us, 1.9, 1e-6);  // not the store series' 1.1
  EXPECT_NEAR(f.profile.store_hbm_gbps, t.store_hbm_gbps, 1e-6);
  EXPECT_NE(f.profile.source("store_fixed_us").find("store_in_forward: 6 points"),
            std::string::npos);
  EXPECT_NEAR(f.profile.attention_l2_reuse_us, 1.3, 1e-6);
  EXPECT_EQ(f.profile.attention_l2_reuse_full_bytes, 6 * layer_bytes);
  EXPECT_EQ(f.profile.attention_l2_reuse_none_bytes, 24 * layer_bytes);
  EXPECT_NE(f.profile.source("attention_l2_reuse_us").find("attention_warm: 9 one-row points"),
            std::string::npos)
      << f.profile.source("attention_l2_reuse_us");
  // The report: attention_warm last, the store's own fixed part noted beside.
  ASSERT_FALSE(f.report.series.empty());
  EXPECT_EQ(f.report.series.back().term, "attention_warm");
  bool noted = false;
  for (const SeriesFit& s : f.report.series) {
    for (const std::string& n : s.notes)
      noted = noted || (s.term == "store" &&
                        n.find("comes from the store_in_forward series") != std::string::npos);
  }
  EXPECT_TRUE(noted);
}

TEST(ProfileFit, AFitThatGivesANonPositiveRateIsRefused) {
  PointsFile p = synthetic(Truth{}, 0.0);
  PointSeries& zc = p.series[1];
  for (std::size_t i = 0; i < zc.samples.y.size(); ++i)
    zc.samples.y[i] = 100.0 - static_cast<double>(i);  // faster with more bytes
  try {
    fit_profile(p, sim::load_profile("h200-pcie5"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'zero_copy_read' gives zero_copy_read_gbps"),
              std::string::npos)
        << e.what();
  }
}

// A series the calibration got wrong can be left out: the others are fitted, its fields keep the
// base's values and sources, and the report says which were left out. Only calibration terms the
// points have a series of may be left out.
TEST(ProfileFit, ASeriesLeftOutKeepsTheBaseAndTheOthersAreFitted) {
  PointsFile p = synthetic(Truth{}, 0.0);
  PointSeries& zc = p.series[1];
  ASSERT_EQ(zc.term, "zero_copy_read");
  for (std::size_t i = 0; i < zc.samples.y.size(); ++i)
    zc.samples.y[i] = 100.0 - static_cast<double>(i);  // faster with more bytes: refused
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  EXPECT_THROW(fit_profile(p, base), ConfigError);
  const ProfileFit f = fit_profile(p, base, {"zero_copy_read"});
  EXPECT_EQ(f.report.excluded, std::vector<std::string>{"zero_copy_read"});
  EXPECT_EQ(f.profile.param("zero_copy_read_gbps"), base.param("zero_copy_read_gbps"));
  EXPECT_EQ(f.profile.source("zero_copy_read_gbps"), base.source("zero_copy_read_gbps"));
  for (const SeriesFit& s : f.report.series)
    EXPECT_NE(s.term, "zero_copy_read");
  // a left-out term is neither fitted nor listed as having no series
  EXPECT_EQ(std::count(f.report.kept.begin(), f.report.kept.end(), "zero_copy_read"), 0);
  // the rest as without it: the same values as a fit of the good points
  const ProfileFit good = fit_profile(synthetic(Truth{}, 0.0), base);
  for (const char* field : {"pcie_h2d_gbps", "hbm_gbps", "ensure_ns_per_miss"})
    EXPECT_EQ(f.profile.param(field), good.profile.param(field)) << field;
  EXPECT_NE(f.profile.source("pcie_h2d_gbps"), base.source("pcie_h2d_gbps"));
  // the refusal's message says the series may be left out
  try {
    fit_profile(p, base);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fit without the series"), std::string::npos) << e.what();
  }
  // not a term; a term the points have no series of (a typo must not pass unnoticed)
  EXPECT_THROW(fit_profile(p, base, {"zero_copy"}), ConfigError);
  EXPECT_THROW(fit_profile(p, base, {"topk_chain"}), ConfigError);
  try {
    fit_profile(p, base, {"zero_copy"});
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not a calibration term"), std::string::npos) << e.what();
  }
}

TEST(ProfileFit, EveryTermMapsToTheProfile) {
  // One exact series per term: each sets at least one field (or, hbm_read with attention and
  // zero_copy_write with store present, and the retired ensure_beside, none) and the result is
  // a valid profile.
  // The step beside's series are priced through their own inputs (doublings of the rows, the
  // slots searched, the pages and fixed part of a step that misses): their points are the
  // cost model's own, from a profile of positive figures, on either side of kStepGroupedRows.
  const CostModel model(sim::load_profile("a100-80gb-pcie4"));
  PointsFile p{"c", "d", "2026-12-02", "cmd", {}};
  for (const CalibrationTerm& t : calibration_terms()) {
    PointSeries s{std::string(t.term), {{}, {}, {}}};
    for (std::string_view in : t.inputs)
      s.samples.inputs.emplace_back(in);
    const bool beside = t.term == "step_beside" || t.term == "step_beside_wide";
    for (int i = 0; i < 24; ++i) {
      std::vector<double> x;
      double y = 1.0;
      for (std::size_t j = 0; j < t.inputs.size(); ++j) {
        x.push_back(1.0 + static_cast<double>((i * (j + 1) * 7 + j * 3) % 13) * 100.0);
        y += 0.01 * x.back();
      }
      if (t.term == "attention_warm") {  // one decode row, attends faster than priced
        x[0] = 1;
        y = 0.5 + 0.001 * i;
      }
      if (beside) {  // rows, pages, slots, misses
        x[0] = static_cast<double>(t.term == "step_beside" ? 1 + i % kStepGroupedRows
                                                           : kStepGroupedRows + 1 + i);
        x[3] = i % 3 == 0 ? 0 : x[3];
        y = 1e-3 * static_cast<double>(model.step_beside_ns(
                       static_cast<std::int64_t>(x[0]), static_cast<std::int64_t>(x[1]),
                       static_cast<std::int64_t>(x[2]), static_cast<std::int64_t>(x[3])));
      }
      s.samples.x.push_back(x);
      s.samples.y.push_back(y);
    }
    p.series.push_back(s);
  }
  const ProfileFit f = fit_profile(p, sim::load_profile("a100-80gb-pcie4"));
  EXPECT_FALSE(f.profile.scaled_from_datasheets);
  EXPECT_TRUE(f.report.kept.empty());
  for (const SeriesFit& s : f.report.series) {
    if (s.term != "hbm_read" && s.term != "zero_copy_write" && s.term != "ensure_beside") {
      EXPECT_FALSE(s.fields.empty()) << s.term;
    }
  }
}

}  // namespace
}  // namespace kvtier::fit

namespace kvtier::fit {
namespace {

// The host bank's store with too few sizes for two pieces (3 distinct, 4 needed): priced as
// the line from 0 bytes, and the report says so.
TEST(ProfileFit, AHostStoreWithoutAKneePricesTheLine) {
  PointsFile p{"c", "d", "2026-12-02", "cmd", {}};
  PointSeries sh{"store_host", {{"bytes"}, {}, {}}};
  for (double x : {2048.0, 524288.0, 8388608.0}) {
    sh.samples.x.push_back({x});
    sh.samples.y.push_back(2.0 + x / 50000);
  }
  p.series.push_back(sh);
  const ProfileFit f = fit_profile(p, sim::load_profile("h200-pcie5"));
  EXPECT_NEAR(f.profile.store_host_us, 2.0, 1e-6);
  EXPECT_EQ(f.profile.store_host_knee_bytes, 0.0);
  EXPECT_EQ(f.profile.store_host_ns_per_kib, 0.0);
  EXPECT_NEAR(f.profile.zero_copy_write_gbps, 50.0, 1e-6);
  ASSERT_FALSE(f.report.series[0].notes.empty());
  EXPECT_NE(f.report.series[0].notes[0].find("no knee"), std::string::npos);
}

// The one-CTA-per-row top-k, as the calibration sweeps it: decode batches (64 - 128 rows) and
// prefill chunks (256 - 2,048 rows of one request) over their contexts. Each row's CTA costs
// besides its blocks, which row blocks alone cannot tell apart (2,048 rows of 16k see fewer
// blocks than 512 of 128k).
TEST(ProfileFit, TheOneCtaTopkPaysPerRowAndPerRowBlock) {
  PointsFile p{"c", "d", "2026-12-03", "cmd", {}};
  PointSeries s{"topk_one_cta", {{"row_blocks", "rows"}, {}, {}}};
  for (double rows : {64.0, 128.0, 256.0, 512.0, 2048.0}) {
    for (double ctx : {16384.0, 32768.0, 131072.0}) {
      const double rb = rows * ctx / 4;
      s.samples.x.push_back({rb, rows});
      s.samples.y.push_back(8.0 + rb * 0.0055e-3 + rows * 0.07);
    }
  }
  p.series.push_back(s);
  const HardwareProfile f = fit_profile(p, sim::load_profile("h200-pcie5")).profile;
  EXPECT_NEAR(f.topk_one_cta_fixed_us, 8.0, 1e-6);
  EXPECT_NEAR(f.topk_one_cta_ns_per_row_block, 0.0055, 1e-9);
  EXPECT_NEAR(f.topk_one_cta_ns_per_row, 70.0, 1e-6);
  EXPECT_EQ(CostModel(f).topk_ns(2048 * 4096, TopkPath::one_cta, 2048), 8'000 + 46'137 + 143'360);
}

}  // namespace
}  // namespace kvtier::fit

namespace kvtier::fit {
namespace {

// Points files of 2026-12-03 and before time the step beside without its rows and pages
// (ensure_beside): that series is read and fitted for the report but prices nothing, and the
// step beside keeps the base profile's values and sources.
TEST(ProfileFit, TheRetiredBesideSeriesPricesNothing) {
  PointsFile p = synthetic(Truth{}, 0.0);
  std::erase_if(p.series, [](const PointSeries& s) { return s.term.starts_with("step_beside"); });
  PointSeries old{"ensure_beside", {{"lookups", "slots", "misses"}, {}, {}}};
  for (double lookups : {514.0, 4112.0})
    for (double slots : {8192.0, 32768.0})
      for (double misses : {0.0, 16.0}) {
        old.samples.x.push_back({lookups, slots, misses});
        old.samples.y.push_back(10 + lookups * 0.002 + (misses > 0 ? slots * 0.001 : 0));
      }
  p.series.push_back(old);
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const ProfileFit f = fit_profile(p, base);
  for (const char* field :
       {"step_beside_fixed_us", "step_beside_us_per_row_doubling", "step_beside_ns_per_page",
        "step_beside_wide_ns_per_row", "step_beside_copy_gbps"}) {
    EXPECT_EQ(f.profile.param(field), base.param(field)) << field;
    EXPECT_EQ(f.profile.source(field), base.source(field)) << field;
  }
  for (const char* term : {"step_beside", "step_beside_wide", "step_beside_copy"})
    EXPECT_NE(std::find(f.report.kept.begin(), f.report.kept.end(), term), f.report.kept.end())
        << term;
  const auto s = std::find_if(f.report.series.begin(), f.report.series.end(),
                              [](const SeriesFit& x) { return x.term == "ensure_beside"; });
  ASSERT_NE(s, f.report.series.end());
  EXPECT_TRUE(s->fields.empty());
  ASSERT_EQ(s->unpriced.size(), 1u);
  EXPECT_NE(s->unpriced[0].note.find("retired"), std::string::npos);
  // The full-grid step's own fit moves on without it.
  EXPECT_NE(f.profile.source("ensure_fixed_us").find("fitted"), std::string::npos);
}

// A profile written before the step beside took its rows and pages names a retired parameter:
// refused with what replaced it, not as an unknown one.
TEST(ProfileFit, AProfileWithTheRetiredBesideTermsIsRefusedWithTheReason) {
  std::string text = hardware_profile_to_json(sim::load_profile("h200-pcie5"));
  const std::string key = "\"step_beside_fixed_us\"";
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, key.size(), "\"ensure_beside_fixed_us\"");
  try {
    (void)hardware_profile_from_json(text);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ensure_beside_fixed_us: retired parameter"), std::string::npos) << what;
    EXPECT_NE(what.find("step_beside_"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace kvtier::fit
