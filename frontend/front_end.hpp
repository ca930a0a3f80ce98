#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/geometry.hpp"
#include "model/page_space.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::frontend {

// What a pre-pass over a trace finds; sizes every later pass.
struct TraceBounds {
  PageId peak_pages = 0;            // most logical pages open at once (the page space needed)
  int max_rows = 0;                 // widest forward
  int max_write_pages = 0;          // most distinct pages one forward writes
  std::int64_t max_context = 0;     // longest request
  std::int64_t max_step_pages = 0;  // bound on the page entries of one layer-step's query
  std::int64_t forwards = 0;
  std::int64_t requests = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t prefill_tokens = 0;
};

// One layer-step's query as the core sees it: write pages first, then rows x width page
// entries padded with kNoPage, plus what the cost model needs.
struct LayerQuery {
  std::span<const PageId> pages;
  int drops = 0;                     // distinct pages past the width (all rows)
  std::int64_t selected_tokens = 0;  // tokens the rows attend (sum over rows and tokens)
  // Tokens the rows' last positions attend (sum over rows): what the GPU trace replay reads,
  // one query per row.
  std::int64_t last_token_selected = 0;
  std::int64_t row_blocks = 0;  // visible indexer blocks scored (sum over tokens)
  // Host placement: prefill rows that read more than their request holds
  // (count x select width > cached tokens) stage the cached tokens through device windows.
  std::int64_t staged_cached_tokens = 0;
  std::int64_t staged_windows = 0;
  std::int64_t staged_selected_tokens = 0;
};

// The host-side bookkeeping every pass shares: request page tables (through the core's
// PageSpace), the write pages of a forward, and per-row compaction (the core's compact_row).
class FrontEnd {
 public:
  FrontEnd(const Geometry& g, PageId num_pages, std::int64_t staging_window_tokens = 131072);

  void begin(const traces::RequestBegin& b);
  // Closes the request; returns the pages freed (to release from every pool).
  std::vector<PageId> end(const traces::RequestEnd& e);
  // Grows the page tables of the forward's rows and collects its write pages.
  void prepare(const traces::Forward& f);
  int write_pages() const { return static_cast<int>(writes_.size()); }
  // The prepared forward's write pages, ascending (the head of every layer's query).
  std::span<const PageId> writes() const { return writes_; }
  // Most distinct pages a row of the prepared forward can touch (bounds select_width).
  std::int64_t max_row_pages() const { return max_row_pages_; }
  // Pages per row for the prepared forward: with a pool of `pool_slots` (mirror), the core's
  // select_width for its rows and write pages; without one (pool_slots <= 0), every page a
  // row can touch. Every backend that replays a trace takes its width from here.
  int row_width(int rows, std::int64_t pool_slots) const;
  std::int64_t tokens() const { return tokens_; }
  std::int64_t decode_tokens() const { return decode_tokens_; }
  // Compacts layer `layer` of the prepared forward at `width` pages per row.
  LayerQuery build(const traces::Forward& f, int layer, int width);
  // Tokens of a row's request cached before the row (prefill staging decisions).
  const Geometry& geometry() const { return g_; }
  std::span<const PageId> table(RequestId r) const { return space_.pages(r); }

 private:
  Geometry g_;
  PageSpace space_;
  std::vector<PageId> writes_;
  std::vector<PageId> query_;
  std::int64_t max_row_pages_ = 1;
  std::int64_t tokens_ = 0;
  std::int64_t decode_tokens_ = 0;
  std::int64_t window_;
  std::unordered_map<RequestId, std::int64_t> prompt_;  // prompt tokens of open requests
};

// Pre-pass: checks the trace against its header, sizes the page space, counts work.
// Throws ConfigError on a malformed trace (unknown request, selection of a wrong layer count).
// on_forward: forwards scanned, for progress.
TraceBounds scan_trace(const traces::TraceInput& input,
                       const std::function<void(std::int64_t)>& on_forward = {});

// Tokens one row of `count` tokens at `position` attends in total, at most `width` each.
std::int64_t row_selected_tokens(std::int64_t position, std::int64_t count, std::int64_t width);

}  // namespace kvtier::frontend
