#include "cuda/replay_stage.hpp"

#include <algorithm>
#include <climits>

#include "model/compaction.hpp"

namespace kvtier::cuda {

void stage_forward(const Geometry& g, const frontend::FrontEnd& fe, const traces::Forward& f,
                   int width, StagedForward& sf) {
  const int L = g.qsa_layers();
  const int rows = static_cast<int>(f.rows.size());
  sf.rows = rows;
  sf.width = width;
  sf.stride = 1;
  for (const auto& row : f.rows)
    sf.stride = std::max(sf.stride, static_cast<int>(fe.table(row.request).size()));
  sf.blocks_per_row = 0;
  for (int l = 0; l < L; ++l)
    for (int r = 0; r < rows; ++r)
      sf.blocks_per_row = std::max(sf.blocks_per_row, static_cast<int>(f.selection(l, r).size()));
  const int stride = sf.stride, nb = sf.blocks_per_row;
  sf.tables.assign(static_cast<std::size_t>(rows) * stride, kNoPage);
  sf.table_len.assign(static_cast<std::size_t>(rows), 0);
  sf.row_last_pos.assign(static_cast<std::size_t>(rows), 0);
  sf.blocks.assign(static_cast<std::size_t>(L) * rows * nb, -1);
  sf.store_pos.clear();
  sf.store_pages.clear();
  sf.store_tokens.clear();
  sf.store_req.clear();
  const auto bypass = fe.bypass();
  sf.bypassed_rows = fe.bypassed_rows();
  sf.in_place_entries.assign(static_cast<std::size_t>(rows), 0);
  for (int r = 0; r < rows; ++r) {
    const auto& row = f.rows[static_cast<std::size_t>(r)];
    const auto t = fe.table(row.request);
    if (bypass[static_cast<std::size_t>(r)] != 0) {
      sf.in_place_entries[static_cast<std::size_t>(r)] =
          static_cast<std::int32_t>(row.position / g.page_size);
    }
    std::copy(t.begin(), t.end(), sf.tables.begin() + std::int64_t{r} * stride);
    sf.table_len[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(t.size());
    sf.row_last_pos[static_cast<std::size_t>(r)] = row.position + row.count - 1;
    for (std::int64_t p = row.position; p < row.position + row.count; ++p) {
      sf.store_pos.push_back(p);
      sf.store_pages.push_back(t[static_cast<std::size_t>(p / g.page_size)]);
      sf.store_tokens.push_back(static_cast<std::int32_t>(p % g.page_size));
      sf.store_req.push_back(r);  // each row has its own table row
    }
    for (int l = 0; l < L && bypass[static_cast<std::size_t>(r)] == 0; ++l) {
      const auto sel = f.selection(l, r);
      std::copy(sel.begin(), sel.end(), sf.blocks.begin() + (std::int64_t{l} * rows + r) * nb);
    }
  }
  // Read positions in compaction's order: blocks ascending, then the causal tail; a row stops
  // at its width-th distinct page (the pages past it are the drops).
  sf.max_tokens = 1;
  sf.selected_tokens = 0;
  sf.read_positions.resize(static_cast<std::size_t>(L) * rows);
  for (int l = 0; l < L; ++l) {
    for (int r = 0; r < rows; ++r) {
      auto& v = sf.read_positions[static_cast<std::size_t>(l) * rows + r];
      v.clear();
      const std::int64_t last = sf.row_last_pos[static_cast<std::size_t>(r)];
      const TokenRange tail = causal_tail(last, g.compress_ratio);
      std::int64_t prev_page = -1;
      int pages_kept = 0;
      // a row that bypasses the pool reads its whole selection (no width truncates it)
      const int row_width = bypass[static_cast<std::size_t>(r)] != 0 ? INT32_MAX : width;
      auto add = [&](std::int64_t p) {
        const std::int64_t pg = p / g.page_size;
        if (pg != prev_page) {
          if (pages_kept == row_width) return false;
          ++pages_kept;
          prev_page = pg;
        }
        v.push_back(p);
        return true;
      };
      bool open = true;
      for (std::int32_t b : f.selection(l, r)) {
        for (int i = 0; open && i < g.compress_ratio; ++i) {
          const std::int64_t p = std::int64_t{b} * g.compress_ratio + i;
          if (p > last || p >= tail.begin) break;
          open = add(p);
        }
      }
      for (std::int64_t p = tail.begin; open && p < tail.end && p <= last; ++p)
        open = add(p);
      sf.max_tokens = std::max(sf.max_tokens, static_cast<int>(v.size()));
      sf.selected_tokens += static_cast<std::int64_t>(v.size());
    }
  }
  sf.writes = fe.write_pages();
  sf.query_len = sf.writes + rows * width;
  // the write pages head every layer's query (as FrontEnd::build puts them)
  const auto wp = fe.writes();
  sf.layer_queries.assign(static_cast<std::size_t>(L) * sf.query_len, kNoPage);
  for (int l = 0; l < L; ++l)
    std::copy(wp.begin(), wp.end(), sf.layer_queries.begin() + std::int64_t{l} * sf.query_len);
}

}  // namespace kvtier::cuda
