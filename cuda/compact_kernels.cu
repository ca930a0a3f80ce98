// Selection compaction on the device: the core's compact_row in one thread per row, and a
// one-block-per-row data-parallel form with the same output.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/compact_row.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"
#include "model/compaction.hpp"

namespace kvtier::cuda {
namespace {

// ---------------------------------------------------------------------------------------
// Compaction

__global__ void compact_core_kernel(const __grid_constant__ CompactParams p) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= p.rows) return;
  compact_row_counted(p, r);
}

// One tile holds a decode row (a 512-block selection and its tail): one pass of loads per row.
constexpr int kCompactThreads = 1024;

struct MaxOp {
  __device__ long long operator()(long long a, long long b) const { return a > b ? a : b; }
};

// One block per row. Item i < n_blocks is block blocks[i] (position block * ratio, skipped
// when negative); item n_blocks is the causal tail's first position when the tail is not
// empty. With prev = the largest earlier position (exclusive max-scan; the input is
// ascending, so this is the previous valid position), an item starts a new page iff its
// page index differs from prev's; its output index is the exclusive sum of such starts.
// This is compact_row's result whenever every position is >= prev and inside the table;
// otherwise thread 0 reruns compact_row itself, so the output is always the core's.
__global__ void __launch_bounds__(kCompactThreads)
    compact_block_kernel(const __grid_constant__ CompactParams p) {
  using Scan64 = cub::BlockScan<long long, kCompactThreads>;
  using ScanInt = cub::BlockScan<int, kCompactThreads>;
  __shared__ union {
    typename Scan64::TempStorage s64;
    typename ScanInt::TempStorage sint;
  } tmp;
  __shared__ int s_bad;
  __shared__ long long s_last;
  const int r = blockIdx.x;
  const int tid = threadIdx.x;
  const std::int32_t* blocks = p.blocks + std::int64_t{r} * p.n_blocks;
  const PageId* table = p.tables + std::int64_t{r} * p.table_stride;
  const std::int64_t table_len = p.table_len[r];
  PageId* out = p.out + std::int64_t{r} * p.width;
  const TokenRange tail = causal_tail(p.pos[r], p.compress_ratio);
  const int n_blocks = p.tail_only != nullptr && p.tail_only[r] != 0 ? 0 : p.n_blocks;
  const int items = n_blocks + (tail.begin < tail.end ? 1 : 0);
  if (tid == 0) s_bad = 0;
  long long carry_pos = -1;  // largest position of earlier tiles
  int carry_count = 0;       // distinct pages of earlier tiles
  int local_bad = 0;
  for (int base = 0; base < items; base += kCompactThreads) {
    const int i = base + tid;
    long long pos = -1;
    if (i < n_blocks) {
      if (blocks[i] >= 0) pos = static_cast<long long>(blocks[i]) * p.compress_ratio;
    } else if (i < items) {
      pos = tail.begin;
    }
    long long prev = 0;
    __syncthreads();
    Scan64(tmp.s64).ExclusiveScan(pos, prev, MaxOp{});
    if (tid == 0) prev = -1;
    if (prev < carry_pos) prev = carry_pos;
    bool starts = false;
    long long index = -1;
    if (pos >= 0) {
      index = pos / p.page_size;
      if (pos < prev || index >= table_len) local_bad = 1;
      const long long prev_index = prev < 0 ? -1 : prev / p.page_size;
      starts = index != prev_index;
    }
    int rank = 0, tile_count = 0;
    __syncthreads();
    ScanInt(tmp.sint).ExclusiveSum(starts ? 1 : 0, rank, tile_count);
    const int k = carry_count + rank;
    if (starts && k < p.width && local_bad == 0) out[k] = table[index];
    carry_count += tile_count;
    // The tile's largest position: the last thread's inclusive max is max(prev, pos).
    if (tid == kCompactThreads - 1) s_last = pos > prev ? pos : prev;
    __syncthreads();
    carry_pos = s_last;
  }
  if (local_bad) atomicOr(&s_bad, 1);
  __syncthreads();
  if (s_bad) {
    if (tid == 0) compact_row_counted(p, r);
    return;
  }
  for (int k = carry_count + tid; k < p.width; k += kCompactThreads)
    out[k] = kNoPage;
  if (tid == 0 && carry_count > p.width) atomicAdd(p.dropped, carry_count - p.width);
}

}  // namespace

void launch_compact(const CompactParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return;
  compact_block_kernel<<<p.rows, kCompactThreads, 0, stream>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void launch_compact_core(const CompactParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return;
  compact_core_kernel<<<(p.rows + 127) / 128, 128, 0, stream>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}
}  // namespace kvtier::cuda
