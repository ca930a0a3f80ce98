#pragma once
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/forward_schedule.hpp"
#include "frontend/front_end.hpp"
#include "model/cost_model.hpp"
#include "model/kv_dtype.hpp"
#include "model/mirror_policy.hpp"
#include "model/placement.hpp"
#include "sim/request_latency.hpp"
#include "sim/timeline.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {

struct SimConfig {
  Placement placement = Placement::mirror;
  ResidencyUnit unit = ResidencyUnit::layer_page;
  KvDtype dtype = KvDtype::bf16;
  MirrorPolicy policy = MirrorPolicy::lru;
  std::int64_t pool_slots = 0;      // mirror: slots per layer (layer unit) or shared slots
  std::int64_t hybrid_window = 64;  // hybrid: reuse window in layer-steps of one state
  std::int64_t staging_window_tokens = 131072;  // host placement prefill window
  // Which forward is priced: the model's (kvtier run --weights; the default, what the
  // planner plans) or the GPU trace replay's (kvtier run --trace: its timed span, for
  // validation against it). Both walk frontend::layer_schedule.
  frontend::ForwardKind forward = frontend::ForwardKind::model;
  // Mirror: the residency step first and the attention reading every page from the pool, as
  // the backend runs fp8 and --copy-first (bf16 otherwise reads the misses in place beside).
  bool copy_first = false;
  // Micro-batches (`kvtier run --micro-batches K`), host and mirror placements, the model's
  // forward: the requests split into K groups (sim/micro_batch_groups.hpp), each with its own
  // pools; the mirror's pool_slots are the groups' together, split as evenly as they go. A
  // forward whose rows all decode launches every group's forward at once and ends when the last
  // does (one group's reads over the link beside the others' work); any other forward runs its
  // groups one after another, as the runner prefills its micro-batches. 1: one batch.
  int micro_batches = 1;
  bool record_timeline = false;
  bool record_forwards = false;       // SimResult::forwards
  bool check_memory = true;           // price the configuration with memory_budget
  std::ostream* decisions = nullptr;  // one JSON line per install (eviction decision)
  // Called with every demand ensure's query (state index, step stamp, entries).
  std::function<void(int, std::int64_t, std::span<const PageId>)> on_query;
  std::function<void(int, PageId)> on_release;   // a page released from a state's pool
  std::function<void(std::int64_t)> on_forward;  // progress: forwards done
  // What the KV tier may use on the device (--device-kv-gib), checked with check_memory;
  // 0: the profile's device memory.
  std::int64_t device_kv_bytes = 0;
};

struct LayerStats {
  std::int64_t lookups = 0;  // distinct pages queried per step, summed
  std::int64_t hits = 0;
  std::int64_t misses = 0;    // pages copied into the pool on demand
  std::int64_t bypassed = 0;  // hybrid: misses read in place
  std::int64_t evictions = 0;
  std::int64_t drops = 0;       // pages past the select width
  std::int64_t prefetched = 0;  // pages copied ahead for this layer

  LayerStats& operator+=(const LayerStats& o);
  LayerStats& operator-=(const LayerStats& o);
};

// One forward as priced: its span from its first op to its last (for the trace replay's
// forward, what the GPU replay's gpu_us measures) and its residency counts.
struct ForwardTime {
  std::int64_t forward = 0;
  int rows = 0;
  std::int64_t tokens = 0;
  std::int64_t decode_tokens = 0;
  TimeNs start_ns = 0, end_ns = 0;  // on the simulation's clock (forwards run back to back)
  TimeNs span_ns = 0;               // end_ns - start_ns
  std::int64_t hits = 0, misses = 0, evictions = 0, drops = 0;
};

struct SimResult {
  std::int64_t forwards = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t prefill_tokens = 0;
  TimeNs compute_end_ns = 0;  // when the last forward's compute finished
  TimeNs makespan_ns = 0;     // when every resource was idle again
  // Each forward's span split between its decode and prefill tokens by token count: the
  // time-per-token accounting that decode_tokens_per_s() divides by. A decode row in a mixed
  // forward is charged only its token's share, though it waits for the whole forward: its
  // true inter-token latency is in `latency.tpot_ns` (docs/planner.md, "Latency figures").
  double decode_time_ns = 0;
  double prefill_time_ns = 0;
  std::int64_t h2d_bytes = 0;       // misses, prefetches, in-place reads, staging
  std::int64_t d2h_bytes = 0;       // mirror stores
  std::int64_t copy_bytes = 0;      // demand + prefetch miss copies
  std::int64_t in_place_bytes = 0;  // zero-copy reads by attention
  std::int64_t hbm_read_bytes = 0;
  TimeNs busy_ns[kResources] = {};
  std::int64_t device_bytes = 0;  // memory_budget
  std::int64_t host_bytes = 0;
  int select_width_min = 0;  // narrowest width any forward ran with
  std::vector<LayerStats> layers;
  std::vector<OpRecord> timeline;
  std::vector<ForwardTime> forwards_detail;  // with record_forwards
  std::vector<RequestTimes> requests;        // every request, in the order it began
  LatencySummary latency;                    // TTFT, TPOT and link share across them

  LayerStats total() const;
  // decode_tokens / decode_time_ns (see decode_time_ns): a throughput, not a latency.
  double decode_tokens_per_s() const;
  double prefill_tokens_per_s() const;
  double hit_rate() const;
};

// Replays the trace through the core with `cfg` and prices it with `cost`. Every residency
// decision is the core's (compact_row, select_width, ensure_pages with FifoVictims and
// AdmitAll/AdmitOnReuse, translate_pages, release_page, memory_budget). Throws ConfigError /
// CapacityError for configurations that cannot run (pool below one batch's selection,
// trace geometry unlike the options).
SimResult simulate(const traces::TraceInput& input, const frontend::TraceBounds& stats,
                   const CostModel& cost, const SimConfig& cfg);

// The replays of several configurations in one pass over the trace: one decode, one front end,
// each layer compacted once (frontend::LayerQueryCache: each configuration's query is cut with
// its own width and its own rows that bypass its pool); every result equals simulate()'s for
// that configuration. The configurations must share the staging window (one front end
// prices the host placement's staging for all). on_forward: forwards replayed, for progress.
std::vector<SimResult> simulate_together(const traces::TraceInput& input,
                                         const frontend::TraceBounds& stats, const CostModel& cost,
                                         std::span<const SimConfig> cfgs,
                                         const std::function<void(std::int64_t)>& on_forward = {});

// Chrome trace JSON (opens in Perfetto / chrome://tracing) of a recorded timeline.
void write_chrome_trace(std::ostream& out, const std::vector<OpRecord>& ops, const Geometry& g);

}  // namespace kvtier::sim
