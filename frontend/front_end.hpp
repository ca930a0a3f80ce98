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
  PageId peak_pages = 0;         // most logical pages open at once (the page space needed)
  int max_rows = 0;              // widest forward
  std::int64_t max_tokens = 0;   // most query tokens in one forward (its rows' counts)
  int max_write_pages = 0;       // most distinct pages one forward writes
  std::int64_t max_context = 0;  // longest request
  // Bound on one layer-step's query entries: write pages + rows x the widest row's selection
  // (a prefill row's union wider than that bypasses a mirror pool: FrontEnd::plan_rows), so
  // the smallest pool at which no row is truncated.
  std::int64_t max_step_pages = 0;
  std::int64_t forwards = 0;
  std::int64_t requests = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t prefill_tokens = 0;
};

// One row's share of a layer-step's figures below (LayerQuery sums them over rows): what the
// simulator needs to charge the link's bytes to the request that caused them.
struct RowTokens {
  std::int64_t selected = 0;
  std::int64_t last_token_selected = 0;
  std::int64_t staged_cached = 0;  // 0 unless the row stages its request's cache
  std::int64_t staged_selected = 0;
};

// One layer-step's query as the core sees it: write pages first, then rows x width page
// entries padded with kNoPage, plus what the cost model needs.
struct LayerQuery {
  std::span<const PageId> pages;
  std::int64_t page_entries = 0;     // entries of `pages` that are pages, not padding
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
  std::int64_t staged_window_rows = 0;  // sum over the windows of their request's rows
  std::int64_t staged_selected_tokens = 0;
  // Mirror: the rows that bypass the pool. Their share of `selected_tokens` and of
  // `last_token_selected`, and the tokens the model's rows read from the host bank (the
  // cached tokens where a row stages them through windows, else its selection).
  std::int64_t bypass_selected_tokens = 0;
  std::int64_t bypass_last_token_selected = 0;
  std::int64_t bypass_read_tokens = 0;
  std::span<const RowTokens> rows;  // [rows] the sums above, row by row
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
  // Most indexer blocks a token of the prepared forward sees (its last token's).
  std::int64_t max_row_blocks() const { return max_row_blocks_; }
  // Most tokens one row (one request) of the prepared forward has.
  std::int64_t max_row_tokens() const { return max_row_tokens_; }
  // Which rows of the prepared forward go through a pool of `pool_slots` (mirror), and the
  // pages per row of its query; every backend that replays a trace takes both from here.
  // Without a pool (pool_slots <= 0) the width is every page a row can touch. With one, it is
  // the core's select_width for the forward's rows and write pages; a prefill row that could
  // touch more pages than that (its chunk's union spans its context) bypasses the pool: its
  // pages are read where the host bank holds them, never admitted, so that the pool's size
  // follows the decode rows. Its query entries then hold only its causal tail, a page the
  // row writes (resident anyway), and the width is set again for the rows that remain.
  int plan_rows(std::int64_t pool_slots);
  // Per row of the prepared forward, after plan_rows: 1 where the row bypasses the pool.
  std::span<const std::uint8_t> bypass() const { return bypass_; }
  int bypassed_rows() const { return bypassed_; }
  std::int64_t tokens() const { return tokens_; }
  std::int64_t decode_tokens() const { return decode_tokens_; }
  // Every page a row of the prepared forward can touch: the width without a pool
  // (plan_rows(0)), and the widest any pool gives.
  int full_width() const;
  // Compacts layer `layer` of the prepared forward at `width` pages per row, the rows that
  // the last plan_rows says bypass the pool with their causal tail alone.
  LayerQuery build(const traces::Forward& f, int layer, int width) {
    return build(f, layer, width, bypass_);
  }
  // The same with the caller's flags ([rows], 1: the row bypasses the pool) in place of the
  // last plan_rows' (LayerQueryCache builds for several pools at once).
  LayerQuery build(const traces::Forward& f, int layer, int width,
                   std::span<const std::uint8_t> bypass);
  // Tokens of a row's request cached before the row (prefill staging decisions).
  const Geometry& geometry() const { return g_; }
  std::span<const PageId> table(RequestId r) const { return space_.pages(r); }

 private:
  Geometry g_;
  PageSpace space_;
  std::vector<PageId> writes_;
  std::vector<PageId> query_;
  std::vector<std::int64_t> row_pages_;  // per row: most distinct pages it can touch
  std::vector<traces::RowKind> row_kind_;
  std::vector<std::uint8_t> bypass_;  // per row: 1 when it bypasses the pool
  int bypassed_ = 0;
  std::vector<RowTokens> row_tokens_;
  std::int64_t max_row_pages_ = 1;
  std::int64_t max_row_blocks_ = 0;
  std::int64_t max_row_tokens_ = 0;
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

// Adds a row that bypasses the pool to the query's bypass_* figures: all it attends
// (`rt`, its RowTokens) is read from the host bank. The one rule for FrontEnd::build and
// LayerQueryCache.
void add_bypassed_row(LayerQuery& q, const RowTokens& rt, traces::RowKind kind);

// Tokens one row of `count` tokens at `position` attends in total, at most `width` each.
std::int64_t row_selected_tokens(std::int64_t position, std::int64_t count, std::int64_t width);

}  // namespace kvtier::frontend
