#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/device_budget.hpp"
#include "sim/mrc.hpp"
#include "sim/recommend.hpp"
#include "sim/replay.hpp"
#include "sim/rest_of_model.hpp"

namespace kvtier::sim {

// The most automatic sizes a plan sweeps (each is a simulation of the whole trace) and the
// most threads it runs on.
inline constexpr int kMaxPlanPoints = 1000;
inline constexpr int kMaxPlanThreads = 1024;
// A Belady entry for a size below the largest step of the curves' log (no figure).
inline constexpr std::int64_t kNoBelady = -1;

struct PlanConfig {
  std::vector<Placement> placements = {Placement::device, Placement::mirror, Placement::host};
  std::vector<ResidencyUnit> units = {ResidencyUnit::layer_page, ResidencyUnit::all_layers_page};
  KvDtype dtype = KvDtype::bf16;
  MirrorPolicy policy = MirrorPolicy::lru;  // for the mirror sweep
  std::vector<std::int64_t> sizes;          // pool slots; empty: `points` sizes from the smallest
                                            // that fits the batch selection to everything resident
  int points = 10;
  double within = 0.05;     // "smallest pool within this fraction of the recommendation"
  double chosen = 0.10;     // a second, user-chosen fraction
  ObjectiveSpec objective;  // what the recommendation ranks by
  // The KV tier's device budget B (--device-kv-gib); 0: the profile's device memory.
  std::int64_t device_kv_bytes = 0;
  std::int64_t host_capacity_bytes = 0;  // the host RAM for pinned banks; 0: not checked
  // Host and mirror in this many micro-batches (SimConfig::micro_batches; each mirror size is
  // the groups' pools together); the device placement, the ideal, in one batch, and host fp8
  // too (its groups are not priced). micro_batches_auto: per configuration, the count
  // `kvtier run --micro-batches auto` would take (model/micro_batch_choice.hpp on this plan's
  // profile, for the trace's widest forward at its longest context) instead.
  int micro_batches = 1;
  bool micro_batches_auto = false;
  bool belady = true;
  // Belady needs the whole query log in memory (8 B per entry); past this many entries per
  // unit it is skipped and said so.
  std::int64_t belady_max_entries = kDefaultMaxLogEntries;
  int threads = 0;  // 0: every core
  // Progress, always from the calling thread: a stage begins (scanning the trace, the
  // miss-ratio curves, the simulations), and work done in the current stage out of its total
  // (total 0: not known yet), about ten times a second.
  std::function<void(const std::string& stage)> on_stage;
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
};

// One summary of a simulation, as the planner reports it.
struct PointSummary {
  double decode_tps = 0;
  double prefill_tps = 0;
  double hit_rate = 0;
  bool has_lookups = false;  // a pool was queried (mirror); else the hit rate means nothing
  std::int64_t misses = 0;
  std::int64_t drops = 0;
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  double h2d_util = 0;
  std::vector<double> layer_hit_rate;
  std::int64_t device_bytes = 0;  // the start-up memory budget on the device
  std::int64_t host_bytes = 0;    // and in pinned host memory
  bool fits_device = true;        // device_bytes within the KV budget (plan: B)
  double forward_us = 0;          // every forward's time, summed
  // The QSA stack's share of forward_us: forward_us less the rest of the model (PlanResult's
  // rest_us), i.e. what the QSA layers' ops add to the critical path. Set by plan().
  double qsa_us = 0;
  // The time a request waits for each decode token, in ms: the span of the forward that
  // produces it (a mixed forward's prefill rows included), averaged over the decode tokens.
  // The TPOT figure (recommend.hpp tpot_ms); needs SimConfig::record_forwards (plan sets it).
  double decode_step_ms = 0;
  // Latency (SimResult::latency; docs/planner.md, "Latency figures"): TTFT across requests,
  // TPOT over every decode token's gap to its request's previous token; microseconds, 0 when
  // the trace has none.
  double ttft_p50_us = 0, ttft_p95_us = 0;
  double tpot_p50_us = 0, tpot_p95_us = 0, tpot_p99_us = 0;
  int micro_batches = 1;  // the groups it was simulated in (PlanConfig::micro_batches)
};
// `device_capacity_bytes` <= 0: not checked (fits_device stays true).
PointSummary summarize(const SimResult& r, std::int64_t device_capacity_bytes = 0);

struct UnitSweep {
  ResidencyUnit unit;
  std::vector<std::int64_t> sizes;
  // The classic-LRU miss curve (one-pass MRC, sim/mrc.hpp) at each size: LRU with distinct
  // recency within a step, on untruncated selections. Not the core's policy (that ties a
  // step's pages and truncates to the select width): shown beside the core's simulated
  // misses (points[i].misses), and never used in a decision (see decide()).
  std::vector<std::int64_t> classic_lru_misses;
  std::vector<std::int64_t> belady_misses;  // OPT at each size (empty when not computed)
  std::string belady_note;                  // why belady_misses is empty, when asked for
  std::vector<PointSummary> points;         // simulated mirror at each size
  std::int64_t lookups = 0;
  std::int64_t cliff_slots = 0;  // size below which decode tokens/s falls fastest
  // The smallest size that fits, drops nothing and comes within `within` of the
  // recommendation's figure (0: none; Recommendation::mirror), and the same for `chosen`.
  std::int64_t within_slots = 0;
  std::int64_t chosen_slots = 0;
};

struct PlanResult {
  std::string trace;
  std::string profile;
  KvDtype dtype = KvDtype::bf16;
  MirrorPolicy policy = MirrorPolicy::lru;
  double within = 0.05, chosen = 0.10;
  frontend::TraceBounds stats;
  std::int64_t min_slots = 0;              // smallest pool that holds one batch's selection
  int micro_batches = 1;                   // PlanConfig::micro_batches: mirror's
  bool micro_batches_auto = false;         // PlanConfig::micro_batches_auto (then per point)
  int host_micro_batches = 1;              // host's (one batch for fp8)
  std::int64_t device_capacity_bytes = 0;  // the profile's device memory (the card)
  DeviceBudget budget;                     // B against the card
  std::int64_t host_capacity_bytes = 0;    // 0: not checked
  bool has_device = false, has_host = false;
  PointSummary device, host;  // when asked
  // The device placement with unlimited memory, simulated whether or not it fits or is asked
  // for: the ideal every recommendation is held against.
  PointSummary ideal;
  std::vector<UnitSweep> units;
  Recommendation decision;
  std::string recommendation;  // decision.sentence
  RestOfModel rest;            // the non-QSA layers: figures and where they come from
  double rest_us = 0;          // their time over the whole trace (the same at every point)
  std::string trust;           // the profile's validation status (model/profile_trust.hpp)
};

// With micro-batches, the sentence saying which placements run in how many groups and how far
// their overlap is to be trusted; empty for one batch. With auto, `which` says which
// configurations took groups (a concurrency sweep's levels each have their own: false).
std::string micro_batches_note(const PlanResult& r, bool which = true);

// Throws ConfigError for bad options: an explicit size below the minimum says the minimum, one
// above every page the trace holds at once says that size; points and threads outside
// 1..kMaxPlanPoints and 0..kMaxPlanThreads; a device budget above the card's memory; a TPOT
// target that is not a positive number.
PlanResult plan(const traces::TraceInput& input, const CostModel& cost, const PlanConfig& cfg);

// The plan's decisions from the simulated placements and mirror points alone: each unit's
// cliff and thresholds, then the recommendation. plan() calls it; the classic-LRU curve and
// the Belady bound only stand beside them (tests/sim/test_plan_decisions.cpp perturbs both
// and expects the same decisions).
void decide(PlanResult& res, const PlanConfig& cfg);

// Every figure as JSON; the same inputs give the same bytes.
std::string plan_to_json(const PlanResult& r);
// A self-contained HTML page with SVG charts.
std::string plan_to_html(const PlanResult& r);

}  // namespace kvtier::sim
