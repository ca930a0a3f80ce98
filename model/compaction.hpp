#pragma once
#include <cstdint>

#include "model/hd.hpp"
#include "model/page_space.hpp"

namespace kvtier {

enum class CompactStatus : std::uint8_t {
  ok,
  unsorted,      // selected positions went backwards; the row's output is incomplete
  out_of_range,  // a position lies beyond the request's page table
};

// Tokens [begin, end) of the open group a row at `pos` attends besides its chosen blocks:
// the positions after the last complete group up to and including pos (0 to ratio-1 tokens).
struct TokenRange {
  std::int64_t begin;
  std::int64_t end;
};
KVT_HD inline TokenRange causal_tail(std::int64_t pos, int compress_ratio) {
  return {((pos + 1) / compress_ratio) * compress_ratio, pos + 1};
}

// Accumulates one row's distinct logical pages into a fixed-width list. Positions must come
// in non-decreasing order, so distinct pages are consecutive and one comparison dedupes.
// Pages past the width are not written but counted in `dropped`: never silently lost.
struct RowPages {
  PageId* out;  // [width]
  int width;
  const PageId* table;  // the request's page table: entry i holds page i's logical page
  std::int64_t table_len;
  int page_size;
  int count = 0;
  int dropped = 0;
  std::int64_t last_index = -1;
  std::int64_t last_pos = -1;
  CompactStatus status = CompactStatus::ok;

  KVT_HD bool add_position(std::int64_t pos) {
    if (status != CompactStatus::ok) return false;
    if (pos < last_pos) {
      status = CompactStatus::unsorted;
      return false;
    }
    last_pos = pos;
    const std::int64_t index = pos / page_size;
    if (index >= table_len) {
      status = CompactStatus::out_of_range;
      return false;
    }
    if (index == last_index) return true;
    last_index = index;
    if (count < width) {
      out[count++] = table[index];
    } else {
      ++dropped;
    }
    return true;
  }

  // Pads the list to the width with kNoPage.
  KVT_HD void finish() {
    for (int i = count; i < width; ++i)
      out[i] = kNoPage;
  }
};

struct RowCompaction {
  int pages;    // distinct pages written (<= width)
  int dropped;  // distinct pages beyond the width
  CompactStatus status;
};

// One row: its chosen blocks (ascending, kNoPage-style -1 padding skipped) expanded to
// positions block*ratio .. block*ratio+ratio-1, then the causal tail of `pos`.
KVT_HD inline RowCompaction compact_row(const std::int32_t* blocks, int n_blocks, std::int64_t pos,
                                        int compress_ratio, int page_size, const PageId* table,
                                        std::int64_t table_len, int width, PageId* out) {
  RowPages acc{out, width, table, table_len, page_size};
  // All of a block lies in one page (page_size is a multiple of the ratio), so its first
  // position stands for it.
  for (int i = 0; i < n_blocks; ++i) {
    if (blocks[i] < 0) continue;
    acc.add_position(std::int64_t{blocks[i]} * compress_ratio);
  }
  const TokenRange tail = causal_tail(pos, compress_ratio);
  if (tail.begin < tail.end) acc.add_position(tail.begin);
  acc.finish();
  return {acc.count, acc.dropped, acc.status};
}

}  // namespace kvtier
