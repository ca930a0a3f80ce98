#pragma once
// The replay of one configuration (sim/replay.hpp's simulate, simulate_together): the state it
// keeps and the ops it prices. Internal to the simulator: replay.cpp runs the forwards (the
// groups, the timeline, the figures), replay_ops.cpp prices a layer's ops and takes the core's
// residency decisions.
#include <array>
#include <optional>
#include <span>
#include <vector>

#include "frontend/forward_schedule.hpp"
#include "frontend/front_end.hpp"
#include "frontend/layer_query_cache.hpp"
#include "model/admission.hpp"
#include "model/ensure.hpp"
#include "model/layer_compute.hpp"
#include "model/residency_state.hpp"
#include "model/victims_fifo.hpp"
#include "sim/micro_batch_groups.hpp"
#include "sim/replay.hpp"
#include "sim/request_latency.hpp"
#include "sim/timeline.hpp"

namespace kvtier::sim::replay_detail {

// One residency state: a layer's pool, or the pool shared by every layer.
struct PoolState {
  ResidencyState state;
  FifoVictims victims;
  std::vector<std::int64_t> last_seen;  // hybrid admission, [pages]

  PoolState(PageId pages, SlotId slots, bool hybrid)
      : state(pages, slots),
        victims(slots),
        last_seen(hybrid ? pages : 0, AdmitOnReuse::kNeverSeen) {}
};

struct Scratch {
  std::vector<PageId> miss, bypass;
  std::vector<SlotId> victims, physical;
  std::vector<CopyOp> copies;
  void fit(std::size_t n) {
    if (miss.size() >= n) return;
    miss.resize(n);
    bypass.resize(n);
    victims.resize(n);
    physical.resize(n);
    copies.resize(n);
  }
};

// One replay of a trace through the core, priced on a timeline. A forward is, per QSA layer:
// the non-QSA layers before it, store + index + top-k, the mirror store (mirror, host), then
// the placement's reads and the attention; after the last QSA layer the remaining non-QSA
// layers. A replay reads the trace itself (run), or is stepped by simulate_together with a
// front end and query cache shared by every configuration of the pass.
class Simulation {
 public:
  Simulation(const traces::TraceInput& input, const frontend::TraceBounds& stats,
             const CostModel& cost, const SimConfig& cfg, frontend::FrontEnd* shared_fe = nullptr,
             frontend::LayerQueryCache* cache = nullptr);
  // fe_ may refer to the simulation's own front end: not to be copied or moved.
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  SimResult run();

  // A request begins (a shared front end has begun it): it joins its micro-batch, and its
  // latency is timed from now.
  void begin(const traces::RequestBegin& b);

  // A request ends: the pages it held leave its group's pools. `shared_freed`: what a shared
  // front end freed (unused with a front end of its own).
  void end(const traces::RequestEnd& e, std::span<const PageId> shared_freed);

  // One forward (a shared front end has prepared it).
  void step(const traces::Forward& f);

  SimResult finish();

 private:
  // What an op waits for besides its resource: the stream's previous op and a join.
  using Deps = std::array<OpId, 2>;

  // A micro-batch (SimConfig::micro_batches; one batch is group 0 with every request): its
  // pools (one per QSA layer, or one for all layers), their slots, and its forward before.
  struct Group {
    std::vector<PoolState> pools;
    SlotId slots = 0;
    frontend::LastForward last;  // for decode_reads_in_place
  };

  // A forward's ops as added to the timeline, before it runs them.
  struct ForwardOps {
    OpId last = kNoOp;
    int rows = 0;
    std::int64_t tokens = 0, decode_tokens = 0;
    LayerStats counts;  // its residency counts
  };

  // The state index of the current group's pool `si` (decision logs, on_query, on_release):
  // the groups' pools one after another.
  int state_index(int si) const {
    return static_cast<int>(cur_ - groups_.data()) * static_cast<int>(cur_->pools.size()) + si;
  }

  void release(int group, std::span<const PageId> freed);

  // The layer-step being priced: its query, and (mirror) what its ensure decided.
  struct LayerStep {
    const frontend::LayerQuery* q = nullptr;
    int layer = 0;
    std::int64_t sel_bytes = 0;
    std::int64_t in_place_bytes = 0;  // mirror: pages missed (in place) or bypassed, read in place
    std::int64_t pool_sel_bytes = 0;  // mirror: what the attention reads from the pool
    OpId copied = kNoOp;              // the step first: its end (its copy's, if it copied)
  };

  using Pages = std::span<const PageId>;

  // The pages the forward added to its rows' tables become their requests' (for charging the
  // link's bytes).
  void own_new_pages(const traces::Forward& f);

  // One forward of the current group, which the front end has prepared: its ops, then the
  // timeline runs until it ends.
  void forward(const traces::Forward& f);

  // Micro-batches: `f`'s rows by group. A forward whose rows all decode launches every group's
  // forward and ends when the last one does, as the runner's decode steps; any other runs its
  // groups one after another, as the runner prefills its micro-batches.
  void forward_groups(const traces::Forward& f);

  // A forward's span, split between its decode and prefill tokens by token count.
  void charge_span(TimeNs start, TimeNs end, std::int64_t tokens, std::int64_t decode_tokens);

  void record_forward(const ForwardOps& ops, TimeNs start, TimeNs end);

  // The forward's ops on the timeline, from now; the core's decisions are taken here.
  ForwardOps add_forward(const traces::Forward& f);

  // The timeline keeps the pointer: the schedule's names are string literals.
  static const char* op_name(frontend::LayerOp op) { return frontend::to_string(op).data(); }

  // The model forward's layer besides the KV tier's ops (model/layer_compute.hpp): the runner
  // sizes a decode forward's top-k choice by the run's longest context, this by the forward's.
  LayerCompute layer_compute_of(const frontend::LayerQuery& q) const {
    return layer_compute(cost_, g_,
                         {tokens_, q.row_blocks, fe_.max_row_blocks(), fe_.max_row_tokens()});
  }

  TimeNs gap_ns(int i) const { return non_qsa_ns_ * gap_layers_[i] / non_qsa_layers_; }

  // The new tokens' K/V, one kernel priced by the bytes it writes: into the pool (device; the
  // mirror's pages resident when it runs) and, for mirror and host, into the host bank over the
  // link, within the same kernel (the link's share is shown on a link lane beside it). Where the
  // residency step runs beside (mirror in place), that share is drawn on the lane of the step's
  // miss copy and the attend's in-place reads: on the H200 the replay's mirror prefill forwards
  // took the store's write and the miss copy's read one after the other, not side by side
  // (2026-12-02, r4-256k above its cliff: 16.2 ms per prefill forward of 4 x 4,096 tokens,
  // where the writes are priced 7.7 ms and the miss copies 7.9 ms; validation/results).
  OpId store_op(const LayerStep& ls, const Deps& deps, const char* name);

  // Mirror: the store writes the pool's copy of the write pages resident when it runs: all
  // after the step (step first), else those resident before it (tables located before the
  // forward), the tokens taken as spread evenly over the write pages.
  std::int64_t mirror_pool_store(const LayerStep& ls) const;

  // The attend as launched: the replay one query per trace row (width: the widest row's
  // selection), the model every token (width: the select width); CTAs from rows and width.
  // The fp8 (SIMT) attend's span is its longest CTA's: each walks width / splits of its row's
  // token list, one token after another, and every row is split as the widest is
  // (qsa::attend's grid), so the replay's fp8 attend is priced as if every row read as many
  // tokens as the widest (the calibration's rows are all equally wide: the same bytes there).
  // The bf16 (tensor-core) attend is bound by the bytes it reads or by its longest CTA's walk,
  // the longer of the two (a prefill row's wide selection beside decode rows: the CTA); a walk
  // over host pages goes at the link's pace, which the in-place read prices (walk = false).
  std::int64_t attend_cost(const frontend::LayerQuery& q, std::int64_t hbm_bytes,
                           bool walk = true) const;

  // Whether this forward's attends find in the L2 the pages the forward before read
  // (attention_l2_reuse_ns): the trace replay's device placement, bf16 (the kernel
  // attention_warm calibrates), one decode row after a forward of that row alone. Between two
  // such forwards the replay runs nothing else through the L2; the model forward streams every
  // layer's weights through it, and more rows outgrow it (a 12-layer stack of two decode rows
  // selects 100 MB).
  bool reuses_l2(RequestId one_row) const;

  OpId attend_op(LayerStep& ls, const Deps& deps, const char* name);

  // The model attends every token of a row; the trace replay one query per row (its last).
  std::int64_t selected_tokens(const frontend::LayerQuery& q) const;

  // Decode reads the selection in place; the model's prefill rows wider than their request's
  // cache stage the cached tokens through device windows (the replay reads one query per row
  // in place).
  OpId host_attend(const frontend::LayerQuery& q, const Deps& deps, int l, const char* name);

  // The core's ensure for the layer's pool (AdmitAll, or AdmitOnReuse for hybrid).
  EnsureResult ensure(PoolState& pool, const frontend::LayerQuery& q, std::int64_t step);

  // Mirror: compaction + ensure + the miss copy, one launch on `lane`; returns the op after
  // which the step is done (its copy's end). In place, the attention reads the missed pages
  // from the host bank meanwhile, and a layer's step waits for the previous layer's (one
  // kernel each, on the one stream beside).
  OpId residency_op(LayerStep& ls, Resource lane, const Deps& deps, const char* name);
  // The step's link bytes to the requests whose pages crossed: each copied page its copy,
  // and the in-place bytes (priced per layer-step as the share of the selection not in the
  // pool) evenly over the pages read in place (those missed, when the step runs beside, and
  // those bypassed).
  void charge_step(const EnsureResult& r, std::int64_t copy_page_bytes, std::int64_t read_in_place,
                   std::int64_t in_place_bytes);

  // Rows that bypass the pool: each row's own reads from the host bank, to its request. The
  // flags are this replay's plan_rows' even on a shared front end: simulate_together steps
  // one replay's whole forward before the next plans its rows.
  void charge_bypass_rows(const frontend::LayerQuery& q, bool model);

  // Layer l's pages ensured into layer l + 1's pool and copied, one launch beside the main
  // stream from the end of layer l's step (`after`), as the backend runs it: the ensure on the
  // lane beside (the step's few blocks: its beside terms), its copy on the link. Returns the op
  // after which the prefetch is done. A prefetch that does not fit still runs its ensure (and
  // installs nothing).
  OpId prefetch_op(const frontend::LayerQuery& q, OpId after, int l, std::int64_t ls_index,
                   const char* name);

  const Geometry& g_;
  const CostModel& cost_;
  const SimConfig& cfg_;
  const traces::TraceInput& input_;
  const int L_;
  const PageId num_pages_;
  const std::int64_t token_bytes_, page_bytes_;
  const bool mirror_, all_layers_;
  const std::int64_t window_stamps_;          // hybrid: the reuse window in stamps
  std::optional<frontend::FrontEnd> own_fe_;  // unless a shared one is given
  frontend::FrontEnd& fe_;
  frontend::LayerQueryCache* cache_;
  Timeline tl_;
  RequestLatency lat_;
  std::vector<Group> groups_;                // [micro-batches]
  Group* cur_ = nullptr;                     // the group whose forward is being added
  std::optional<MicroBatchGroups> batches_;  // micro-batches > 1
  std::vector<traces::Forward> subs_;        // [groups] a forward's rows of each, reused
  std::vector<int> gap_layers_;
  int non_qsa_layers_ = 1;
  Scratch sc_;
  SimResult res_;
  // the forward in progress
  std::int64_t fi_ = 0;
  int width_ = 0;
  std::int64_t tokens_ = 0;
  TimeNs non_qsa_ns_ = 0;
  OpId prefetch_done_ = kNoOp;      // the prefetch into the coming layer's pool, done
  bool may_read_in_place_ = false;  // mirror, bf16, lru, per-layer pools, not --copy-first
  // The forward before, for reuses_l2: its one decode row's request (kNoReuse: it had another
  // shape) and its selections' bytes over its layers; this forward's saving per attend.
  static constexpr RequestId kNoReuse = ~RequestId{0};
  RequestId last_one_row_ = kNoReuse;
  std::int64_t last_sel_bytes_ = 0;
  TimeNs l2_reuse_ns_ = 0;
  std::vector<OpId> beside_done_;  // the forward's residency steps beside, reused
  int lanes_ = 1;                  // the forward's lanes beside (frontend::beside_steps)
  frontend::ScheduleShape shape_;
};

}  // namespace kvtier::sim::replay_detail
