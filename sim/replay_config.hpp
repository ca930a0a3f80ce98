#pragma once
// What a simulation's configuration asks for before the replay: its checks, the groups' shares
// of the pool (micro-batches), and its start-up memory (model/memory_budget, per group).
#include <cstdint>

#include "frontend/front_end.hpp"
#include "model/cost_model.hpp"
#include "model/memory_budget.hpp"
#include "sim/replay.hpp"

namespace kvtier::sim {

// Throws ConfigError for a configuration the simulator does not run (the reason and the option
// that sets it).
void check_config(const SimConfig& cfg);

// Group k's share of `total` when `groups` groups split it as evenly as it goes (the larger
// shares last).
std::int64_t group_share(std::int64_t total, int groups, int k);

// Whether the simulator prices micro-batches of a placement and dtype: host and mirror, not
// the device placement (it runs one batch) nor host fp8 (its attend reading in place is one
// compute-bound kernel here, so its groups would run one after another).
bool prices_micro_batches(Placement p, KvDtype dtype);

// The smallest pool of one of `groups` groups: its share of the widest forward's rows and of the
// pages it writes, each rounded up.
std::int64_t group_min_pool(const frontend::TraceBounds& st, int groups);

// --micro-batches auto: the count `kvtier run --micro-batches auto` takes for a trace's widest
// forward (its rows as requests) at its longest context, on `cost`'s profile
// (model/micro_batch_choice.hpp): host by its link and work, a mirror pool of `pool_slots` by
// the groups' shares of it (a count whose groups' pools cannot hold their share of the widest
// step is no candidate). One batch where the run would not split: fewer than two rows, the
// device placement, host fp8 (whose groups the simulator does not price).
int auto_micro_batches(const CostModel& cost, const Geometry& g, const frontend::TraceBounds& st,
                       Placement p, KvDtype dtype, std::int64_t pool_slots);

// The start-up budget, always priced (the planner reports whether each configuration fits the
// card); with check_memory a configuration that does not fit is an error (CapacityError).
MemoryBudget price_memory(const Geometry& g, const frontend::TraceBounds& stats,
                          const CostModel& cost, const SimConfig& cfg);

}  // namespace kvtier::sim
