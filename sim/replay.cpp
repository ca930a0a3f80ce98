#include "sim/replay.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "frontend/layer_query_cache.hpp"
#include "model/admission.hpp"
#include "model/config_error.hpp"
#include "model/layer_compute.hpp"
#include "model/memory_budget.hpp"
#include "model/step_stamp.hpp"
#include "sim/replay_config.hpp"
#include "sim/replay_simulation.hpp"

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

namespace replay_detail {

Simulation::Simulation(const traces::TraceInput& input, const frontend::TraceBounds& stats,
                       const CostModel& cost, const SimConfig& cfg, frontend::FrontEnd* shared_fe,
                       frontend::LayerQueryCache* cache)
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
      own_fe_(
          shared_fe != nullptr && cfg.micro_batches == 1
              ? std::nullopt
              : std::make_optional<frontend::FrontEnd>(g_, num_pages_, cfg.staging_window_tokens)),
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

SimResult Simulation::run() {
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

void Simulation::begin(const traces::RequestBegin& b) {
  if (own_fe_) own_fe_->begin(b);
  if (batches_) batches_->begin(b.id);
  const auto shared = b.shared_pages > 0 ? fe_.table(b.shared_with).first(b.shared_pages) : Pages{};
  lat_.begin(b, tl_.now(), shared);
}

void Simulation::end(const traces::RequestEnd& e, std::span<const PageId> shared_freed) {
  std::vector<PageId> own;
  if (own_fe_) own = own_fe_->end(e);
  const int k = batches_ ? batches_->end(e.id) : 0;
  release(k, own_fe_ ? std::span<const PageId>(own) : shared_freed);
}

void Simulation::step(const traces::Forward& f) {
  if (batches_) {
    forward_groups(f);
  } else {
    if (own_fe_) own_fe_->prepare(f);
    forward(f);
  }
  ++fi_;
  if (cfg_.on_forward) cfg_.on_forward(fi_);
}

SimResult Simulation::finish() {
  res_.forwards = fi_;
  res_.makespan_ns = tl_.drain();
  for (int r = 0; r < kResources; ++r)
    res_.busy_ns[r] = tl_.busy_ns(static_cast<Resource>(r));
  if (cfg_.record_timeline) res_.timeline = tl_.records();
  res_.requests = lat_.finish(res_.latency);
  return std::move(res_);
}

void Simulation::release(int group, std::span<const PageId> freed) {
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

void Simulation::own_new_pages(const traces::Forward& f) {
  lat_.start_forward(f.rows);
  for (std::size_t r = 0; r < f.rows.size(); ++r)
    lat_.own_table(static_cast<int>(r), fe_.table(f.rows[r].request));
}

void Simulation::forward(const traces::Forward& f) {
  const TimeNs fstart = tl_.now();
  const ForwardOps ops = add_forward(f);
  const TimeNs end = tl_.run_until(ops.last);
  charge_span(fstart, end, ops.tokens, ops.decode_tokens);
  lat_.end_forward(f.rows, fi_, fstart, end);
  record_forward(ops, fstart, end);
}

void Simulation::forward_groups(const traces::Forward& f) {
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
    for (const traces::Forward& sub : subs_) {
      if (sub.rows.empty()) continue;
      lat_.start_forward(sub.rows);  // the latency holds the rows of the group added last
      lat_.end_forward(sub.rows, fi_, fstart, end);
    }
    record_forward(all, fstart, end);
  }
  cur_ = &groups_[0];
}

void Simulation::charge_span(TimeNs start, TimeNs end, std::int64_t tokens,
                             std::int64_t decode_tokens) {
  const double dt = static_cast<double>(end - start);
  if (tokens > 0) {
    res_.decode_time_ns += dt * static_cast<double>(decode_tokens) / static_cast<double>(tokens);
    res_.prefill_time_ns +=
        dt * static_cast<double>(tokens - decode_tokens) / static_cast<double>(tokens);
  }
  res_.compute_end_ns = end;
}

void Simulation::record_forward(const ForwardOps& ops, TimeNs start, TimeNs end) {
  if (!cfg_.record_forwards) return;
  res_.forwards_detail.push_back({fi_, ops.rows, ops.tokens, ops.decode_tokens, start, end,
                                  end - start, ops.counts.hits, ops.counts.misses,
                                  ops.counts.evictions, ops.counts.drops});
}

Simulation::ForwardOps Simulation::add_forward(const traces::Forward& f) {
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
  lanes_ = frontend::beside_steps(shape_, f, g_, static_cast<int>(cost_.profile().sm_count)).lanes;
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
  cur_->last = frontend::LastForward{decode, after.misses - before.misses, std::int64_t{rows} * L_};
  last_one_row_ = one_row;
  last_sel_bytes_ = sel_bytes;
  ForwardOps out{last, rows, tokens_, decode_tokens, after};
  out.counts -= before;
  return out;
}

}  // namespace replay_detail

using replay_detail::Simulation;

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
