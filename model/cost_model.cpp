#include "model/cost_model.hpp"

#include <cmath>
#include <utility>

namespace kvtier {
namespace {
std::int64_t ns(double x) {
  return static_cast<std::int64_t>(std::llround(x));
}
double d(std::int64_t x) {
  return static_cast<double>(x);
}
}  // namespace

CostModel::CostModel(HardwareProfile profile, bool graphs)
    : p_(std::move(profile)), graphs_(graphs) {
  p_.validate();
}

std::int64_t CostModel::launch_ns(int kernels) const {
  return ns(kernels * (graphs_ ? p_.graph_launch_us : p_.launch_us) * 1e3);
}

std::int64_t CostModel::h2d_copy_ns(std::int64_t bytes, std::int64_t transfers) const {
  if (bytes <= 0) return 0;
  return ns(d(transfers) * p_.pcie_latency_us * 1e3 + d(bytes) / p_.pcie_h2d_gbps);
}

std::int64_t CostModel::d2h_copy_ns(std::int64_t bytes, std::int64_t transfers) const {
  if (bytes <= 0) return 0;
  return ns(d(transfers) * p_.pcie_latency_us * 1e3 + d(bytes) / p_.pcie_d2h_gbps);
}

std::int64_t CostModel::zero_copy_read_ns(std::int64_t bytes) const {
  if (bytes <= 0) return 0;
  return ns(p_.pcie_latency_us * 1e3 + d(bytes) / p_.zero_copy_read_gbps);
}

std::int64_t CostModel::zero_copy_write_ns(std::int64_t bytes) const {
  if (bytes <= 0) return 0;
  return ns(p_.pcie_latency_us * 1e3 + d(bytes) / p_.zero_copy_write_gbps);
}

std::int64_t CostModel::hbm_read_ns(std::int64_t bytes) const {
  return bytes <= 0 ? 0 : ns(d(bytes) / p_.hbm_gbps);
}

std::int64_t CostModel::indexer_ns(std::int64_t row_blocks) const {
  return ns(d(row_blocks) * p_.indexer_ns_per_row_block);
}

std::int64_t CostModel::topk_ns(std::int64_t row_blocks) const {
  return ns(d(row_blocks) * p_.topk_ns_per_row_block);
}

std::int64_t CostModel::ensure_ns(std::int64_t lookups, std::int64_t slots,
                                  std::int64_t misses) const {
  return ns(p_.ensure_fixed_us * 1e3 + d(lookups) * p_.ensure_ns_per_lookup +
            ensure_slots_scanned(d(slots), d(misses)) * p_.ensure_ns_per_slot +
            d(misses) * p_.ensure_ns_per_miss);
}

std::int64_t CostModel::attention_ns(std::int64_t hbm_bytes, KvDtype dtype) const {
  if (dtype == KvDtype::fp8) {
    return ns(p_.attention_fp8_fixed_us * 1e3 +
              (hbm_bytes <= 0 ? 0.0 : d(hbm_bytes) / p_.attention_fp8_gbps));
  }
  return ns(p_.attention_fixed_us * 1e3) + hbm_read_ns(hbm_bytes);
}

std::int64_t CostModel::non_qsa_ns(std::int64_t tokens) const {
  return ns((p_.non_qsa_forward_us + d(tokens) * p_.non_qsa_token_us) * 1e3);
}

}  // namespace kvtier
