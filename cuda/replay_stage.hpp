#pragma once
// One trace forward laid out for the replay's device arrays: the rows' page tables, their
// chosen blocks per layer, one store entry per new token, the positions each row reads, and
// every layer's residency query head (the write pages). Host-side only; the replay uploads it.
#include <cstdint>
#include <vector>

#include "frontend/front_end.hpp"
#include "model/geometry.hpp"
#include "model/page_space.hpp"
#include "traces/trace_record.hpp"

namespace kvtier::cuda {

struct StagedForward {
  int rows = 0;
  int width = 0;                        // pages a row keeps (the simulator's select width)
  int stride = 1;                       // entries per table row: the longest table of the forward
  int blocks_per_row = 0;               // blocks per (layer, row) entry: the widest selection
  int max_tokens = 1;                   // the most positions one (layer, row) reads
  int writes = 0;                       // distinct pages the forward writes
  int query_len = 0;                    // residency query entries per layer: writes + rows * width
  std::vector<PageId> tables;           // [rows][stride], kNoPage padded
  std::vector<std::int64_t> table_len;  // [rows]
  std::vector<std::int64_t> row_last_pos;  // [rows]: the row's last position
  std::vector<std::int32_t> blocks;        // [layers][rows][blocks_per_row], -1 padded
  // one entry per stored token: position, page, token in the page, row
  std::vector<std::int64_t> store_pos;
  std::vector<PageId> store_pages;
  std::vector<std::int32_t> store_tokens;
  std::vector<std::int32_t> store_req;
  // [layers * rows]: the tokens of the chosen blocks and the causal tail of the row's last
  // token, on the first `width` distinct pages (what compaction keeps), ascending
  std::vector<std::vector<std::int64_t>> read_positions;
  std::vector<PageId> layer_queries;  // [layers][query_len]: the write pages first, kNoPage after
  std::int64_t selected_tokens = 0;
  // Mirror, per row: the table entries read from the host bank in place whatever the pool
  // holds: a row that bypasses the pool (FrontEnd::plan_rows) reads every page before the
  // first one it writes there (the pages it writes head the query, so they are resident);
  // 0 for the pool's rows. Its blocks are staged as none (-1): compaction queries its tail.
  std::vector<std::int32_t> in_place_entries;
  int bypassed_rows = 0;

  int n_store() const { return static_cast<int>(store_pos.size()); }
};

// Stages forward `f` after fe.prepare(f). Reuses sf's storage.
void stage_forward(const Geometry& g, const frontend::FrontEnd& fe, const traces::Forward& f,
                   int width, StagedForward& sf);

}  // namespace kvtier::cuda
