#include "sim/mrc.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "model/config_error.hpp"

namespace kvtier::sim {

std::int64_t MissCurve::misses(std::int64_t slots) const {
  std::int64_t hits = 0;
  const std::int64_t top =
      std::min<std::int64_t>(slots, static_cast<std::int64_t>(hits_at_depth.size()) - 1);
  for (std::int64_t d = 1; d <= top; ++d)
    hits += hits_at_depth[d];
  return lookups - hits;
}

void MissCurve::merge(const MissCurve& o) {
  lookups += o.lookups;
  if (hits_at_depth.size() < o.hits_at_depth.size())
    hits_at_depth.resize(o.hits_at_depth.size(), 0);
  for (std::size_t d = 0; d < o.hits_at_depth.size(); ++d)
    hits_at_depth[d] += o.hits_at_depth[d];
}

std::int64_t query_log_bound(const frontend::TraceBounds& stats, const Geometry& g,
                             ResidencyUnit unit) {
  const std::int64_t states = unit == ResidencyUnit::layer_page ? g.qsa_layers() : 1;
  const std::int64_t steps = stats.forwards * g.qsa_layers();
  // Each layer-step: at most max_step_pages pages and its end. Each release: one entry per
  // state; a request releases at most its context's pages.
  const std::int64_t releases =
      stats.requests * ((stats.max_context + g.page_size - 1) / g.page_size) * states;
  return steps * (stats.max_step_pages + 1) + releases;
}

MrcResult miss_ratio_curve(const traces::TraceInput& input, const frontend::TraceBounds& stats,
                           ResidencyUnit unit, bool keep_log, std::int64_t max_log_entries,
                           const std::function<void(std::int64_t)>& on_forward) {
  // Entries are indexed by int32 next-use positions.
  max_log_entries = std::min<std::int64_t>(max_log_entries, QueryLog::kNever - 1);
  const Geometry& g = input.header.geometry;
  const int L = g.qsa_layers();
  const int n_states = unit == ResidencyUnit::layer_page ? L : 1;
  const PageId pages = stats.peak_pages;
  frontend::FrontEnd fe(g, pages);
  std::vector<StackDistance> stacks(n_states, StackDistance(pages));
  MrcResult res;
  res.per_layer.resize(L);
  if (keep_log) {
    res.log.num_pages = pages;
    res.log.states.resize(n_states);
  }
  // seen[state][page]: the last step index that referenced the page (dedupe within a step)
  std::vector<std::vector<std::int64_t>> seen(n_states, std::vector<std::int64_t>(pages, -1));
  std::vector<std::int64_t> pool_seen(pages, -1);  // the same over the pool's part of a step
  std::int64_t step = 0, forwards = 0;
  std::int64_t logged = 0;  // log entries over all states (pages, step ends, releases)
  auto stream = input.open();
  traces::Record rec;
  while (stream->next(rec)) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      fe.begin(*b);
    } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      for (PageId p : fe.end(*e)) {
        for (int s = 0; s < n_states; ++s) {
          stacks[s].release(p);
          if (keep_log) res.log.states[s].push_back(QueryLog::release_code(p));
          ++logged;
        }
      }
    } else {
      const auto& f = std::get<traces::Forward>(rec);
      fe.prepare(f);
      const int width = static_cast<int>(fe.max_row_pages());
      const auto writes = static_cast<std::size_t>(fe.write_pages());
      for (int l = 0; l < L; ++l) {
        const int s = unit == ResidencyUnit::layer_page ? l : 0;
        const frontend::LayerQuery q = fe.build(f, l, width);
        MissCurve& c = res.per_layer[l];
        StackDistance& st = stacks[s];
        std::vector<std::int64_t>& sn = seen[s];
        std::int64_t distinct = 0;
        std::int64_t pool_distinct = 0;  // the pool's part: write pages and decode rows' entries
        // One pass over the query, segment by segment (the write pages, then each row's
        // entries): every distinct page feeds the curve, the pool's part is counted apart.
        auto visit = [&](PageId p, bool pool) {
          if (p == kNoPage) return;
          if (pool && pool_seen[p] != step) {
            pool_seen[p] = step;
            ++pool_distinct;
          }
          if (sn[p] == step) return;
          sn[p] = step;
          ++distinct;
          const std::int64_t d = st.reference(p);
          ++c.lookups;
          if (d > 0) {
            if (static_cast<std::int64_t>(c.hits_at_depth.size()) <= d)
              c.hits_at_depth.resize(d + 1, 0);
            ++c.hits_at_depth[d];
          }
          if (keep_log) res.log.states[s].push_back(p);
        };
        for (std::size_t k = 0; k < writes; ++k)
          visit(q.pages[k], true);
        for (std::size_t r = 0; r < f.rows.size(); ++r) {
          const bool pool = f.rows[r].kind == traces::RowKind::decode;
          const PageId* row = q.pages.data() + writes + r * static_cast<std::size_t>(width);
          for (int k = 0; k < width; ++k)
            visit(row[k], pool);
        }
        res.max_pool_step_pages = std::max(res.max_pool_step_pages, pool_distinct);
        if (keep_log) res.log.states[s].push_back(QueryLog::kStepEnd);
        logged += distinct + 1;
        res.max_step_pages = std::max(res.max_step_pages, distinct);
        ++step;
      }
      auto bytes = static_cast<std::int64_t>(pool_seen.capacity() * sizeof(std::int64_t));
      for (int s = 0; s < n_states; ++s) {
        bytes += stacks[s].memory_bytes() +
                 static_cast<std::int64_t>(seen[s].capacity() * sizeof(std::int64_t));
      }
      for (const auto& c : res.per_layer)
        bytes += static_cast<std::int64_t>(c.hits_at_depth.capacity() * sizeof(std::int64_t));
      res.peak_bytes = std::max(res.peak_bytes, bytes);
      if (on_forward) on_forward(++forwards);
    }
    if (keep_log && logged > max_log_entries) {
      // Past the cap: drop the log (the Belady bound is not computed) rather than grow on.
      keep_log = false;
      res.log.dropped = true;
      res.log.states.assign(res.log.states.size(), {});
    }
  }
  res.log_entries = logged;
  if (keep_log) res.log.index_next_uses();
  for (const auto& c : res.per_layer)
    res.curve.merge(c);
  return res;
}

namespace {

std::int64_t belady_state(const std::vector<std::int32_t>& seq,
                          const std::vector<std::int32_t>& next_use, PageId pages,
                          std::int64_t slots) {
  constexpr std::int64_t kNever = QueryLog::kNever;
  struct Entry {
    std::int64_t key;
    PageId page;
    bool operator<(const Entry& o) const {  // max-heap: furthest next use on top
      return key < o.key || (key == o.key && page < o.page);
    }
  };
  std::vector<char> resident(pages, 0);
  std::vector<std::int64_t> key(pages, kNever);
  std::vector<std::int64_t> pinned(pages, -1);
  std::vector<Entry> heap;
  std::vector<Entry> aside;
  std::vector<std::pair<PageId, std::int64_t>> missing;
  std::int64_t count = 0, misses = 0, step = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::int32_t v = seq[i];
    if (v >= 0) continue;
    if (v != QueryLog::kStepEnd) {  // release
      const PageId p = -2 - v;
      if (resident[p]) {
        resident[p] = 0;
        --count;
      }
      begin = i + 1;
      continue;
    }
    // one step: seq[begin, i)
    missing.clear();
    for (std::size_t j = begin; j < i; ++j) {
      const PageId p = seq[j];
      pinned[p] = step;
      if (resident[p]) {
        key[p] = next_use[j];
        heap.push_back({key[p], p});
        std::push_heap(heap.begin(), heap.end());
      } else {
        missing.emplace_back(p, next_use[j]);
      }
    }
    if (static_cast<std::int64_t>(i - begin) > slots) {
      throw ConfigError("belady: a step queries " + std::to_string(i - begin) +
                        " pages, more than the " + std::to_string(slots) + " slots");
    }
    for (const auto& [p, nu] : missing) {
      ++misses;
      if (count == slots) {
        while (true) {
          std::pop_heap(heap.begin(), heap.end());
          const Entry e = heap.back();
          heap.pop_back();
          if (!resident[e.page] || key[e.page] != e.key) continue;  // stale
          if (pinned[e.page] == step) {
            aside.push_back(e);
            continue;
          }
          resident[e.page] = 0;
          --count;
          break;
        }
      }
      resident[p] = 1;
      key[p] = nu;
      heap.push_back({nu, p});
      std::push_heap(heap.begin(), heap.end());
      ++count;
    }
    // Pages of this step set aside stay pinned for the whole step: they go back once, after
    // its misses (putting them back after each miss made a step quadratic in its pages).
    for (const Entry& e : aside) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end());
    }
    aside.clear();
    if (heap.size() > static_cast<std::size_t>(4 * count + 1024)) {
      std::erase_if(heap,
                    [&](const Entry& e) { return !resident[e.page] || key[e.page] != e.key; });
      std::make_heap(heap.begin(), heap.end());
    }
    ++step;
    begin = i + 1;
  }
  return misses;
}

}  // namespace

std::int64_t QueryLog::entries() const {
  std::int64_t n = 0;
  for (const auto& s : states)
    n += static_cast<std::int64_t>(s.size());
  return n;
}

void QueryLog::index_next_uses() {
  next_use.assign(states.size(), {});
  std::vector<std::int32_t> next(num_pages);
  for (std::size_t si = 0; si < states.size(); ++si) {
    const std::vector<std::int32_t>& seq = states[si];
    std::vector<std::int32_t>& nu = next_use[si];
    nu.assign(seq.size(), kNever);
    std::fill(next.begin(), next.end(), kNever);
    // Backwards: a reference's next use is the following reference of its page; a release
    // in between makes it never (a reused page id is a new page).
    for (auto i = static_cast<std::int64_t>(seq.size()) - 1; i >= 0; --i) {
      const std::int32_t v = seq[i];
      if (v >= 0) {
        nu[i] = next[v];
        next[v] = static_cast<std::int32_t>(i);
      } else if (v != kStepEnd) {
        next[-2 - v] = kNever;
      }
    }
  }
}

std::int64_t belady_misses(const QueryLog& log, std::int64_t slots) {
  if (log.dropped) {
    throw ConfigError("belady: the query log was dropped (longer than its cap); no bound");
  }
  if (log.next_use.size() != log.states.size()) {
    throw std::logic_error("belady: the query log has no next-use index");
  }
  std::int64_t total = 0;
  for (std::size_t s = 0; s < log.states.size(); ++s)
    total += belady_state(log.states[s], log.next_use[s], log.num_pages, slots);
  return total;
}

}  // namespace kvtier::sim
