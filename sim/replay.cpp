#include "sim/replay.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "frontend/decision_log.hpp"
#include "frontend/layer_query_cache.hpp"
#include "model/admission.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/device_budget.hpp"
#include "model/ensure.hpp"
#include "model/layer_compute.hpp"
#include "model/memory_budget.hpp"
#include "model/residency_state.hpp"
#include "model/step_stamp.hpp"
#include "model/translate.hpp"
#include "model/victims_fifo.hpp"
#include "sim/micro_batch_groups.hpp"
#include "sim/replay_config.hpp"

namespace kvtier::sim {

LayerStats& LayerStats::operator+=(const LayerStats& o) {
  lookups += o.lookups;
  hits += o.hits;
  misses += o.misses;
  bypassed += o.bypassed;
  evictions += o.evictions;
  drops += o.drops;
  prefetched += o.prefetched;
  return *this;
}

LayerStats& LayerStats::operator-=(const LayerStats& o) {
  lookups -= o.lookups;
  hits -= o.hits;
  misses -= o.misses;
  bypassed -= o.bypassed;
  evictions -= o.evictions;
  drops -= o.drops;
  prefetched -= o.prefetched;
  return *this;
}

LayerStats SimResult::total() const {
  LayerStats t;
  for (const auto& l : layers)
    t += l;
  return t;
}

double SimResult::decode_tokens_per_s() const {
  return decode_time_ns > 0 ? static_cast<double>(decode_tokens) * 1e9 / decode_time_ns : 0.0;
}

double SimResult::prefill_tokens_per_s() const {
  return prefill_time_ns > 0 ? static_cast<double>(prefill_tokens) * 1e9 / prefill_time_ns : 0.0;
}

double SimResult::hit_rate() const {
  const LayerStats t = total();
  return t.lookups > 0 ? static_cast<double>(t.hits) / static_cast<double>(t.lookups) : 1.0;
}

namespace {

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
             frontend::LayerQueryCache* cache = nullptr)
      : g_(input.header.geometry),
        cost_(cost),
        cfg_(cfg),
        input_(input),
        L_(g_.qsa_layers()),
        num_pages_(stats.peak_pages),
        token_bytes_(g_.kv_bytes_per_token(cfg.dtype)),
        page_bytes_(g_.kv_bytes_per_page(cfg.dtype)),
        mirror_(cfg.placement == Placement::mirror),
        all_layers_(cfg.unit == ResidencyUnit::all_layers_page),
        window_stamps_(cfg.hybrid_window * kStampsPerLayerStep * L_),
        // micro-batches prepare their groups' rows apart: a front end of their own
        own_fe_(shared_fe != nullptr && cfg.micro_batches == 1
                    ? std::nullopt
                    : std::make_optional<frontend::FrontEnd>(g_, num_pages_,
                                                             cfg.staging_window_tokens)),
        fe_(own_fe_ ? *own_fe_ : *shared_fe),
        cache_(own_fe_ ? nullptr : cache),
        tl_(cfg.record_timeline),
        lat_(num_pages_) {
    shape_.placement = cfg.placement;
    shape_.kind = cfg.forward;
    may_read_in_place_ = !cfg.copy_first && cfg.dtype == KvDtype::bf16 &&
                         cfg.policy == MirrorPolicy::lru && !all_layers_;
    shape_.mirror_in_place = may_read_in_place_;
    shape_.prefetch = mirror_ && cfg.policy == MirrorPolicy::prefetch && !all_layers_;
    shape_.state_per_layer = !all_layers_;
    res_.layers.resize(L_);
    const MemoryBudget mb = price_memory(g_, stats, cost, cfg);
    res_.device_bytes = mb.device_bytes;
    res_.host_bytes = mb.host_bytes;
    const int k = cfg.micro_batches;
    groups_.resize(static_cast<std::size_t>(k));
    for (int i = 0; i < k; ++i) {
      Group& grp = groups_[static_cast<std::size_t>(i)];
      grp.slots = static_cast<SlotId>(group_share(cfg.pool_slots, k, i));
      if (!mirror_) continue;
      const int n = all_layers_ ? 1 : L_;
      grp.pools.reserve(static_cast<std::size_t>(n));
      for (int j = 0; j < n; ++j)
        grp.pools.emplace_back(num_pages_, grp.slots, cfg.policy == MirrorPolicy::hybrid);
    }
    cur_ = &groups_[0];
    if (k > 1) batches_.emplace(k);
    // The non-QSA layers before each QSA layer, and after the last one.
    gap_layers_.assign(L_ + 1, 0);
    for (int l = 0; l < L_; ++l)
      gap_layers_[l] = g_.qsa_layer_ids[l] - (l > 0 ? g_.qsa_layer_ids[l - 1] + 1 : 0);
    gap_layers_[L_] = g_.total_layers - 1 - g_.qsa_layer_ids[L_ - 1];
    non_qsa_layers_ = std::max(1, g_.total_layers - L_);
  }
  // fe_ may refer to the simulation's own front end: not to be copied or moved.
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  SimResult run() {
    auto stream = input_.open();
    traces::Record rec;
    while (stream->next(rec)) {
      if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
        begin(*b);
      } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
        end(*e, {});
      } else {
        step(std::get<traces::Forward>(rec));
      }
    }
    return finish();
  }

  // Whether the caller's front end (simulate_together's, shared) serves this replay; if not,
  // begin, end and step keep its own.
  bool shares_front_end() const { return !own_fe_; }

  // A request begins (a shared front end has begun it): it joins its micro-batch, and its
  // latency is timed from now.
  void begin(const traces::RequestBegin& b) {
    if (own_fe_) own_fe_->begin(b);
    if (batches_) batches_->begin(b.id);
    const auto shared =
        b.shared_pages > 0 ? fe_.table(b.shared_with).first(b.shared_pages) : Pages{};
    lat_.begin(b, tl_.now(), shared);
  }

  // A request ends: the pages it held leave its group's pools. `shared_freed`: what a shared
  // front end freed (unused with a front end of its own).
  void end(const traces::RequestEnd& e, std::span<const PageId> shared_freed) {
    std::vector<PageId> own;
    if (own_fe_) own = own_fe_->end(e);
    const int k = batches_ ? batches_->end(e.id) : 0;
    release(k, own_fe_ ? std::span<const PageId>(own) : shared_freed);
  }

  // One forward (a shared front end has prepared it).
  void step(const traces::Forward& f) {
    if (batches_) {
      forward_groups(f);
    } else {
      if (own_fe_) own_fe_->prepare(f);
      forward(f);
    }
    ++fi_;
    if (cfg_.on_forward) cfg_.on_forward(fi_);
  }

  SimResult finish() {
    res_.forwards = fi_;
    res_.makespan_ns = tl_.drain();
    for (int r = 0; r < kResources; ++r)
      res_.busy_ns[r] = tl_.busy_ns(static_cast<Resource>(r));
    if (cfg_.record_timeline) res_.timeline = tl_.records();
    res_.requests = lat_.finish(res_.latency);
    return std::move(res_);
  }

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

  void release(int group, std::span<const PageId> freed) {
    cur_ = &groups_[static_cast<std::size_t>(group)];
    for (std::size_t si = 0; si < cur_->pools.size(); ++si) {
      PoolState& p = cur_->pools[si];
      for (PageId page : freed) {
        if (cfg_.on_release) cfg_.on_release(state_index(static_cast<int>(si)), page);
        release_page(p.state.view(), page, p.victims);
        if (!p.last_seen.empty()) p.last_seen[page] = AdmitOnReuse::kNeverSeen;
      }
    }
    cur_ = &groups_[0];
  }

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
  void own_new_pages(const traces::Forward& f) {
    lat_.start_forward(f.rows);
    for (std::size_t r = 0; r < f.rows.size(); ++r)
      lat_.own_table(static_cast<int>(r), fe_.table(f.rows[r].request));
  }

  // One forward of the current group, which the front end has prepared: its ops, then the
  // timeline runs until it ends.
  void forward(const traces::Forward& f) {
    const TimeNs fstart = tl_.now();
    const ForwardOps ops = add_forward(f);
    const TimeNs end = tl_.run_until(ops.last);
    charge_span(fstart, end, ops.tokens, ops.decode_tokens);
    end_forward(f, fstart, end);
    record_forward(ops, fstart, end);
  }

  // Micro-batches: `f`'s rows by group. A forward whose rows all decode launches every group's
  // forward and ends when the last one does, as the runner's decode steps; any other runs its
  // groups one after another, as the runner prefills its micro-batches.
  void forward_groups(const traces::Forward& f) {
    batches_->split(f, subs_);
    const bool decode = std::all_of(f.rows.begin(), f.rows.end(),
                                    [](const traces::ForwardRow& r) { return r.count == 1; });
    const TimeNs fstart = tl_.now();
    ForwardOps all;
    std::vector<OpId> lasts;
    for (std::size_t k = 0; k < subs_.size(); ++k) {
      const traces::Forward& sub = subs_[k];
      if (sub.rows.empty()) continue;
      cur_ = &groups_[k];
      own_fe_->prepare(sub);
      if (!decode) {
        forward(sub);
        continue;
      }
      const ForwardOps ops = add_forward(sub);
      lasts.push_back(ops.last);
      all.rows += ops.rows;
      all.tokens += ops.tokens;
      all.decode_tokens += ops.decode_tokens;
      all.counts += ops.counts;
    }
    if (decode && !lasts.empty()) {
      const OpId joined = tl_.add(Resource::compute, 0, lasts, "micro-batches joined", -1);
      const TimeNs end = tl_.run_until(joined);
      charge_span(fstart, end, all.tokens, all.decode_tokens);
      for (const traces::Forward& sub : subs_)
        if (!sub.rows.empty()) end_forward(sub, fstart, end);
      record_forward(all, fstart, end);
    }
    cur_ = &groups_[0];
  }

  // A forward's span, split between its decode and prefill tokens by token count.
  void charge_span(TimeNs start, TimeNs end, std::int64_t tokens, std::int64_t decode_tokens) {
    const double dt = static_cast<double>(end - start);
    if (tokens > 0) {
      res_.decode_time_ns += dt * static_cast<double>(decode_tokens) / static_cast<double>(tokens);
      res_.prefill_time_ns +=
          dt * static_cast<double>(tokens - decode_tokens) / static_cast<double>(tokens);
    }
    res_.compute_end_ns = end;
  }

  // The forward's rows got their tokens at `end`.
  void end_forward(const traces::Forward& f, TimeNs start, TimeNs end) {
    lat_.start_forward(f.rows);  // another group's forward may have been added since
    lat_.end_forward(f.rows, fi_, start, end);
  }

  void record_forward(const ForwardOps& ops, TimeNs start, TimeNs end) {
    if (!cfg_.record_forwards) return;
    res_.forwards_detail.push_back({fi_, ops.rows, ops.tokens, ops.decode_tokens, start, end,
                                    end - start, ops.counts.hits, ops.counts.misses,
                                    ops.counts.evictions, ops.counts.drops});
  }

  // The forward's ops on the timeline, from now; the core's decisions are taken here.
  ForwardOps add_forward(const traces::Forward& f) {
    own_new_pages(f);
    const int rows = static_cast<int>(f.rows.size());
    width_ = fe_.plan_rows(mirror_ ? cur_->slots : 0);
    res_.select_width_min =
        res_.select_width_min == 0 ? width_ : std::min(res_.select_width_min, width_);
    tokens_ = fe_.tokens();
    const std::int64_t decode_tokens = fe_.decode_tokens();
    res_.decode_tokens += decode_tokens;
    res_.prefill_tokens += tokens_ - decode_tokens;
    non_qsa_ns_ = cost_.non_qsa_ns(tokens_);
    // Per-forward counts (the read-order rule, record_forwards) as differences of the totals.
    const LayerStats before = res_.total();

    // Both backends (the runner and the trace replay) read in place in the decode forwards
    // for which frontend::decode_reads_in_place says so of the forward before.
    const bool decode = tokens_ == rows;
    const bool model_forward = shape_.kind == frontend::ForwardKind::model;
    shape_.mirror_in_place =
        may_read_in_place_ && decode && frontend::decode_reads_in_place(cur_->last);
    // The lanes of the steps beside, as the trace replay takes them for this forward.
    lanes_ =
        frontend::beside_steps(shape_, f, g_, static_cast<int>(cost_.profile().sm_count)).lanes;
    const RequestId one_row = decode && rows == 1 ? f.rows[0].request : kNoReuse;
    l2_reuse_ns_ = reuses_l2(one_row) ? cost_.attention_l2_reuse_ns(last_sel_bytes_) : 0;
    std::int64_t sel_bytes = 0;  // this forward's selections over its layers

    tl_.set_forward(fi_);
    const auto ops = frontend::layer_schedule(shape_);
    const frontend::BesideJoin join = frontend::beside_join(shape_);
    std::vector<OpId>& beside_done = beside_done_;  // [layers] each step beside, once done
    beside_done.assign(static_cast<std::size_t>(L_), kNoOp);
    OpId prev = kNoOp;  // the main stream's last op
    prefetch_done_ = kNoOp;
    if (frontend::locates_first(shape_)) {
      prev = tl_.add(Resource::compute, cost_.launch_ns(1), {prev}, "locate tables", -1);
    }
    for (int l = 0; l < L_; ++l) {
      const frontend::LayerQuery q =
          cache_ != nullptr ? cache_->build(f, l, width_) : fe_.build(f, l, width_);
      res_.layers[l].drops += q.drops;
      LayerStep ls{&q, l, selected_tokens(q) * token_bytes_};
      sel_bytes += ls.sel_bytes;
      // the model forward's layer besides the KV tier's ops, once (two ops of the layer take it)
      const LayerCompute lc = model_forward ? layer_compute_of(q) : LayerCompute{};
      for (const frontend::ScheduledOp& so : ops) {
        const int joined = l - join.layers_later;
        const OpId waits = so.op == join.waits_before && joined >= 0 ? beside_done[joined] : kNoOp;
        const char* name = op_name(so.op);
        switch (so.op) {
          case frontend::LayerOp::non_qsa:
            prev = tl_.add(Resource::compute, gap_ns(l), {prev, waits}, name, l);
            break;
          case frontend::LayerOp::index_topk:
            prev = tl_.add(Resource::compute, lc.before_store_ns, {prev, waits}, name, l);
            break;
          case frontend::LayerOp::output_projection:
            prev = tl_.add(Resource::compute, lc.output_projection_ns, {prev, waits}, name, l);
            break;
          case frontend::LayerOp::store:
            prev = store_op(ls, {prev, waits}, name);
            break;
          case frontend::LayerOp::residency:
            if (so.lane == frontend::Lane::beside) {
              beside_done[l] = residency_op(ls, beside_lane(l % lanes_), {prev, waits}, name);
            } else {
              // the previous layer's prefetch into this layer's pool comes first
              prev = residency_op(ls, Resource::compute, {prev, prefetch_done_}, name);
            }
            break;
          case frontend::LayerOp::prefetch:
            prefetch_done_ = PrefetchNextLayer::applies(cfg_.unit, l, L_)
                                 ? prefetch_op(q, prev, l, layer_step(fi_, L_, l), name)
                                 : kNoOp;
            break;
          case frontend::LayerOp::attend:
            prev = attend_op(ls, {prev, waits}, name);
            break;
        }
      }
    }
    // The forward ends after its last main op and every residency still running beside it
    // (then, for the model, after the layers past the last QSA layer).
    std::array<OpId, 3> ends{prev, kNoOp, kNoOp};  // a join reaches back at most two layers
    for (int l = std::max(0, L_ - join.layers_later), i = 1; l < L_; ++l, ++i)
      ends[static_cast<std::size_t>(i)] = beside_done[l];
    const OpId last = tl_.add(Resource::compute, model_forward ? gap_ns(L_) : 0, ends,
                              op_name(frontend::LayerOp::non_qsa), -1);
    const LayerStats after = res_.total();
    cur_->last =
        frontend::LastForward{decode, after.misses - before.misses, std::int64_t{rows} * L_};
    last_one_row_ = one_row;
    last_sel_bytes_ = sel_bytes;
    ForwardOps out{last, rows, tokens_, decode_tokens, after};
    out.counts -= before;
    return out;
  }

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
  OpId store_op(const LayerStep& ls, const Deps& deps, const char* name) {
    const std::int64_t bytes = tokens_ * token_bytes_;
    const std::int64_t host_bytes = cfg_.placement == Placement::device ? 0 : bytes;
    const std::int64_t device_bytes = cfg_.placement == Placement::host     ? 0
                                      : cfg_.placement == Placement::device ? bytes
                                                                            : mirror_pool_store(ls);
    const OpId st =
        tl_.add(Resource::compute,
                cost_.kernel_launch_ns(1) + cost_.store_ns(device_bytes, host_bytes, cfg_.dtype),
                deps, name, ls.layer);
    if (host_bytes > 0) {
      res_.d2h_bytes += host_bytes;
      const Resource link = frontend::locates_first(shape_) ? Resource::h2d : Resource::d2h;
      tl_.add(link, cost_.store_ns(0, host_bytes, cfg_.dtype), deps, "write-through", ls.layer);
    }
    return st;
  }

  // Mirror: the store writes the pool's copy of the write pages resident when it runs: all
  // after the step (step first), else those resident before it (tables located before the
  // forward), the tokens taken as spread evenly over the write pages.
  std::int64_t mirror_pool_store(const LayerStep& ls) const {
    const auto writes = fe_.writes();
    if (!shape_.mirror_in_place || writes.empty()) return tokens_ * token_bytes_;
    const ResidencyState& state = cur_->pools[all_layers_ ? 0 : ls.layer].state;
    const auto resident = std::count_if(writes.begin(), writes.end(),
                                        [&](PageId p) { return state.slot_of(p) != kNoSlot; });
    return tokens_ * token_bytes_ * resident / static_cast<std::int64_t>(writes.size());
  }

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
                           bool walk = true) const {
    const bool model = shape_.kind == frontend::ForwardKind::model;
    std::int64_t width = 1;
    for (const frontend::RowTokens& rt : q.rows)
      width = std::max(width, rt.last_token_selected);
    if (model) width = g_.select_width_tokens();
    const int rows = static_cast<int>(model ? tokens_ : std::ssize(q.rows));
    const std::int64_t ctas = cost_.attend_ctas(rows, g_.kv_heads, static_cast<int>(width));
    if (!model && cfg_.dtype == KvDtype::fp8 && q.last_token_selected > 0)
      hbm_bytes = CostModel::grid_bytes(hbm_bytes, rows * width, q.last_token_selected);
    const std::int64_t cta_tokens =
        walk ? cost_.attend_cta_tokens(rows, g_.kv_heads, static_cast<int>(width)) : 0;
    return cost_.attention_ns(hbm_bytes, rows, ctas, cfg_.dtype, cta_tokens);
  }

  // Whether this forward's attends find in the L2 the pages the forward before read
  // (attention_l2_reuse_ns): the trace replay's device placement, bf16 (the kernel
  // attention_warm calibrates), one decode row after a forward of that row alone. Between two
  // such forwards the replay runs nothing else through the L2; the model forward streams every
  // layer's weights through it, and more rows outgrow it (a 12-layer stack of two decode rows
  // selects 100 MB).
  bool reuses_l2(RequestId one_row) const {
    return one_row != kNoReuse && one_row == last_one_row_ &&
           shape_.kind == frontend::ForwardKind::trace_replay &&
           cfg_.placement == Placement::device && cfg_.dtype == KvDtype::bf16;
  }

  OpId attend_op(LayerStep& ls, const Deps& deps, const char* name) {
    const frontend::LayerQuery& q = *ls.q;
    if (cfg_.placement == Placement::device) {
      res_.hbm_read_bytes += ls.sel_bytes;
      const std::int64_t attend =
          std::max<std::int64_t>(0, attend_cost(q, ls.sel_bytes) - l2_reuse_ns_);
      return tl_.add(Resource::compute, cost_.kernel_launch_ns(2) + attend, deps, name, ls.layer);
    }
    if (cfg_.placement == Placement::host) return host_attend(q, deps, ls.layer, name);
    // Mirror: hits from the pool; the pages missed (in place) or bypassed come over the link
    // once the attention starts (after the step's copy when the step ran first).
    res_.hbm_read_bytes += ls.pool_sel_bytes;
    const std::array<OpId, 3> ready{deps[0], deps[1], ls.copied};
    const OpId rd = ls.in_place_bytes > 0
                        ? tl_.add(Resource::h2d, cost_.in_place_read_ns(ls.in_place_bytes), ready,
                                  "in-place read", ls.layer)
                        : kNoOp;

    return tl_.add(Resource::compute, cost_.kernel_launch_ns(2) + attend_cost(q, ls.pool_sel_bytes),
                   {deps[0], deps[1], ls.copied, rd}, name, ls.layer);
  }

  // The model attends every token of a row; the trace replay one query per row (its last).
  std::int64_t selected_tokens(const frontend::LayerQuery& q) const {
    return shape_.kind == frontend::ForwardKind::model ? q.selected_tokens : q.last_token_selected;
  }

  // Decode reads the selection in place; the model's prefill rows wider than their request's
  // cache stage the cached tokens through device windows (the replay reads one query per row
  // in place).
  OpId host_attend(const frontend::LayerQuery& q, const Deps& deps, int l, const char* name) {
    const bool model = shape_.kind == frontend::ForwardKind::model;
    const std::int64_t staged_sel = model ? q.staged_selected_tokens : 0;
    const std::int64_t in_place = (selected_tokens(q) - staged_sel) * token_bytes_;
    const std::int64_t staged = model ? q.staged_cached_tokens * token_bytes_ : 0;
    res_.in_place_bytes += in_place;
    res_.h2d_bytes += in_place + staged;
    res_.hbm_read_bytes += staged_sel * token_bytes_;
    // Each row's own reads and staged windows, charged to its request.
    for (std::size_t r = 0; r < q.rows.size(); ++r) {
      const frontend::RowTokens& rt = q.rows[r];
      const std::int64_t sel = model ? rt.selected : rt.last_token_selected;
      const std::int64_t row_bytes =
          model ? (sel - rt.staged_selected + rt.staged_cached) * token_bytes_ : sel * token_bytes_;
      lat_.charge_row(static_cast<int>(r), static_cast<double>(row_bytes));
    }
    const std::int64_t windows = model ? q.staged_windows : 0;
    const OpId rd = in_place > 0 ? tl_.add(Resource::h2d, cost_.in_place_read_ns(in_place), deps,
                                           "in-place read", l)
                                 : kNoOp;
    const OpId st = staged > 0 ? tl_.add(Resource::h2d, cost_.staging_ns(staged, windows), deps,
                                         "staging windows", l)
                               : kNoOp;
    // Each window's table, token list and fold, and the accumulator's reset (the runner's
    // attend_staged): device work in the attend's op.
    const std::int64_t window_work =
        windows > 0
            ? cost_.window_fold_ns(windows, q.staged_window_rows) + cost_.fold_reset_ns(tokens_)
            : 0;
    // fp8: the SIMT attend reading in place is compute-bound, priced by its own term (the link
    // op shows the link's use); bf16 reads at the link's pace, then the attend's own part.
    const bool fp8 = cfg_.dtype == KvDtype::fp8 && in_place > 0;
    const std::int64_t rows = model ? tokens_ : std::ssize(q.rows);
    const std::int64_t attend =
        (fp8 ? cost_.attention_fp8_host_ns(in_place, rows) : 0) +
        (fp8 && staged_sel == 0 ? 0 : attend_cost(q, staged_sel * token_bytes_, in_place == 0));
    return tl_.add(Resource::compute,
                   cost_.kernel_launch_ns(2 + static_cast<int>(windows)) + attend + window_work,
                   {deps[0], deps[1], fp8 ? kNoOp : rd, st}, name, l);
  }

  // The core's ensure for the layer's pool (AdmitAll, or AdmitOnReuse for hybrid).
  EnsureResult ensure(PoolState& pool, const frontend::LayerQuery& q, std::int64_t step) {
    const int n = static_cast<int>(q.pages.size());
    const EnsureScratch es{sc_.miss.data(), sc_.victims.data(), sc_.bypass.data()};
    if (cfg_.policy == MirrorPolicy::hybrid) {
      return ensure_pages(pool.state.view(), q.pages.data(), n, step, pool.victims, es,
                          sc_.copies.data(), AdmitOnReuse{pool.last_seen.data(), {window_stamps_}});
    }
    return ensure_pages(pool.state.view(), q.pages.data(), n, step, pool.victims, es,
                        sc_.copies.data());
  }

  // Mirror: compaction + ensure + the miss copy, one launch on `lane`; returns the op after
  // which the step is done (its copy's end). In place, the attention reads the missed pages
  // from the host bank meanwhile, and a layer's step waits for the previous layer's (one
  // kernel each, on the one stream beside).
  OpId residency_op(LayerStep& ls, Resource lane, const Deps& deps, const char* name) {
    const frontend::LayerQuery& q = *ls.q;
    const int l = ls.layer;
    LayerStats& st = res_.layers[l];
    const int si = all_layers_ ? 0 : l;
    PoolState& pool = cur_->pools[static_cast<std::size_t>(si)];
    const int n = static_cast<int>(q.pages.size());
    sc_.fit(q.pages.size());
    const std::int64_t ls_index = layer_step(fi_, L_, l);
    const std::int64_t step = demand_stamp(ls_index);
    if (cfg_.on_query) cfg_.on_query(state_index(si), step, q.pages);
    const EnsureResult r = ensure(pool, q, step);
    if (r.status != EnsureStatus::ok) {
      throw CapacityError("forward " + std::to_string(fi_) + " layer " + std::to_string(l) +
                          ": the pool of " + std::to_string(cur_->slots) + " slots cannot take " +
                          std::to_string(r.misses) + " new pages (" + std::to_string(r.evictable) +
                          " evictable)");
    }
    const int missing = translate_pages(q.pages.data(), n, pool.state.slot_of_page().data(),
                                        num_pages_, dummy_slot(cur_->slots), sc_.physical.data());
    if (r.bypassed == 0 && missing != 0) {
      throw std::logic_error("simulator: a page is not resident after ensure");
    }
    frontend::log_installs(cfg_.decisions, fi_, state_index(si), step,
                           frontend::InstallKind::demand,
                           {sc_.copies.data(), static_cast<std::size_t>(r.misses)});
    st.lookups += r.hits + r.misses + r.bypassed;
    st.hits += r.hits;
    st.misses += r.misses;
    st.bypassed += r.bypassed;
    st.evictions += r.evictions;
    const std::int64_t distinct = std::max(1, r.hits + r.misses + r.bypassed);
    const std::int64_t read_in_place = is_beside(lane) ? r.misses + r.bypassed : r.bypassed;
    // Rows that bypass the pool read all they select from the host bank; the pool's rows
    // read the share of their pages that the step did not have.
    const bool model = shape_.kind == frontend::ForwardKind::model;
    const std::int64_t bypass_sel =
        (model ? q.bypass_selected_tokens : q.bypass_last_token_selected) * token_bytes_;
    const std::int64_t bypass_read =
        (model ? q.bypass_read_tokens : q.bypass_last_token_selected) * token_bytes_;
    const std::int64_t pool_in_place = (ls.sel_bytes - bypass_sel) * read_in_place / distinct;
    ls.in_place_bytes = pool_in_place + bypass_read;
    ls.pool_sel_bytes = ls.sel_bytes - bypass_sel - pool_in_place;
    const std::int64_t copy_page_bytes = all_layers_ ? page_bytes_ * L_ : page_bytes_;
    const std::int64_t copy_bytes = std::int64_t{r.misses} * copy_page_bytes;
    res_.copy_bytes += copy_bytes;
    res_.in_place_bytes += ls.in_place_bytes;
    res_.h2d_bytes += copy_bytes + ls.in_place_bytes;
    charge_step(r, copy_page_bytes, read_in_place, pool_in_place);
    if (bypass_read > 0) charge_bypass_rows(q, model);
    // Beside, the step (compaction, ensure and miss copy) is one kernel on its lane's stream: a
    // layer's step starts once the previous step on that lane has copied its misses.
    const bool beside = is_beside(lane);
    const OpId previous_step = beside && l >= lanes_ ? beside_done_[l - lanes_] : kNoOp;
    const std::array<OpId, 3> after{deps[0], deps[1], previous_step};
    // Beside, the step runs on a few blocks without the translate (its own terms).
    const std::int64_t step_ns =
        beside ? cost_.step_beside_ns(std::ssize(q.rows), q.page_entries, cur_->slots, r.misses)
               : cost_.ensure_ns(n, cur_->slots, r.misses);
    const OpId ens = tl_.add(lane, cost_.kernel_launch_ns(1) + step_ns, after, name, l);
    // Beside, the step's own few blocks copy its misses; otherwise the copy kernel's full grid.
    const std::int64_t copy_ns =
        beside ? cost_.step_beside_copy_ns(copy_bytes) : cost_.zero_copy_read_ns(copy_bytes);
    const OpId cp = copy_bytes > 0 ? tl_.add(Resource::h2d, copy_ns, {ens}, "miss copy", l) : kNoOp;
    // In place the attention does not wait for the step (it reads what the step did not have
    // from the host bank, beside it); first, it waits for the step's copy.
    if (!beside) ls.copied = cp != kNoOp ? cp : ens;
    return cp != kNoOp ? cp : ens;
  }
  // The step's link bytes to the requests whose pages crossed: each copied page its copy,
  // and the in-place bytes (priced per layer-step as the share of the selection not in the
  // pool) evenly over the pages read in place (those missed, when the step runs beside, and
  // those bypassed).
  void charge_step(const EnsureResult& r, std::int64_t copy_page_bytes, std::int64_t read_in_place,
                   std::int64_t in_place_bytes) {
    for (int i = 0; i < r.misses; ++i)
      lat_.charge_page(sc_.copies[i].page, static_cast<double>(copy_page_bytes));
    if (read_in_place == 0 || in_place_bytes == 0) return;
    const double per_page =
        static_cast<double>(in_place_bytes) / static_cast<double>(read_in_place);
    if (read_in_place > r.bypassed) {  // beside: the missed pages too
      for (int i = 0; i < r.misses; ++i)
        lat_.charge_page(sc_.copies[i].page, per_page);
    }
    for (int i = 0; i < r.bypassed; ++i)
      lat_.charge_page(sc_.bypass[i], per_page);
  }

  // Rows that bypass the pool: each row's own reads from the host bank, to its request. The
  // flags are this replay's plan_rows' even on a shared front end: simulate_together steps
  // one replay's whole forward before the next plans its rows.
  void charge_bypass_rows(const frontend::LayerQuery& q, bool model) {
    const auto bypass = fe_.bypass();
    for (std::size_t i = 0; i < q.rows.size(); ++i) {
      if (bypass[i] == 0) continue;
      const frontend::RowTokens& rt = q.rows[i];
      const std::int64_t tokens = !model                 ? rt.last_token_selected
                                  : rt.staged_cached > 0 ? rt.staged_cached
                                                         : rt.selected;
      lat_.charge_row(static_cast<int>(i), static_cast<double>(tokens * token_bytes_));
    }
  }

  // Layer l's pages ensured into layer l + 1's pool and copied, one launch beside the main
  // stream from the end of layer l's step (`after`), as the backend runs it: the ensure on the
  // lane beside (the step's few blocks: its beside terms), its copy on the link. Returns the op
  // after which the prefetch is done. A prefetch that does not fit still runs its ensure (and
  // installs nothing).
  OpId prefetch_op(const frontend::LayerQuery& q, OpId after, int l, std::int64_t ls_index,
                   const char* name) {
    PoolState& next = cur_->pools[static_cast<std::size_t>(l) + 1];
    const int n = static_cast<int>(q.pages.size());
    sc_.fit(q.pages.size());
    const EnsureScratch es{sc_.miss.data(), sc_.victims.data(), sc_.bypass.data()};
    const EnsureResult pr = PrefetchNextLayer::prefetch(
        next.state.view(), q.pages.data(), n, ls_index, next.victims, es, sc_.copies.data());
    const int copied = pr.status == EnsureStatus::ok ? pr.misses : 0;
    const OpId ens =
        tl_.add(Resource::beside,
                cost_.kernel_launch_ns(1) +
                    cost_.step_beside_ns(std::ssize(q.rows), q.page_entries, cur_->slots, copied),
                {after}, name, l + 1);
    if (copied == 0) return ens;
    frontend::log_installs(cfg_.decisions, fi_, state_index(l + 1), prefetch_stamp(ls_index),
                           frontend::InstallKind::prefetch,
                           {sc_.copies.data(), static_cast<std::size_t>(copied)});
    res_.layers[l + 1].prefetched += copied;
    for (int i = 0; i < copied; ++i)
      lat_.charge_page(sc_.copies[i].page, static_cast<double>(page_bytes_));
    const std::int64_t pb = std::int64_t{copied} * page_bytes_;
    res_.copy_bytes += pb;
    res_.h2d_bytes += pb;
    return tl_.add(Resource::h2d, cost_.step_beside_copy_ns(pb), {ens}, "prefetch copy", l + 1);
  }

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

}  // namespace

SimResult simulate(const traces::TraceInput& input, const frontend::TraceBounds& stats,
                   const CostModel& cost, const SimConfig& cfg) {
  input.header.geometry.validate();
  check_config(cfg);
  return Simulation(input, stats, cost, cfg).run();
}

std::vector<SimResult> simulate_together(const traces::TraceInput& input,
                                         const frontend::TraceBounds& stats, const CostModel& cost,
                                         std::span<const SimConfig> cfgs,
                                         const std::function<void(std::int64_t)>& on_forward) {
  input.header.geometry.validate();
  if (cfgs.empty()) return {};
  for (const SimConfig& c : cfgs) {
    check_config(c);
    if (c.staging_window_tokens != cfgs[0].staging_window_tokens) {
      throw ConfigError("simulate_together: configurations with different staging windows");
    }
  }
  frontend::FrontEnd fe(input.header.geometry, stats.peak_pages, cfgs[0].staging_window_tokens);
  frontend::LayerQueryCache cache(fe);
  std::vector<std::unique_ptr<Simulation>> sims;
  for (const SimConfig& c : cfgs)
    sims.push_back(std::make_unique<Simulation>(input, stats, cost, c, &fe, &cache));
  auto stream = input.open();
  traces::Record rec;
  std::int64_t forwards = 0;
  while (stream->next(rec)) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      fe.begin(*b);
      for (auto& s : sims)
        s->begin(*b);
    } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      const std::vector<PageId> freed = fe.end(*e);
      for (auto& s : sims)
        s->end(*e, freed);
    } else {
      const auto& f = std::get<traces::Forward>(rec);
      fe.prepare(f);
      cache.prepare();
      for (auto& s : sims)
        s->step(f);
      if (on_forward) on_forward(++forwards);
    }
  }
  std::vector<SimResult> out;
  out.reserve(sims.size());
  for (auto& s : sims)
    out.push_back(s->finish());
  return out;
}

void write_chrome_trace(std::ostream& out, const std::vector<OpRecord>& ops, const Geometry& g) {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  char buf[256];
  for (int r = 0; r < kResources; ++r) {
    const int len = std::snprintf(buf, sizeof buf,
                                  "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                                  "\"args\":{\"name\":\"%s\"}}\n",
                                  r > 0 ? "," : "", r, resource_name(static_cast<Resource>(r)));
    out.write(buf, len);
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpRecord& o = ops[i];
    const int layer_id = o.layer >= 0 ? g.qsa_layer_ids[o.layer] : -1;
    const int len = std::snprintf(
        buf, sizeof buf,
        ",{\"name\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
        "\"args\":{\"forward\":%lld,\"layer\":%d}}\n",
        o.name, static_cast<int>(o.resource), static_cast<double>(o.start) / 1e3,
        static_cast<double>(o.end - o.start) / 1e3, static_cast<long long>(o.forward), layer_id);
    out.write(buf, len);
  }
  out << "]}\n";
}

}  // namespace kvtier::sim
