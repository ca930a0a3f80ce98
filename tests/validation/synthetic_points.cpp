#include "tests/validation/synthetic_points.hpp"

#include <algorithm>
#include <random>

#include "model/attend_grid.hpp"
#include "model/calibration_terms.hpp"
#include "model/cost_model.hpp"

namespace kvtier::fit::fixtures {
namespace {}  // namespace

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

}  // namespace kvtier::fit::fixtures
