#include "model/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "model/attend_grid.hpp"
#include "model/config_error.hpp"

namespace kvtier {
namespace {
// A priced duration in whole ns. Past 2^62 ns (146 years: a rate near zero or a fixed cost no
// GPU has, in a profile that passed its checks) it is refused: rounded, it would wrap.
std::int64_t ns(double x) {
  constexpr double kMaxPricedNs = 4.611686018427388e18;  // 2^62
  if (!(x < kMaxPricedNs)) {
    char v[32];
    std::snprintf(v, sizeof v, "%.3g", x);
    throw ConfigError(std::string("cost model: an op priced at ") + v +
                      " ns is past what the simulator times (2^62 ns); the profile's rates and "
                      "fixed costs are far from any GPU's");
  }
  return static_cast<std::int64_t>(std::llround(x));
}
double d(std::int64_t x) {
  return static_cast<double>(x);
}
// ns for `x` bytes in two pieces joined at `knee` bytes: `per_kib` ns per KiB up to it, the
// bytes past it at `gbps` (knee 0: every byte at `gbps`).
double two_pieces(double x, double knee, double per_kib, double gbps) {
  return std::min(x, knee) * per_kib / 1024.0 + std::max(0.0, x - knee) / gbps;
}
// `bytes` at `gbps`, nothing for none.
std::int64_t rate_ns(std::int64_t bytes, double gbps) {
  return bytes <= 0 ? 0 : ns(d(bytes) / gbps);
}
// A kernel call's fixed part plus `ns_per_unit` for each of `units`.
std::int64_t fixed_plus(double fixed_us, double ns_per_unit, std::int64_t units) {
  return ns(fixed_us * 1e3 + d(units) * ns_per_unit);
}
}  // namespace

CostModel::CostModel(HardwareProfile profile, bool graphs)
    : p_(std::move(profile)), graphs_(graphs) {
  p_.validate();
}

std::int64_t CostModel::launch_ns(int kernels) const {
  return ns(kernels * (graphs_ ? p_.graph_launch_us : p_.launch_us) * 1e3);
}

std::int64_t CostModel::kernel_launch_ns(int kernels) const {
  return graphs_ ? 0 : ns(kernels * std::max(0.0, p_.launch_us - p_.graph_launch_us) * 1e3);
}

std::int64_t CostModel::h2d_copy_ns(std::int64_t bytes, std::int64_t transfers) const {
  if (bytes <= 0) return 0;
  return ns(d(transfers) * p_.pcie_latency_us * 1e3 + d(bytes) / p_.pcie_h2d_gbps);
}

std::int64_t CostModel::d2h_copy_ns(std::int64_t bytes, std::int64_t transfers) const {
  if (bytes <= 0) return 0;
  return ns(d(transfers) * p_.pcie_latency_us * 1e3 + d(bytes) / p_.pcie_d2h_gbps);
}

std::int64_t CostModel::staging_ns(std::int64_t bytes, std::int64_t windows) const {
  if (bytes <= 0) return 0;
  if (p_.staging_gbps <= 0) return h2d_copy_ns(bytes, windows);
  return ns(d(windows) * p_.staging_fixed_us * 1e3) + rate_ns(bytes, p_.staging_gbps);
}

std::int64_t CostModel::window_fold_ns(std::int64_t windows, std::int64_t window_rows) const {
  if (windows <= 0 || p_.staging_gbps <= 0) return 0;
  return ns(d(windows) * p_.window_fold_fixed_us * 1e3 +
            d(window_rows) * p_.window_fold_ns_per_row);
}

std::int64_t CostModel::fold_reset_ns(std::int64_t rows) const {
  if (rows <= 0 || p_.staging_gbps <= 0) return 0;
  return fixed_plus(p_.fold_reset_fixed_us, p_.fold_reset_ns_per_row, rows);
}

std::int64_t CostModel::zero_copy_read_ns(std::int64_t bytes) const {
  if (bytes <= 0) return 0;
  return ns(p_.pcie_latency_us * 1e3 + d(bytes) / p_.zero_copy_read_gbps);
}

std::int64_t CostModel::zero_copy_write_ns(std::int64_t bytes) const {
  if (bytes <= 0) return 0;
  return ns(p_.pcie_latency_us * 1e3 + d(bytes) / p_.zero_copy_write_gbps);
}

std::int64_t CostModel::in_place_read_ns(std::int64_t bytes) const {
  return rate_ns(bytes, p_.zero_copy_read_gbps);
}

std::int64_t CostModel::hbm_read_ns(std::int64_t bytes) const {
  return rate_ns(bytes, p_.hbm_gbps);
}

std::int64_t CostModel::indexer_ns(std::int64_t row_blocks, IndexPath path) const {
  return path == IndexPath::prefill
             ? fixed_plus(p_.indexer_prefill_fixed_us, p_.indexer_prefill_ns_per_row_block,
                          row_blocks)
             : fixed_plus(p_.indexer_fixed_us, p_.indexer_ns_per_row_block, row_blocks);
}

std::int64_t CostModel::topk_ns(std::int64_t row_blocks, TopkPath path, std::int64_t rows) const {
  switch (path) {
    case TopkPath::one_cta:
      return fixed_plus(p_.topk_one_cta_fixed_us, p_.topk_one_cta_ns_per_row_block, row_blocks) +
             ns(d(rows) * p_.topk_one_cta_ns_per_row);
    case TopkPath::chain:
      return fixed_plus(p_.topk_chain_fixed_us, p_.topk_chain_ns_per_row_block, row_blocks);
    case TopkPath::cluster:
      break;
  }
  return fixed_plus(p_.topk_fixed_us, p_.topk_ns_per_row_block, row_blocks);
}

std::int64_t CostModel::projection_ns(std::int64_t weight_bytes, std::int64_t rows) const {
  if (weight_bytes <= 0 || rows <= 0) return 0;
  const double read = d(weight_bytes) / p_.projection_gbps;
  if (rows <= kNarrowProjectionRows)
    return ns(p_.projection_fixed_us * 1e3 + read + d(rows) * p_.projection_ns_per_row);
  // weight bytes x rows = flops (2 FLOP a weight a row, 2 bytes a weight); 1 TFLOP/s = 1,000
  // flops a ns
  const double flops = d(weight_bytes) * d(rows);
  return ns(p_.projection_wide_fixed_us * 1e3 +
            std::max(read, flops / (p_.projection_wide_tflops * 1e3)));
}

std::int64_t CostModel::layer_ops_ns(std::int64_t rows) const {
  return rows <= 0 ? 0 : fixed_plus(p_.layer_ops_fixed_us, p_.layer_ops_ns_per_row, rows);
}

std::int64_t CostModel::ensure_ns(std::int64_t lookups, std::int64_t slots,
                                  std::int64_t misses) const {
  return ns(p_.ensure_fixed_us * 1e3 + d(lookups) * p_.ensure_ns_per_lookup +
            ensure_slots_scanned(d(slots), d(misses)) * p_.ensure_ns_per_slot +
            d(misses) * p_.ensure_ns_per_miss);
}

std::int64_t CostModel::step_beside_ns(std::int64_t rows, std::int64_t pages, std::int64_t slots,
                                       std::int64_t misses) const {
  const double scanned = ensure_slots_scanned(d(slots), d(misses));
  const double pages_missing = misses > 0 ? d(pages) : 0.0;
  if (rows > kStepGroupedRows) {
    return ns(p_.step_beside_wide_fixed_us * 1e3 + d(rows) * p_.step_beside_wide_ns_per_row +
              d(pages) * p_.step_beside_wide_ns_per_page +
              scanned * p_.step_beside_wide_ns_per_slot +
              d(misses) * p_.step_beside_wide_ns_per_miss +
              pages_missing * p_.step_beside_wide_ns_per_page_missing);
  }
  return ns(p_.step_beside_fixed_us * 1e3 +
            row_doublings(d(rows)) * p_.step_beside_us_per_row_doubling * 1e3 +
            d(pages) * p_.step_beside_ns_per_page + scanned * p_.step_beside_ns_per_slot +
            d(misses) * p_.step_beside_ns_per_miss +
            pages_missing * p_.step_beside_ns_per_page_missing +
            (misses > 0 ? p_.step_beside_us_missing * 1e3 : 0.0));
}

std::int64_t CostModel::step_beside_copy_ns(std::int64_t bytes) const {
  if (bytes <= 0) return 0;
  return ns(p_.step_beside_copy_us * 1e3 + d(bytes) / p_.step_beside_copy_gbps);
}

std::int64_t CostModel::store_ns(std::int64_t device_bytes, std::int64_t host_bytes,
                                 KvDtype dtype) const {
  const bool fp8 = dtype == KvDtype::fp8;
  double t = device_bytes <= 0 ? 0.0
             : fp8 ? two_pieces(d(device_bytes), p_.store_fp8_knee_bytes, p_.store_fp8_ns_per_kib,
                                p_.store_fp8_hbm_gbps)
                   : two_pieces(d(device_bytes), p_.store_knee_bytes, p_.store_ns_per_kib,
                                p_.store_hbm_gbps);
  if (host_bytes > 0) {
    const double knee = fp8 ? p_.store_fp8_host_knee_bytes : p_.store_host_knee_bytes;
    const double per_kib = fp8 ? p_.store_fp8_host_ns_per_kib : p_.store_host_ns_per_kib;
    const double host_gbps = fp8 ? p_.store_fp8_host_gbps : p_.zero_copy_write_gbps;
    const double x = d(host_bytes);
    t += (fp8 ? p_.store_fp8_host_us : p_.store_host_us) * 1e3 +
         std::min(x, knee) * per_kib / 1024.0 + std::max(0.0, x - knee) / host_gbps;
  } else {
    t += (fp8 ? p_.store_fp8_fixed_us : p_.store_fixed_us) * 1e3;
  }
  return ns(t);
}

std::int64_t CostModel::attend_ctas(int rows, int kv_heads, int width) const {
  return kvtier::attend_ctas(rows, kv_heads, width, static_cast<int>(p_.sm_count));
}

std::int64_t CostModel::attend_cta_tokens(int rows, int kv_heads, int width) const {
  return kvtier::attend_cta_tokens(rows, kv_heads, width, static_cast<int>(p_.sm_count));
}

std::int64_t CostModel::attention_ns(std::int64_t hbm_bytes, std::int64_t rows, std::int64_t ctas,
                                     KvDtype dtype, std::int64_t cta_tokens) const {
  if (dtype == KvDtype::fp8) {
    return ns(p_.attention_fp8_fixed_us * 1e3 + d(rows) * p_.attention_fp8_ns_per_row +
              (hbm_bytes <= 0 ? 0.0
                              : two_pieces(d(hbm_bytes), p_.attention_fp8_knee_bytes,
                                           p_.attention_fp8_ns_per_kib, p_.attention_fp8_gbps)));
  }
  const std::int64_t walk = ns(d(cta_tokens) * p_.attention_ns_per_cta_token);
  if (past_one_wave(ctas)) {
    return ns(p_.attention_waves_fixed_us * 1e3 + d(ctas) * p_.attention_waves_ns_per_cta) +
           std::max(rate_ns(hbm_bytes, p_.attention_waves_gbps), walk);
  }
  return ns(p_.attention_fixed_us * 1e3 + d(ctas) * p_.attention_ns_per_cta) +
         std::max(hbm_read_ns(hbm_bytes), walk);
}

bool CostModel::past_one_wave(std::int64_t ctas) const {
  return p_.attention_waves_gbps > 0 &&
         ctas > kvtier::attend_wave_ctas(static_cast<int>(p_.sm_count));
}

std::int64_t CostModel::attention_l2_reuse_ns(std::int64_t working_set_bytes) const {
  if (p_.attention_l2_reuse_us <= 0) return 0;
  return ns(p_.attention_l2_reuse_us * 1e3 *
            l2_reuse_reach(d(working_set_bytes), p_.attention_l2_reuse_full_bytes,
                           p_.attention_l2_reuse_none_bytes));
}

std::int64_t CostModel::attention_fp8_host_ns(std::int64_t bytes, std::int64_t rows) const {
  return ns(p_.attention_fp8_host_fixed_us * 1e3 + d(rows) * p_.attention_fp8_host_ns_per_row +
            (bytes <= 0
                 ? 0.0
                 : two_pieces(d(bytes), p_.attention_fp8_host_knee_bytes,
                              p_.attention_fp8_host_ns_per_kib, p_.attention_fp8_host_gbps)));
}

std::int64_t CostModel::non_qsa_ns(std::int64_t tokens) const {
  return ns((p_.non_qsa_forward_us + d(tokens) * p_.non_qsa_token_us) * 1e3);
}

}  // namespace kvtier
