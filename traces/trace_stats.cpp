#include "traces/trace_stats.hpp"

#include <algorithm>

namespace kvtier::traces {
namespace {

// An LRU over block ids as an intrusive doubly-linked list in arrays (node b + 1; node 0 is
// the sentinel: next[0] is the most recent, prev[0] the least recent).
class BlockLru {
 public:
  explicit BlockLru(std::int64_t capacity) : cap_(capacity), prev_(1, 0), next_(1, 0), in_(1, 0) {}
  bool access(std::int32_t b) {
    const std::size_t n = static_cast<std::size_t>(b) + 1;
    if (n >= in_.size()) {
      const std::size_t sz = std::max(n + 1, in_.size() * 2);
      prev_.resize(sz, 0);
      next_.resize(sz, 0);
      in_.resize(sz, 0);
    }
    const bool hit = in_[n];
    if (hit) {
      unlink(n);
    } else if (size_ == cap_) {
      const std::size_t lru = prev_[0];
      unlink(lru);
      in_[lru] = 0;
    } else {
      ++size_;
    }
    in_[n] = 1;
    next_[n] = next_[0];
    prev_[n] = 0;
    prev_[next_[0]] = static_cast<std::uint32_t>(n);
    next_[0] = static_cast<std::uint32_t>(n);
    return hit;
  }

 private:
  void unlink(std::size_t n) {
    next_[prev_[n]] = next_[n];
    prev_[next_[n]] = prev_[n];
  }
  std::int64_t cap_;
  std::int64_t size_ = 0;
  std::vector<std::uint32_t> prev_, next_;
  std::vector<std::uint8_t> in_;
};

std::size_t intersect(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
  std::size_t i = 0, j = 0, n = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      ++n, ++i, ++j;
    } else if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

}  // namespace

struct TraceStats::RequestStats {
  std::int64_t context = 0;
  struct Layer {
    std::vector<std::int32_t> prev;
    bool has_prev = false;
    std::vector<std::uint8_t> pages;
    std::uint64_t distinct_pages = 0;
    std::vector<std::vector<std::uint32_t>> stamp;  // [window] block -> window index + 1
    std::vector<std::uint64_t> cur;                 // [window] distinct in the open window
    std::vector<BlockLru> lru;
  };
  std::vector<Layer> layers;
  std::uint64_t decode_steps = 0;
};

TraceStats::TraceStats(const TraceHeader& h, std::vector<int> lru_multiples,
                       std::vector<int> windows)
    : g_(h.geometry), lru_multiples_(std::move(lru_multiples)), windows_(std::move(windows)) {
  const auto layers = static_cast<std::size_t>(g_.qsa_layers());
  s_.layers = g_.qsa_layers();
  overlap_sum_.assign(layers, 0);
  overlap_n_.assign(layers, 0);
  sink_hits_.assign(16, 0);
  ws_sum_.assign(windows_.size(), 0);
  ws_n_.assign(windows_.size(), 0);
  lru_hits_.assign(lru_multiples_.size(), 0);
}

TraceStats::~TraceStats() = default;

void TraceStats::close_request(RequestId id) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  RequestStats& rs = *it->second;
  if (ctx_n_ == 0 || rs.context < s_.context_min) s_.context_min = rs.context;
  s_.context_max = std::max(s_.context_max, rs.context);
  ctx_sum_ += static_cast<std::uint64_t>(rs.context);
  ++ctx_n_;
  for (const auto& l : rs.layers)
    s_.distinct_pages += l.distinct_pages;
  request_layers_ += rs.layers.size();
  open_.erase(it);
}

void TraceStats::add(const Record& r) {
  ++s_.records;
  if (const auto* b = std::get_if<RequestBegin>(&r)) {
    ++s_.requests;
    auto rs = std::make_unique<RequestStats>();
    rs->context = b->prompt_tokens;
    rs->layers.resize(static_cast<std::size_t>(g_.qsa_layers()));
    for (auto& l : rs->layers) {
      l.stamp.resize(windows_.size());
      l.cur.assign(windows_.size(), 0);
      for (int m : lru_multiples_)
        l.lru.emplace_back(std::int64_t{m} * g_.block_topk());
    }
    open_[b->id] = std::move(rs);
    return;
  }
  if (const auto* e = std::get_if<RequestEnd>(&r)) {
    close_request(e->id);
    return;
  }
  const Forward& f = std::get<Forward>(r);
  ++s_.forwards;
  s_.ids += f.ids.size();
  const int rows = static_cast<int>(f.rows.size());
  for (int ri = 0; ri < rows; ++ri) {
    const ForwardRow& row = f.rows[static_cast<std::size_t>(ri)];
    auto it = open_.find(row.request);
    if (it == open_.end()) continue;
    RequestStats& rs = *it->second;
    rs.context = std::max(rs.context, row.position + row.count);
    const bool decode = row.kind == RowKind::decode;
    if (decode) {
      ++s_.decode_rows;
    } else {
      ++s_.prefill_rows;
      s_.prefill_tokens += static_cast<std::uint64_t>(row.count);
    }
    const std::int64_t visible = (row.position + row.count) / g_.compress_ratio;
    const bool sparse = decode && visible > g_.block_topk();
    if (sparse) ++sparse_n_;
    const std::uint64_t step = rs.decode_steps;
    for (int l = 0; l < f.layers; ++l) {
      auto& L = rs.layers[static_cast<std::size_t>(l)];
      const auto sel = f.selection(l, ri);
      const int blocks_per_page = g_.page_size / g_.compress_ratio;
      for (std::int32_t b : sel) {
        const auto page = static_cast<std::size_t>(b / blocks_per_page);
        if (page >= L.pages.size()) L.pages.resize(std::max(page + 1, L.pages.size() * 2), 0);
        if (!L.pages[page]) {
          L.pages[page] = 1;
          ++L.distinct_pages;
        }
      }
      if (!decode) continue;
      s_.decode_ids += sel.size();
      if (L.has_prev && !sel.empty()) {
        overlap_sum_[static_cast<std::size_t>(l)] +=
            static_cast<double>(intersect(sel, L.prev)) / static_cast<double>(sel.size());
        ++overlap_n_[static_cast<std::size_t>(l)];
      }
      L.prev.assign(sel.begin(), sel.end());
      L.has_prev = true;
      if (l + 1 < f.layers && !sel.empty()) {
        adj_sum_ += static_cast<double>(intersect(sel, f.selection(l + 1, ri))) /
                    static_cast<double>(sel.size());
        ++adj_n_;
      }
      if (sparse) {
        for (std::int32_t b : sel) {
          if (b >= 16) break;
          ++sink_hits_[static_cast<std::size_t>(b)];
        }
        if (std::binary_search(sel.begin(), sel.end(), static_cast<std::int32_t>(visible - 1))) {
          ++newest_hits_;
        }
      }
      for (std::size_t w = 0; w < windows_.size(); ++w) {
        const auto W = static_cast<std::uint64_t>(windows_[w]);
        auto& stamp = L.stamp[w];
        const auto mark = static_cast<std::uint32_t>(step / W + 1);
        for (std::int32_t b : sel) {
          const auto bi = static_cast<std::size_t>(b);
          if (bi >= stamp.size()) stamp.resize(std::max(bi + 1, stamp.size() * 2), 0);
          if (stamp[bi] != mark) {
            stamp[bi] = mark;
            ++L.cur[w];
          }
        }
        if (step % W == W - 1) {
          ws_sum_[w] += static_cast<double>(L.cur[w]);
          ++ws_n_[w];
          L.cur[w] = 0;
        }
      }
      for (std::size_t m = 0; m < L.lru.size(); ++m) {
        std::uint64_t hits = 0;
        for (std::int32_t b : sel)
          hits += L.lru[m].access(b);
        lru_hits_[m] += hits;
      }
      lru_n_ += L.lru.empty() ? 0 : sel.size();
    }
    if (decode) ++rs.decode_steps;
  }
}

TraceSummary TraceStats::summary() const {
  TraceSummary s = s_;
  // Requests still open count with what they saw so far.
  std::uint64_t ctx_sum = ctx_sum_, ctx_n = ctx_n_, rl = request_layers_;
  for (const auto& [id, rs] : open_) {
    if (ctx_n == 0 || rs->context < s.context_min) s.context_min = rs->context;
    s.context_max = std::max(s.context_max, rs->context);
    ctx_sum += static_cast<std::uint64_t>(rs->context);
    ++ctx_n;
    for (const auto& l : rs->layers)
      s.distinct_pages += l.distinct_pages;
    rl += rs->layers.size();
  }
  s.context_mean = ratio(static_cast<double>(ctx_sum), static_cast<double>(ctx_n));
  s.distinct_pages_per_request_layer =
      ratio(static_cast<double>(s.distinct_pages), static_cast<double>(rl));
  double osum = 0, on = 0;
  for (std::size_t l = 0; l < overlap_sum_.size(); ++l) {
    s.step_overlap.push_back(ratio(overlap_sum_[l], static_cast<double>(overlap_n_[l])));
    osum += overlap_sum_[l];
    on += static_cast<double>(overlap_n_[l]);
  }
  s.step_overlap_mean = ratio(osum, on);
  s.adjacent_layer_overlap = ratio(adj_sum_, static_cast<double>(adj_n_));
  const double sparse_sel = static_cast<double>(sparse_n_) * s.layers;
  for (std::uint64_t h : sink_hits_)
    s.sink_share.push_back(ratio(static_cast<double>(h), sparse_sel));
  s.newest_share = ratio(static_cast<double>(newest_hits_), sparse_sel);
  s.windows = windows_;
  for (std::size_t w = 0; w < windows_.size(); ++w) {
    s.working_set_blocks.push_back(ratio(ws_sum_[w], static_cast<double>(ws_n_[w])));
    s.working_set_windows.push_back(ws_n_[w]);
  }
  s.lru_lookups = lru_n_;
  s.lru_multiple = lru_multiples_;
  for (std::size_t m = 0; m < lru_multiples_.size(); ++m) {
    s.lru_capacity.push_back(std::int64_t{lru_multiples_[m]} * g_.block_topk());
    s.lru_hit.push_back(ratio(static_cast<double>(lru_hits_[m]), static_cast<double>(lru_n_)));
  }
  return s;
}

boost::json::object TraceSummary::to_json() const {
  namespace json = boost::json;
  auto arr = [](const auto& v) {
    json::array a;
    for (const auto& x : v)
      a.push_back(json::value_from(x));
    return a;
  };
  json::array ws, lru;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    json::value mean = nullptr;  // null: no request decoded that many steps
    if (working_set_windows[i] > 0) mean = working_set_blocks[i];
    ws.push_back({{"steps", windows[i]}, {"mean_distinct_blocks", mean}});
  }
  for (std::size_t i = 0; i < lru_multiple.size(); ++i) {
    lru.push_back({{"multiple_of_topk", lru_multiple[i]},
                   {"capacity_blocks", lru_capacity[i]},
                   {"hit_rate", lru_lookups > 0 ? json::value(lru_hit[i]) : json::value()}});
  }
  return {{"records", records},
          {"requests", requests},
          {"forwards", forwards},
          {"prefill_rows", prefill_rows},
          {"decode_rows", decode_rows},
          {"prefill_tokens", prefill_tokens},
          {"selected_ids", ids},
          {"decode_selected_ids", decode_ids},
          {"layers", layers},
          {"context", {{"min", context_min}, {"mean", context_mean}, {"max", context_max}}},
          {"distinct_pages", distinct_pages},
          {"distinct_pages_per_request_layer", distinct_pages_per_request_layer},
          {"step_overlap_per_layer", arr(step_overlap)},
          {"step_overlap_mean", step_overlap_mean},
          {"adjacent_layer_overlap", adjacent_layer_overlap},
          {"sink_share_first16", arr(sink_share)},
          {"newest_block_share", newest_share},
          {"working_set", ws},
          {"lru", lru}};
}

}  // namespace kvtier::traces
