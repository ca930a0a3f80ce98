#include "sim/replay_config.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/device_budget.hpp"
#include "model/micro_batch_choice.hpp"
#include "sim/micro_batch_groups.hpp"

namespace kvtier::sim {
namespace {

std::int64_t ceil_share(std::int64_t total, int groups) {
  return (total + groups - 1) / groups;
}

}  // namespace

void check_config(const SimConfig& cfg) {
  const bool mirror = cfg.placement == Placement::mirror;
  if (cfg.policy != MirrorPolicy::lru && !mirror) {
    throw ConfigError("policy " + std::string(to_string(cfg.policy)) +
                      " needs placement mirror (it decides what the GPU pool holds)");
  }
  if (mirror && cfg.pool_slots <= 0) {
    throw ConfigError(cfg.pool_slots == 0
                          ? "placement mirror needs a pool size (--slots N)"
                          : "pool size must be positive, got " + std::to_string(cfg.pool_slots));
  }
  if (cfg.hybrid_window <= 0) throw ConfigError("hybrid window must be positive");
  if (cfg.micro_batches != 1) {
    if (cfg.micro_batches < 1 || cfg.micro_batches > kMaxSimMicroBatches)
      throw ConfigError("--micro-batches: 1.." + std::to_string(kMaxSimMicroBatches) + ", got " +
                        std::to_string(cfg.micro_batches));
    if (cfg.placement == Placement::device)
      throw ConfigError(
          "--micro-batches: placement host or mirror (they overlap one group's reads over the link "
          "with the others' work; device placement runs one batch)");
    if (cfg.forward != frontend::ForwardKind::model)
      throw ConfigError(
          "--micro-batches: the model's forward only (the GPU trace replay runs one batch)");
    if (cfg.placement == Placement::host && cfg.dtype == KvDtype::fp8)
      throw ConfigError(
          "--micro-batches: not priced for host fp8 (its attend reading in place is priced as one "
          "kernel holding the whole GPU, so the groups' attends would run one after another; on "
          "the H200 they run side by side: bench/results/micro-batches-h200-2026-12-03.md)");
    if (mirror && cfg.pool_slots < cfg.micro_batches)
      throw ConfigError("--micro-batches: " + std::to_string(cfg.micro_batches) +
                        " groups need a pool slot each, the pool has " +
                        std::to_string(cfg.pool_slots));
  }
}

std::int64_t group_share(std::int64_t total, int groups, int k) {
  return (std::int64_t{k} + 1) * total / groups - std::int64_t{k} * total / groups;
}

MemoryBudget price_memory(const Geometry& g, const frontend::TraceBounds& stats,
                          const CostModel& cost, const SimConfig& cfg) {
  BudgetRequest br;
  br.geometry = g;
  br.dtype = cfg.dtype;
  br.placement = cfg.placement;
  br.unit = cfg.unit;
  br.host_pages = stats.peak_pages;
  br.pool_slots = cfg.pool_slots;
  br.batch_rows = std::max(1, stats.max_rows);
  br.batch_tokens = stats.max_tokens;
  br.write_pages = stats.max_write_pages;
  br.context_tokens = std::max<std::int64_t>(1, stats.max_context);
  br.staging_window_tokens = cfg.staging_window_tokens;
  const std::int64_t capacity = cfg.device_kv_bytes > 0
                                    ? cfg.device_kv_bytes
                                    : gib_to_bytes(cost.profile().device_memory_gib);
  const int k = cfg.micro_batches;
  if (k == 1) {
    if (cfg.check_memory) br.device_capacity_bytes = capacity;
    return memory_budget(br);
  }
  // Micro-batches: each group allocates for its share of the widest forward, of the requests'
  // pages (the indexer slab and the residency state cover its own requests' page space) and of
  // the pool, as each micro-batch's runner does (runner::budget_request); the host bank is
  // every request's pages, priced once.
  const MemoryBudget whole = memory_budget(br);
  br.batch_rows = static_cast<int>(ceil_share(br.batch_rows, k));
  br.batch_tokens = ceil_share(br.batch_tokens, k);
  br.write_pages = static_cast<int>(ceil_share(br.write_pages, k));
  br.host_pages = ceil_share(br.host_pages, k);
  MemoryBudget sum;
  sum.host = whole.host;
  sum.host_bytes = whole.host_bytes;
  for (int g_i = 0; g_i < k; ++g_i) {
    br.pool_slots = group_share(cfg.pool_slots, k, g_i);
    const MemoryBudget group = memory_budget(br);
    for (const MemoryItem& item : group.device)
      sum.device.push_back({"micro-batch " + std::to_string(g_i) + ": " + item.name, item.bytes});
    sum.device_bytes += group.device_bytes;
    if (g_i == 0) {
      sum.select_width_pages = group.select_width_pages;
      sum.no_drop_slots = group.no_drop_slots;
    }
  }
  if (cfg.check_memory && sum.device_bytes > capacity) {
    throw CapacityError(device_memory_shortfall(sum.device_bytes, capacity) + " (" +
                        std::to_string(k) + " micro-batches, each with its share)");
  }
  return sum;
}

bool prices_micro_batches(Placement p, KvDtype dtype) {
  return p != Placement::device && !(p == Placement::host && dtype == KvDtype::fp8);
}

std::int64_t group_min_pool(const frontend::TraceBounds& st, int groups) {
  return ceil_share(std::max(1, st.max_rows), groups) + ceil_share(st.max_write_pages, groups);
}

int auto_micro_batches(const CostModel& cost, const Geometry& g, const frontend::TraceBounds& st,
                       Placement p, KvDtype dtype, std::int64_t pool_slots) {
  const int rows = st.max_rows;
  if (rows < 2 || !prices_micro_batches(p, dtype)) return 1;
  const std::int64_t context = std::max<std::int64_t>(1, st.max_context);
  if (p == Placement::host)
    return choose_micro_batches(cost, g, dtype, rows, context).micro_batches;
  std::vector<std::vector<MirrorGroup>> candidates;
  for (const int k : {1, 2, 4}) {
    if (k > rows) break;
    if (k > 1 && pool_slots / k < group_min_pool(st, k)) continue;  // the smallest share
    std::vector<MirrorGroup> groups;
    for (int i = 0; i < k; ++i)
      groups.push_back({static_cast<int>(group_share(rows, k, i)), group_share(pool_slots, k, i)});
    candidates.push_back(std::move(groups));
  }
  return choose_mirror_micro_batches(cost, g, dtype, context, candidates).micro_batches;
}

}  // namespace kvtier::sim
