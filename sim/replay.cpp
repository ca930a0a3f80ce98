#include "sim/replay.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "model/admission.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/ensure.hpp"
#include "model/memory_budget.hpp"
#include "model/residency_state.hpp"
#include "model/translate.hpp"
#include "model/victims_heap.hpp"

namespace kvtier::sim {

std::string_view to_string(Policy p) {
  switch (p) {
    case Policy::lru:
      return "lru";
    case Policy::hybrid:
      return "hybrid";
    case Policy::prefetch:
      return "prefetch";
  }
  return "?";
}

Policy parse_policy(std::string_view text) {
  if (text == "lru") return Policy::lru;
  if (text == "hybrid") return Policy::hybrid;
  if (text == "prefetch") return Policy::prefetch;
  throw ConfigError("policy: expected lru, hybrid or prefetch, got '" + std::string(text) + "'");
}

LayerStats SimResult::total() const {
  LayerStats t;
  for (const auto& l : layers) {
    t.lookups += l.lookups;
    t.hits += l.hits;
    t.misses += l.misses;
    t.bypassed += l.bypassed;
    t.evictions += l.evictions;
    t.drops += l.drops;
    t.prefetched += l.prefetched;
  }
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
struct Pool {
  ResidencyState state;
  HeapVictims victims;
  std::vector<std::int64_t> last_seen;  // hybrid admission, [pages]

  Pool(PageId pages, SlotId slots, bool hybrid)
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

void dump(std::ostream* out, std::int64_t forward, int state, std::int64_t step, const char* kind,
          const CopyOp* ops, int n) {
  if (out == nullptr) return;
  char buf[192];
  for (int i = 0; i < n; ++i) {
    const int len = std::snprintf(
        buf, sizeof buf,
        "{\"forward\":%lld,\"state\":%d,\"step\":%lld,\"kind\":\"%s\",\"page\":%d,\"slot\":%d,"
        "\"evicted\":%d}\n",
        static_cast<long long>(forward), state, static_cast<long long>(step), kind, ops[i].page,
        ops[i].slot, ops[i].evicted);
    out->write(buf, len);
  }
}

}  // namespace

SimResult simulate(const traces::TraceInput& input, const frontend::TraceBounds& stats,
                   const CostModel& cost, const SimConfig& cfg) {
  const Geometry& g = input.header.geometry;
  g.validate();
  const bool mirror = cfg.placement == Placement::mirror;
  if (cfg.policy != Policy::lru && !mirror) {
    throw ConfigError("policy " + std::string(to_string(cfg.policy)) +
                      " needs placement mirror (it decides what the GPU pool holds)");
  }
  if (mirror && cfg.pool_slots <= 0) {
    throw ConfigError(cfg.pool_slots == 0
                          ? "placement mirror needs a pool size (--slots N)"
                          : "pool size must be positive, got " + std::to_string(cfg.pool_slots));
  }
  if (cfg.hybrid_window <= 0) throw ConfigError("hybrid window must be positive");
  const int L = g.qsa_layers();
  const PageId num_pages = stats.peak_pages;
  const std::int64_t token_bytes = g.kv_bytes_per_token(cfg.dtype);
  const std::int64_t page_bytes = g.kv_bytes_per_page(cfg.dtype);
  const bool all_layers = cfg.unit == ResidencyUnit::all_layers_page;
  const std::int64_t copy_page_bytes = all_layers ? page_bytes * L : page_bytes;

  SimResult res;
  res.layers.resize(L);
  {
    // The start-up budget is always priced (the planner reports whether each configuration
    // fits the card); with check_memory a configuration that does not fit is an error.
    BudgetRequest br;
    br.geometry = g;
    br.dtype = cfg.dtype;
    br.placement = cfg.placement;
    br.unit = cfg.unit;
    br.host_pages = num_pages;
    br.pool_slots = cfg.pool_slots;
    br.batch_rows = std::max(1, stats.max_rows);
    br.write_pages = stats.max_write_pages;
    br.context_tokens = std::max<std::int64_t>(1, stats.max_context);
    br.staging_window_tokens = cfg.staging_window_tokens;
    if (cfg.check_memory) {
      br.device_capacity_bytes =
          static_cast<std::int64_t>(cost.profile().device_memory_gib * 1024.0 * 1024.0 * 1024.0);
    }
    const MemoryBudget mb = memory_budget(br);
    res.device_bytes = mb.device_bytes;
    res.host_bytes = mb.host_bytes;
  }

  frontend::FrontEnd fe(g, num_pages, cfg.staging_window_tokens);
  const auto slots = static_cast<SlotId>(cfg.pool_slots);
  std::vector<Pool> pools;
  if (mirror) {
    const int n = all_layers ? 1 : L;
    pools.reserve(n);
    for (int i = 0; i < n; ++i)
      pools.emplace_back(num_pages, slots, cfg.policy == Policy::hybrid);
  }
  // Stamps: two per (forward, layer), so that a prefetch for layer l+1 issued during layer l
  // lies strictly between layer l's and layer l+1's demand ensures.
  const std::int64_t window_stamps = cfg.hybrid_window * 2 * L;
  Scratch sc;

  // The non-QSA layers before each QSA layer, and after the last one.
  std::vector<int> gap_layers(L + 1, 0);
  for (int l = 0; l < L; ++l) {
    gap_layers[l] = g.qsa_layer_ids[l] - (l > 0 ? g.qsa_layer_ids[l - 1] + 1 : 0);
  }
  gap_layers[L] = g.total_layers - 1 - g.qsa_layer_ids[L - 1];
  const int non_qsa = std::max(1, g.total_layers - L);

  Timeline tl(cfg.record_timeline);
  auto stream = input.open();
  traces::Record rec;
  std::int64_t fi = 0;
  res.select_width_min = 0;
  while (stream->next(rec)) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      fe.begin(*b);
      continue;
    }
    if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      const std::vector<PageId> freed = fe.end(*e);
      for (std::size_t si = 0; si < pools.size(); ++si) {
        Pool& p = pools[si];
        for (PageId page : freed) {
          if (cfg.on_release) cfg.on_release(static_cast<int>(si), page);
          release_page(p.state.view(), page, p.victims);
          if (!p.last_seen.empty()) p.last_seen[page] = AdmitOnReuse::kNeverSeen;
        }
      }
      continue;
    }
    const auto& f = std::get<traces::Forward>(rec);
    fe.prepare(f);
    const int rows = static_cast<int>(f.rows.size());
    const int width = fe.row_width(rows, mirror ? cfg.pool_slots : 0);
    res.select_width_min =
        res.select_width_min == 0 ? width : std::min(res.select_width_min, width);
    const std::int64_t tokens = fe.tokens();
    const std::int64_t decode_tokens = fe.decode_tokens();
    res.decode_tokens += decode_tokens;
    res.prefill_tokens += tokens - decode_tokens;
    const std::int64_t non_qsa_ns = cost.non_qsa_ns(tokens);
    auto gap_ns = [&](int i) { return non_qsa_ns * gap_layers[i] / non_qsa; };

    tl.set_forward(fi);
    const TimeNs fstart = tl.now();
    OpId prev = kNoOp;
    OpId prefetch_op = kNoOp;  // the prefetch copy the coming layer must wait for
    for (int l = 0; l < L; ++l) {
      LayerStats& ls = res.layers[l];
      const OpId gap = tl.add(Resource::compute, gap_ns(l), {prev}, "non-QSA layers", l);
      const frontend::LayerQuery q = fe.build(f, l, width);
      ls.drops += q.drops;
      const OpId idx =
          tl.add(Resource::compute,
                 cost.launch_ns(3) + cost.indexer_ns(q.row_blocks) + cost.topk_ns(q.row_blocks),
                 {gap}, "store+index+top-k", l);
      if (cfg.placement != Placement::device) {
        const std::int64_t bytes = tokens * token_bytes;
        res.d2h_bytes += bytes;
        tl.add(Resource::d2h, cost.zero_copy_write_ns(bytes), {idx}, "mirror store", l);
      }
      const std::int64_t sel_bytes = q.selected_tokens * token_bytes;
      OpId attn = kNoOp;
      if (cfg.placement == Placement::device) {
        res.hbm_read_bytes += sel_bytes;
        attn = tl.add(Resource::compute, cost.launch_ns(2) + cost.attention_ns(sel_bytes), {idx},
                      "attention", l);
      } else if (cfg.placement == Placement::host) {
        const std::int64_t in_place = (q.selected_tokens - q.staged_selected_tokens) * token_bytes;
        const std::int64_t staged = q.staged_cached_tokens * token_bytes;
        res.in_place_bytes += in_place;
        res.h2d_bytes += in_place + staged;
        res.hbm_read_bytes += q.staged_selected_tokens * token_bytes;
        const OpId rd = in_place > 0 ? tl.add(Resource::h2d, cost.zero_copy_read_ns(in_place),
                                              {idx}, "in-place read", l)
                                     : kNoOp;
        const OpId st = staged > 0
                            ? tl.add(Resource::h2d, cost.h2d_copy_ns(staged, q.staged_windows),
                                     {idx}, "staging windows", l)
                            : kNoOp;
        attn = tl.add(Resource::compute,
                      cost.launch_ns(2 + static_cast<int>(q.staged_windows)) +
                          cost.attention_ns(q.staged_selected_tokens * token_bytes),
                      {idx, rd, st}, "attention", l);
      } else {
        const int si = all_layers ? 0 : l;
        Pool& pool = pools[si];
        const int n = static_cast<int>(q.pages.size());
        sc.fit(q.pages.size());
        const std::int64_t step = (fi * L + l) * 2 + 1;
        if (cfg.on_query) cfg.on_query(si, step, q.pages);
        const EnsureScratch es{sc.miss.data(), sc.victims.data(), sc.bypass.data()};
        const EnsureResult r =
            cfg.policy == Policy::hybrid
                ? ensure_pages(pool.state.view(), q.pages.data(), n, step, pool.victims, es,
                               sc.copies.data(),
                               AdmitOnReuse{pool.last_seen.data(), {window_stamps}})
                : ensure_pages(pool.state.view(), q.pages.data(), n, step, pool.victims, es,
                               sc.copies.data());
        if (r.status != EnsureStatus::ok) {
          throw CapacityError("forward " + std::to_string(fi) + " layer " + std::to_string(l) +
                              ": the pool of " + std::to_string(cfg.pool_slots) +
                              " slots cannot take " + std::to_string(r.misses) + " new pages (" +
                              std::to_string(r.evictable) + " evictable)");
        }
        const int missing = translate_pages(q.pages.data(), n, pool.state.slot_of_page().data(),
                                            num_pages, dummy_slot(slots), sc.physical.data());
        if (r.bypassed == 0 && missing != 0) {
          throw std::logic_error("simulator: a page is not resident after ensure");
        }
        dump(cfg.decisions, fi, si, step, "demand", sc.copies.data(), r.misses);
        ls.lookups += r.hits + r.misses + r.bypassed;
        ls.hits += r.hits;
        ls.misses += r.misses;
        ls.bypassed += r.bypassed;
        ls.evictions += r.evictions;
        const std::int64_t distinct = std::max(1, r.hits + r.misses + r.bypassed);
        const std::int64_t bypass_bytes = sel_bytes * r.bypassed / distinct;
        const std::int64_t copy_bytes = std::int64_t{r.misses} * copy_page_bytes;
        res.copy_bytes += copy_bytes;
        res.in_place_bytes += bypass_bytes;
        res.h2d_bytes += copy_bytes + bypass_bytes;
        res.hbm_read_bytes += sel_bytes - bypass_bytes;
        const OpId ens = tl.add(Resource::compute,
                                cost.launch_ns(3) + cost.ensure_ns(n, cfg.pool_slots, r.misses),
                                {idx}, "compact+ensure+translate", l);
        const OpId cp = copy_bytes > 0 ? tl.add(Resource::h2d, cost.zero_copy_read_ns(copy_bytes),
                                                {ens}, "miss copy", l)
                                       : kNoOp;
        const OpId byp = bypass_bytes > 0
                             ? tl.add(Resource::h2d, cost.zero_copy_read_ns(bypass_bytes), {ens},
                                      "in-place read", l)
                             : kNoOp;
        attn = tl.add(Resource::compute,
                      cost.launch_ns(2) + cost.attention_ns(sel_bytes - bypass_bytes),
                      {ens, cp, byp, prefetch_op}, "attention", l);
        prefetch_op = kNoOp;
        if (cfg.policy == Policy::prefetch && !all_layers && l + 1 < L) {
          // Layer l's pages, copied for layer l+1 while the GPU runs what lies between.
          Pool& next = pools[l + 1];
          const EnsureResult pr = ensure_pages(next.state.view(), q.pages.data(), n, step + 1,
                                               next.victims, es, sc.copies.data());
          if (pr.status == EnsureStatus::ok && pr.misses > 0) {
            dump(cfg.decisions, fi, l + 1, step + 1, "prefetch", sc.copies.data(), pr.misses);
            res.layers[l + 1].prefetched += pr.misses;
            const std::int64_t pb = std::int64_t{pr.misses} * page_bytes;
            res.copy_bytes += pb;
            res.h2d_bytes += pb;
            prefetch_op =
                tl.add(Resource::h2d, cost.zero_copy_read_ns(pb), {ens}, "prefetch copy", l + 1);
          }
        }
      }
      prev = attn;
    }
    const OpId last = tl.add(Resource::compute, gap_ns(L), {prev}, "non-QSA layers", -1);
    const TimeNs end = tl.run_until(last);
    const double dt = static_cast<double>(end - fstart);
    if (tokens > 0) {
      res.decode_time_ns += dt * static_cast<double>(decode_tokens) / static_cast<double>(tokens);
      res.prefill_time_ns +=
          dt * static_cast<double>(tokens - decode_tokens) / static_cast<double>(tokens);
    }
    res.compute_end_ns = end;
    ++fi;
    if (cfg.on_forward) cfg.on_forward(fi);
  }
  res.forwards = fi;
  res.makespan_ns = tl.drain();
  for (int r = 0; r < kResources; ++r)
    res.busy_ns[r] = tl.busy_ns(static_cast<Resource>(r));
  if (cfg.record_timeline) res.timeline = tl.records();
  return res;
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
