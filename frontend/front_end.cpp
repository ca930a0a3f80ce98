#include "frontend/front_end.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "model/compaction.hpp"
#include "model/config_error.hpp"
#include "model/select_width.hpp"

namespace kvtier::frontend {

using traces::Forward;
using traces::RowKind;

std::int64_t row_selected_tokens(std::int64_t position, std::int64_t count, std::int64_t width) {
  // sum over p in [position, position + count) of min(p + 1, width)
  std::int64_t total = 0;
  const std::int64_t lo = position + 1;
  const std::int64_t hi = position + count;  // inclusive upper value of p + 1
  const std::int64_t ramp_end = std::min(hi, width);
  if (lo <= ramp_end) total += (lo + ramp_end) * (ramp_end - lo + 1) / 2;
  const std::int64_t flat_begin = std::max(lo, width + 1);
  if (flat_begin <= hi) total += (hi - flat_begin + 1) * width;
  return total;
}

namespace {

// The core's compact_row with the page size as a compile-time constant for the usual powers
// of two: the same inline function, so the same result, but the compiler turns its per-block
// `position / page_size` (a 64-bit division, most of the replay's time when profiled) into a
// shift. Other page sizes take the generic call.
template <int kPage>
RowCompaction compact_fixed(const std::int32_t* blocks, int n, std::int64_t pos, int ratio,
                            const PageId* table, std::int64_t table_len, int width, PageId* out) {
  return compact_row(blocks, n, pos, ratio, kPage, table, table_len, width, out);
}

RowCompaction compact_dispatch(const std::int32_t* blocks, int n, std::int64_t pos, int ratio,
                               int page_size, const PageId* table, std::int64_t table_len,
                               int width, PageId* out) {
  switch (page_size) {
    case 16:
      return compact_fixed<16>(blocks, n, pos, ratio, table, table_len, width, out);
    case 32:
      return compact_fixed<32>(blocks, n, pos, ratio, table, table_len, width, out);
    case 64:
      return compact_fixed<64>(blocks, n, pos, ratio, table, table_len, width, out);
    case 128:
      return compact_fixed<128>(blocks, n, pos, ratio, table, table_len, width, out);
    case 256:
      return compact_fixed<256>(blocks, n, pos, ratio, table, table_len, width, out);
    default:
      return compact_row(blocks, n, pos, ratio, page_size, table, table_len, width, out);
  }
}

}  // namespace

FrontEnd::FrontEnd(const Geometry& g, PageId num_pages, std::int64_t staging_window_tokens)
    : g_(g), space_(num_pages), window_(staging_window_tokens) {
  if (window_ <= 0) throw ConfigError("staging window must be positive");
}

void FrontEnd::begin(const traces::RequestBegin& b) {
  std::vector<PageId> prefix;
  if (b.shared_pages > 0) {
    if (!space_.is_open(b.shared_with)) {
      throw ConfigError("trace: request " + std::to_string(b.id) + " shares pages of request " +
                        std::to_string(b.shared_with) + ", which is not open");
    }
    // The prefix may be shared before its owner's prefill ran (requests admitted together):
    // its pages are then allocated now, as the owner's first pages, if its prompt holds them.
    const auto owner = prompt_.find(b.shared_with);
    if (static_cast<std::int64_t>(space_.pages(b.shared_with).size()) < b.shared_pages &&
        owner != prompt_.end() && b.shared_pages * g_.page_size <= owner->second) {
      space_.grow(b.shared_with, b.shared_pages * g_.page_size, g_.page_size);
    }
    const auto t = space_.pages(b.shared_with);
    if (b.shared_pages > static_cast<std::int64_t>(t.size())) {
      throw ConfigError("trace: request " + std::to_string(b.id) + " shares " +
                        std::to_string(b.shared_pages) + " pages, request " +
                        std::to_string(b.shared_with) + " holds " + std::to_string(t.size()));
    }
    prefix.assign(t.begin(), t.begin() + b.shared_pages);
  }
  space_.open(b.id, prefix);
  prompt_[b.id] = b.prompt_tokens;
}

std::vector<PageId> FrontEnd::end(const traces::RequestEnd& e) {
  prompt_.erase(e.id);
  return space_.close(e.id);
}

void FrontEnd::prepare(const Forward& f) {
  writes_.clear();
  row_pages_.clear();
  row_kind_.clear();
  bypass_.assign(f.rows.size(), 0);
  bypassed_ = 0;
  max_row_pages_ = 1;
  max_row_blocks_ = 0;
  max_row_tokens_ = 0;
  tokens_ = 0;
  decode_tokens_ = 0;
  for (const auto& row : f.rows) {
    if (row.count <= 0) throw ConfigError("trace: a forward row has no tokens");
    const std::int64_t end = row.position + row.count;
    space_.grow(row.request, end, g_.page_size);
    const auto t = space_.pages(row.request);
    for (std::int64_t i = row.position / g_.page_size; i <= (end - 1) / g_.page_size; ++i) {
      writes_.push_back(t[i]);
    }
    tokens_ += row.count;
    if (row.kind == RowKind::decode) decode_tokens_ += row.count;
    const std::int64_t rp =
        row.kind == RowKind::prefill ? g_.pages_for_context(end) : g_.max_pages_per_row(end);
    row_pages_.push_back(rp);
    row_kind_.push_back(row.kind);
    max_row_pages_ = std::max(max_row_pages_, rp);
    max_row_blocks_ = std::max(max_row_blocks_, end / g_.compress_ratio);
    max_row_tokens_ = std::max<std::int64_t>(max_row_tokens_, row.count);
  }
  std::sort(writes_.begin(), writes_.end());
  writes_.erase(std::unique(writes_.begin(), writes_.end()), writes_.end());
}

void add_bypassed_row(LayerQuery& q, const RowTokens& rt, RowKind kind) {
  q.bypass_last_token_selected += rt.last_token_selected;
  if (kind == RowKind::decode) return;
  q.bypass_selected_tokens += rt.selected;
  // a row that stages its request's cache reads the cached tokens, through windows
  q.bypass_read_tokens += rt.staged_cached > 0 ? rt.staged_cached : rt.selected;
}

int FrontEnd::full_width() const {
  return static_cast<int>(std::min<std::int64_t>(max_row_pages_, INT32_MAX / 4));
}

LayerQuery FrontEnd::build(const Forward& f, int layer, int width,
                           std::span<const std::uint8_t> bypass_rows) {
  const std::size_t rows = f.rows.size();
  if (bypass_rows.size() != rows) {
    throw std::logic_error("FrontEnd::build: bypass flags for " +
                           std::to_string(bypass_rows.size()) + " rows, the forward has " +
                           std::to_string(rows));
  }
  query_.resize(writes_.size() + rows * static_cast<std::size_t>(width));
  row_tokens_.resize(rows);
  std::copy(writes_.begin(), writes_.end(), query_.begin());
  LayerQuery q;
  q.page_entries = std::ssize(writes_);
  PageId* out = query_.data() + writes_.size();
  const std::int64_t w_tokens = g_.select_width_tokens();
  for (std::size_t r = 0; r < rows; ++r) {
    const auto& row = f.rows[r];
    const auto sel = f.selection(layer, static_cast<int>(r));
    const auto t = space_.pages(row.request);
    const std::int64_t last = row.position + row.count - 1;
    const bool bypass = bypass_rows[r] != 0;  // only its causal tail enters the query
    const RowCompaction c = compact_dispatch(sel.data(), bypass ? 0 : static_cast<int>(sel.size()),
                                             last, g_.compress_ratio, g_.page_size, t.data(),
                                             static_cast<std::int64_t>(t.size()), width, out);
    if (c.status != CompactStatus::ok) {
      throw ConfigError(
          std::string("trace: selection of request ") + std::to_string(row.request) +
          " at position " + std::to_string(row.position) +
          (c.status == CompactStatus::unsorted ? " is not ascending" : " lies beyond its context"));
    }
    q.drops += c.dropped;
    q.page_entries += c.pages;
    out += width;
    const auto tail = causal_tail(last, g_.compress_ratio);
    const std::int64_t last_tokens =
        static_cast<std::int64_t>(sel.size()) * g_.compress_ratio + (tail.end - tail.begin);
    RowTokens& rt = row_tokens_[r];
    rt = {};
    rt.last_token_selected = last_tokens;
    q.last_token_selected += last_tokens;
    if (row.kind == RowKind::decode) {
      rt.selected = last_tokens;
    } else {
      rt.selected = row_selected_tokens(row.position, row.count, w_tokens);
      const std::int64_t cached = row.position + row.count;
      const bool staged = std::int64_t{row.count} * w_tokens > cached;
      if (staged) {
        rt.staged_cached = cached;
        rt.staged_selected = rt.selected;
        const std::int64_t windows = (cached + window_ - 1) / window_;
        q.staged_windows += windows;
        q.staged_window_rows += windows * row.count;
      }
    }
    if (bypass) add_bypassed_row(q, rt, row.kind);
    q.selected_tokens += rt.selected;
    q.staged_cached_tokens += rt.staged_cached;
    q.staged_selected_tokens += rt.staged_selected;
    // visible blocks of token p: (p + 1) / ratio, summed over the row's tokens; written as
    // count x position + count (count + 1) / 2 so that it fits in an int64 for every row the
    // validator admits (position + count <= 2^32)
    const std::int64_t count = row.count;
    q.row_blocks += (count * row.position + count * (count + 1) / 2) / g_.compress_ratio;
  }
  q.pages = query_;
  q.rows = row_tokens_;
  return q;
}

TraceBounds scan_trace(const traces::TraceInput& input,
                       const std::function<void(std::int64_t)>& on_forward) {
  const Geometry& g = input.header.geometry;
  g.validate();
  TraceBounds s;
  // Page tables only: a PageSpace large enough never to run out gives the same page ids as
  // any space at least as large as the peak, because allocation takes the lowest free page.
  std::unordered_map<RequestId, std::int64_t> pages_of;
  std::int64_t open_pages = 0;
  auto stream = input.open();
  traces::Record rec;
  const int layers = g.qsa_layers();
  while (stream->next(rec)) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      if (pages_of.count(b->id)) {
        throw ConfigError("trace: request " + std::to_string(b->id) + " begins twice");
      }
      // A shared prefix is counted for both requests: an upper bound on the open pages.
      pages_of[b->id] = b->shared_pages;
      open_pages += b->shared_pages;
      ++s.requests;
    } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      auto it = pages_of.find(e->id);
      if (it == pages_of.end()) {
        throw ConfigError("trace: request " + std::to_string(e->id) + " ends but never began");
      }
      open_pages -= it->second;
      pages_of.erase(it);
    } else {
      const auto& f = std::get<Forward>(rec);
      if (f.layers != layers) {
        throw ConfigError("trace: a forward has selections for " + std::to_string(f.layers) +
                          " layers, the geometry has " + std::to_string(layers) + " QSA layers");
      }
      if (f.offsets.size() != static_cast<std::size_t>(layers) * f.rows.size() + 1) {
        throw ConfigError("trace: a forward's selection offsets do not match its rows");
      }
      ++s.forwards;
      s.max_rows = std::max(s.max_rows, static_cast<int>(f.rows.size()));
      int writes = 0;
      std::int64_t max_row_pages = 1;
      std::int64_t tokens = 0;
      for (const auto& row : f.rows) {
        tokens += row.count;
        auto it = pages_of.find(row.request);
        if (it == pages_of.end()) {
          throw ConfigError("trace: a forward row names request " + std::to_string(row.request) +
                            ", which is not open");
        }
        const std::int64_t end = row.position + row.count;
        const std::int64_t need = g.pages_for_context(end);
        if (need > it->second) {
          open_pages += need - it->second;
          it->second = need;
        }
        writes += static_cast<int>((end - 1) / g.page_size - row.position / g.page_size + 1);
        s.max_context = std::max(s.max_context, end);
        if (row.kind == traces::RowKind::decode) {
          s.decode_tokens += row.count;
        } else {
          s.prefill_tokens += row.count;
        }
        // a prefill row's union wider than this bypasses a mirror pool (FrontEnd::plan_rows)
        max_row_pages = std::max(max_row_pages, g.max_pages_per_row(end));
      }
      s.max_write_pages = std::max(s.max_write_pages, writes);
      s.max_tokens = std::max(s.max_tokens, tokens);
      s.peak_pages = std::max(s.peak_pages, static_cast<PageId>(open_pages));
      s.max_step_pages =
          std::max(s.max_step_pages,
                   std::int64_t{writes} + static_cast<std::int64_t>(f.rows.size()) * max_row_pages);
      if (on_forward) on_forward(s.forwards);
    }
  }
  s.peak_pages = std::max<PageId>(s.peak_pages, 1);
  return s;
}

int FrontEnd::plan_rows(std::int64_t pool_slots) {
  const int rows = static_cast<int>(row_pages_.size());
  std::fill(bypass_.begin(), bypass_.end(), std::uint8_t{0});
  bypassed_ = 0;
  if (pool_slots <= 0) return full_width();
  const int width = select_width(pool_slots, rows, write_pages(), max_row_pages_).width;
  // A row fits when the width holds every page it can touch; a decode row that does not is
  // truncated (its drops are counted), a prefill row bypasses. The rows that stay keep at
  // least this width when it is set again for them alone (fewer rows, no wider bound), so
  // none of them starts to need the bypass.
  std::int64_t kept_pages = 1;
  for (int r = 0; r < rows; ++r) {
    if (row_kind_[static_cast<std::size_t>(r)] == RowKind::prefill &&
        row_pages_[static_cast<std::size_t>(r)] > width) {
      bypass_[static_cast<std::size_t>(r)] = 1;
      ++bypassed_;
    } else {
      kept_pages = std::max(kept_pages, row_pages_[static_cast<std::size_t>(r)]);
    }
  }
  if (bypassed_ == 0) return width;
  // The bypassed rows' entries (a causal tail each, a written page) still take a row of the
  // fixed-shape query, so the width stays within the one every row was given: the query is
  // never longer than without the bypass (the backends size their buffers by that).
  return static_cast<int>(std::min<std::int64_t>(width, kept_pages));
}

}  // namespace kvtier::frontend
