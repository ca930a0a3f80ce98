#pragma once
#include <climits>
#include <cstdint>
#include <functional>
#include <vector>

#include "frontend/front_end.hpp"
#include "model/page_space.hpp"
#include "model/placement.hpp"
#include "sim/stack_distance.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {

// Misses of an LRU pool at every size, from the histogram of stack depths.
struct MissCurve {
  std::int64_t lookups = 0;                 // distinct pages per step, summed
  std::vector<std::int64_t> hits_at_depth;  // [depth] references at that depth (index 0 unused)
  std::int64_t misses(std::int64_t slots) const;
  void merge(const MissCurve& o);
};

// The queries of a trace, per residency state, recorded for the Belady bound: a page id
// (>= 0), kStepEnd after each layer-step, or release_code(p) when page p's request ended.
//
// Memory: 8 bytes per entry (the entry and its next use), O(trace length): the only part of
// the planner that is. miss_ratio_curve caps it (max_log_entries over all states); past the
// cap the log is dropped (`dropped`) and the planner reports no Belady bound rather than
// running out of memory.
struct QueryLog {
  static constexpr std::int32_t kStepEnd = -1;
  static constexpr std::int32_t kNever = INT32_MAX;
  static constexpr std::int32_t release_code(PageId p) { return -2 - p; }
  PageId num_pages = 0;
  bool dropped = false;
  std::vector<std::vector<std::int32_t>> states;
  // [state][i]: index in states[state] of the next reference to the same page, kNever when
  // none (a release ends a page's life); computed once, shared by every pool size.
  std::vector<std::vector<std::int32_t>> next_use;
  std::int64_t entries() const;
  void index_next_uses();
};

struct MrcResult {
  MissCurve curve;                   // all states together (pool of `slots` per state)
  std::vector<MissCurve> per_layer;  // by QSA layer (layer unit: that layer's pool)
  std::int64_t max_step_pages = 0;   // most distinct pages one layer-step queries
  // The same over the pages a mirror pool must hold: the write pages and the decode rows'
  // (a prefill row whose union outgrows the pool bypasses it: FrontEnd::plan_rows).
  std::int64_t max_pool_step_pages = 0;
  std::int64_t peak_bytes = 0;   // stacks + per-step dedupe arrays, largest seen
  std::int64_t log_entries = 0;  // entries the query log holds, or would (kept or not)
  QueryLog log;                  // filled when asked for
};

// One pass over the trace with untruncated selections (no width limit), per residency unit.
// on_forward: forwards done, for progress.
inline constexpr std::int64_t kDefaultMaxLogEntries = std::int64_t{1} << 26;  // 512 MiB
MrcResult miss_ratio_curve(const traces::TraceInput& input, const frontend::TraceBounds& stats,
                           ResidencyUnit unit, bool keep_log,
                           std::int64_t max_log_entries = kDefaultMaxLogEntries,
                           const std::function<void(std::int64_t)>& on_forward = {});
// An upper bound on the entries of the query log of `unit` from the pre-pass alone: when it
// is within the cap, the curve's pass may keep the log without risking memory for nothing.
std::int64_t query_log_bound(const frontend::TraceBounds& stats, const Geometry& g,
                             ResidencyUnit unit);

// Fewest misses any policy could have (Belady: evict the page used furthest in the future)
// with `slots` slots per state; every page of a step must be resident at the step.
// Requires slots >= the most distinct pages of one step and a log that was not dropped
// (throws ConfigError otherwise). Several calls may run at once on one log.
std::int64_t belady_misses(const QueryLog& log, std::int64_t slots);

}  // namespace kvtier::sim
