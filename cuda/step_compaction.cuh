#pragma once
// The residency step's compaction of its rows into the query (residency_step.cu), by the leading
// block's 32 warps: one warp a row (compact_row_in_warp), or, for up to 8 rows of up to 639
// blocks, a group of 4 warps a row (compact_rows_in_groups). Both give the core's
// compact_row output; rows they cannot prove sorted and in range are redone by compact_row.
#include <cstdint>

#include "cuda/compact_row.cuh"
#include "cuda/kernels.hpp"
#include "model/compaction.hpp"
#include "model/cost_model.hpp"

namespace kvtier::cuda::step_compaction {

// Items a lane holds per pass of a row: 32 x 17 = 544 covers a decode row (512 chosen blocks
// and the tail) in one pass, so the row's loads are all in flight together.
constexpr int kLaneItems = 17;
constexpr std::int32_t kNoItem = -1;
constexpr unsigned kAll = 0xffffffffu;

// What a warp needs of its row: the items (chosen blocks, then the causal tail's first block)
// and how a block maps to its page.
struct RowItems {
  const std::int32_t* blocks;
  const PageId* table;
  std::int64_t table_len;
  PageId* out;
  std::int32_t tail_block;
  int n_blocks, items, page_shift, blocks_per_page;
  bool bad;  // a tail beyond int32, or pages of partial blocks: the core's row

  __device__ RowItems(const CompactParams& p, int r) {
    blocks = p.blocks + std::int64_t{r} * p.n_blocks;
    table = p.tables + std::int64_t{r} * p.table_stride;
    table_len = p.table_len[r];
    out = p.out + std::int64_t{r} * p.width;
    const TokenRange tail = causal_tail(p.pos[r], p.compress_ratio);
    const std::int64_t tb = tail.begin / p.compress_ratio;
    const bool has_tail = tail.begin < tail.end;
    n_blocks = p.tail_only != nullptr && p.tail_only[r] != 0 ? 0 : p.n_blocks;
    items = n_blocks + (has_tail ? 1 : 0);
    blocks_per_page = p.page_size / p.compress_ratio;
    // A page's blocks are a power of two in every geometry kvtier ships: a shift, not a
    // division (a warp's compaction is bound by its instructions, not its loads: the shift
    // took 1.5 us off a row's 8, bench/results/residency-step-h200-2026-12-02.md).
    page_shift = __popc(blocks_per_page) == 1 ? __ffs(blocks_per_page) - 1 : -1;
    bad = (has_tail && tb > INT32_MAX) || p.page_size % p.compress_ratio != 0;
    tail_block = bad ? 0 : static_cast<std::int32_t>(tb);
  }
  __device__ std::int32_t page_of(std::int32_t block) const {
    return page_shift >= 0 ? block >> page_shift : block / blocks_per_page;
  }
  __device__ std::int32_t item(int i) const {
    if (i < n_blocks) return blocks[i] >= 0 ? blocks[i] : kNoItem;
    return i < items ? tail_block : kNoItem;
  }
};

__device__ inline std::int32_t warp_inclusive_max(std::int32_t v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const std::int32_t u = __shfl_up_sync(kAll, v, d);
    if (lane >= d) v = u > v ? u : v;
  }
  return v;
}

// From a warp's inclusive max-scan: the largest value of the lanes before this one (kNoItem at
// lane 0).
__device__ inline std::int32_t warp_max_before(std::int32_t incl_max, int lane) {
  const std::int32_t v = __shfl_up_sync(kAll, incl_max, 1);
  return lane == 0 ? kNoItem : v;
}

__device__ inline int warp_inclusive_sum(int v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int u = __shfl_up_sync(kAll, v, d);
    if (lane >= d) v += u;
  }
  return v;
}

// A lane's page starts, a bit per item: an item starts a page iff its page differs from that of
// the largest item before it (`prev`: of the earlier lanes and passes, kNoItem if none). Sets
// `bad` for an item below that largest one (the row is unsorted) or beyond the table.
template <int kN>
__device__ unsigned page_starts(const RowItems& row, const std::int32_t (&item)[kN],
                                std::int32_t prev, bool& bad) {
  unsigned start_bits = 0;
  std::int32_t q = prev;
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (item[k] == kNoItem) continue;
    const std::int32_t index = row.page_of(item[k]);
    if (item[k] < q || index >= row.table_len) bad = true;
    if (q == kNoItem || index != row.page_of(q)) start_bits |= 1u << k;
    q = item[k] > q ? item[k] : q;
  }
  return start_bits;
}

// One row's compaction by one warp, with compact_row's output. A row's items are its chosen
// blocks, then the causal tail's first block (tail.begin is a multiple of the ratio), each
// lane holding kLaneItems consecutive items. Positions are block x ratio and a page holds
// page_size / ratio whole blocks, so order and page index follow from block ids alone (int32:
// fewer registers). With prev = the largest earlier block (a max-scan over lanes), an item
// starts a page iff its page index differs from prev's, and its output index is the number
// of earlier starts. That is compact_row's result whenever no block goes backwards and all
// lie inside the table; otherwise lane 0 reruns compact_row itself.
__device__ inline void compact_row_in_warp(const CompactParams& p, int r, int lane) {
  const RowItems row(p, r);
  bool bad = row.bad;
  std::int32_t carry_block = kNoItem;  // the largest block of earlier passes
  int carry_count = 0;                 // pages started in earlier passes
  // The first pass does not wait for the row's position (its blocks' loads go out at once);
  // the checks below stop it before any write when the row is bad.
  for (int base = 0; base == 0 || (base < row.items && !__any_sync(kAll, bad));
       base += 32 * kLaneItems) {
    const int first = base + lane * kLaneItems;
    std::int32_t item[kLaneItems];
    std::int32_t lane_max = kNoItem;
#pragma unroll
    for (int k = 0; k < kLaneItems; ++k) {
      item[k] = row.item(first + k);
      lane_max = item[k] > lane_max ? item[k] : lane_max;
    }
    const std::int32_t incl_max = warp_inclusive_max(lane_max, lane);
    std::int32_t prev = warp_max_before(incl_max, lane);
    if (prev < carry_block) prev = carry_block;
    // this lane's page starts (a bit per item), and the order and range checks
    const unsigned start_bits = page_starts<kLaneItems>(row, item, prev, bad);
    if (__any_sync(kAll, bad)) break;
    const int starts = __popc(start_bits);
    const int incl = warp_inclusive_sum(starts, lane);
    // The table loads of all starts first (in place of their items), then the stores: one
    // round trip per pass, not one per page.
#pragma unroll
    for (int k = 0; k < kLaneItems; ++k)
      if (start_bits & (1u << k)) item[k] = row.table[row.page_of(item[k])];
    int k_out = carry_count + incl - starts;
#pragma unroll
    for (int k = 0; k < kLaneItems; ++k) {
      if (!(start_bits & (1u << k))) continue;
      if (k_out < p.width) row.out[k_out] = item[k];
      ++k_out;
    }
    carry_count += __shfl_sync(kAll, incl, 31);
    const std::int32_t pass_max = __shfl_sync(kAll, incl_max, 31);
    carry_block = pass_max > carry_block ? pass_max : carry_block;
  }
  if (__any_sync(kAll, bad)) {
    if (lane == 0) compact_row_counted(p, r);
    return;
  }
  for (int k = carry_count + lane; k < p.width; k += 32)
    row.out[k] = kNoPage;
  if (lane == 0 && carry_count > p.width) atomicAdd(p.dropped, carry_count - p.width);
}

// A group's chunk as its warp leaves it for the row's other warps: its first item, its largest
// item, its page starts counted from the chunk's own first item, and whether it saw an item
// out of order or beyond the table.
struct ChunkSummary {
  std::int32_t first, max;
  int starts, bad;
};

// The rows' compaction by groups of `group` warps a row (rows x group <= 32), each warp over a
// chunk of 32 x kItems consecutive items of its row (the row's items fit its group's chunks):
// fewer instructions a warp than one warp a row, which is what a row's compaction waits on.
// Each warp finds its chunk's page starts as if the chunk began the row and loads their table
// entries; after a barrier of the whole block (every thread calls this), each warp reads its
// row's chunk summaries: a chunk's first item starts no page when it shares a page with the
// largest item of the chunks before it, and a first item below that largest item makes the row
// unsorted (the core's row, as is any chunk's bad item). Then the warp writes its starts at
// their row offsets, and its share of the padding.
template <int kItems>
__device__ void compact_rows_in_groups(const CompactParams& p, int group, ChunkSummary* chunks) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int r = warp / group, w = warp % group;
  const bool active = r < p.rows;
  std::int32_t item[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k)
    item[k] = kNoItem;
  unsigned start_bits = 0;
  int excl = 0;  // the warp's page starts in lanes before this one
  if (active) {
    const RowItems row(p, r);
    const int first = w * 32 * kItems + lane * kItems;
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      item[k] = row.item(first + k);
    std::int32_t lane_max = kNoItem, lane_first = kNoItem;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      lane_max = item[k] > lane_max ? item[k] : lane_max;
      if (lane_first == kNoItem) lane_first = item[k];
    }
    const std::int32_t incl_max = warp_inclusive_max(lane_max, lane);
    bool bad = row.bad;
    start_bits = page_starts<kItems>(row, item, warp_max_before(incl_max, lane), bad);
    const int starts = __popc(start_bits);
    const int incl = warp_inclusive_sum(starts, lane);
    excl = incl - starts;
    const unsigned with_items = __ballot_sync(kAll, lane_first != kNoItem);
    const std::int32_t chunk_first =
        with_items != 0 ? __shfl_sync(kAll, lane_first, __ffs(with_items) - 1) : kNoItem;
    const bool chunk_bad = __any_sync(kAll, bad);
    // the starts' table entries in place of their items (in range: a bad row writes nothing)
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      if ((start_bits & (1u << k)) && !bad) item[k] = row.table[row.page_of(item[k])];
    const std::int32_t chunk_max = __shfl_sync(kAll, incl_max, 31);
    const int chunk_starts = __shfl_sync(kAll, incl, 31);
    if (lane == 0) chunks[warp] = {chunk_first, chunk_max, chunk_starts, chunk_bad ? 1 : 0};
  }
  __syncthreads();  // every chunk's summary is in shared memory
  if (!active) return;
  const RowItems row(p, r);  // again, rather than held across the barrier beside the items
  // Lane j < group: chunk j of the row, with the largest item of the chunks before it.
  ChunkSummary c{kNoItem, kNoItem, 0, 0};
  if (lane < group) c = chunks[r * group + lane];
  const std::int32_t before = warp_max_before(warp_inclusive_max(c.max, lane), lane);
  const bool joined = c.first != kNoItem && before != kNoItem &&
                      row.page_of(c.first) == row.page_of(before);  // no start at its first item
  const bool row_bad = __any_sync(kAll, c.bad != 0 || (c.first != kNoItem && c.first < before));
  if (row_bad) {
    if (w == 0 && lane == 0) compact_row_counted(p, r);
    return;
  }
  const int adjusted = c.starts - (joined ? 1 : 0);
  const int incl_adj = warp_inclusive_sum(adjusted, lane);
  const int offset = w > 0 ? __shfl_sync(kAll, incl_adj, w - 1) : 0;
  const int total = __shfl_sync(kAll, incl_adj, group - 1);
  const bool my_joined = __shfl_sync(kAll, joined ? 1 : 0, w) != 0;
  // This chunk's first start (at the lowest lane with starts) is dropped when it joins the
  // chunks before; every later start moves down one.
  const unsigned lanes_with = __ballot_sync(kAll, start_bits != 0);
  const int first_lane = lanes_with != 0 ? __ffs(lanes_with) - 1 : 32;
  if (my_joined && lane == first_lane) start_bits &= start_bits - 1;
  int k_out = offset + excl - (my_joined && lane > first_lane ? 1 : 0);
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (!(start_bits & (1u << k))) continue;
    if (k_out < p.width) row.out[k_out] = item[k];
    ++k_out;
  }
  for (int k = total + w * 32 + lane; k < p.width; k += group * 32)
    row.out[k] = kNoPage;
  if (w == 0 && lane == 0 && total > p.width) atomicAdd(p.dropped, total - p.width);
}

// Every thread of the leading block: the rows' compaction into the query, by groups of warps
// where the rows are few and short enough, else one warp a row.
__device__ inline void compact_rows(const CompactParams& p, ChunkSummary* chunks) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int longest = p.n_blocks + 1;  // a row's items at most
  // Four warps of five items a lane hold a decode row (513 items); more forms (2 or 8 warps a
  // row) made the kernel spill registers it holds across the ensure. Groups of 4 warps take
  // the block's 32 warps at kStepGroupedRows rows: the cost model prices the step beside with a
  // piece up to that many rows and one past it.
  static_assert(kStepGroupedRows * 4 == 32);
  if (p.rows <= kStepGroupedRows && longest <= 4 * 32 * 5) {
    compact_rows_in_groups<5>(p, 4, chunks);
  } else {
    for (int r = warp; r < p.rows; r += static_cast<int>(blockDim.x >> 5))
      compact_row_in_warp(p, r, lane);
  }
}

}  // namespace kvtier::cuda::step_compaction
