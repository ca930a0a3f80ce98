// Ensure on the device: the core's ensure_pages in one thread, a one-block data-parallel
// form and a multi-block form, all with the core's decisions (tests/cuda/test_ensure_forms).
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <climits>
#include <stdexcept>

#include "cuda/cuda_check.hpp"
#include "cuda/ensure_block.cuh"
#include "cuda/kernels.hpp"
#include "model/victims_scan.hpp"

namespace kvtier::cuda {
namespace {

using namespace ensure_block;

// ---------------------------------------------------------------------------------------
// Ensure, the core's code in one thread.

__global__ void ensure_core_kernel(const __grid_constant__ EnsureParams p) {
  ScanVictims victims;
  const EnsureResult r =
      ensure_pages(p.st, p.query, p.n, *p.step, victims,
                   EnsureScratch{p.miss_pages, p.victims, nullptr}, p.copies, AdmitAll{});
  if (r.status == EnsureStatus::ok) {
    finish_ok(p, r);
  } else {
    finish_failed(p, r);
  }
}

// ---------------------------------------------------------------------------------------
// Ensure, one block (cuda/ensure_block.cuh).
__global__ void __launch_bounds__(kEnsureThreads)
    ensure_block_kernel(const __grid_constant__ EnsureParams p) {
  ensure_in_one_block(p);
}

// ---------------------------------------------------------------------------------------
// Ensure, multi-block. Same decisions as the core (tests/cuda/test_ensure_forms.cpp):
//  mark (one block): steps 1-3 of the one-block form (range check, hits, ascending misses);
//  chunk (one block per kMultiChunk slots): a stable block radix sort of the chunk by
//    last_use (non-evictable slots last) over the bits the chunk's range needs; the items
//    enter in slot order, so ties stay in slot order: the first min(m, evictable) items are
//    the chunk's best candidates in (last_use, slot) order;
//  merge (one block): the candidates of all chunks, in chunk order (so ties stay in slot
//    order), are stably sorted by last_use; the first m are the core's victims in its order.
//    More than kMergeCapacity candidates: the core's ScanVictims in one thread.
constexpr int kChunkThreads = 1024;
constexpr int kChunkItems = kMultiChunk / kChunkThreads;  // 4
constexpr int kMergeThreads = 1024;
constexpr int kMergeItems = 4;
constexpr int kMergeCapacity = kMergeThreads * kMergeItems;

struct MinU64 {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a < b ? a : b;
  }
};
struct MaxU64 {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a > b ? a : b;
  }
};

__device__ int bit_width_u64(unsigned long long v) {
  return v == 0 ? 0 : 64 - __clzll(v);
}

__global__ void __launch_bounds__(kEnsureThreads)
    ensure_mark_kernel(const __grid_constant__ EnsureParams p, MultiBlockScratch ms) {
  __shared__ int s_bad, s_lookups, s_hits, s_m;
  const int tid = threadIdx.x;
  const std::int64_t step = *p.step;
  const ResidencyView st = p.st;
  if (tid == 0) {
    s_bad = INT_MAX;
    s_lookups = s_hits = s_m = 0;
  }
  __syncthreads();
  record_first_bad_query(p, st, s_bad);
  __syncthreads();
  if (s_bad != INT_MAX) {
    if (tid == 0) {
      finish_out_of_range(p, s_bad);
      ms.shared[0] = 0;
      ms.shared[1] = 1;
    }
    return;
  }
  mark_hits_and_collect_misses(p, st, step, s_lookups, s_hits, s_m);
  __syncthreads();
  const int m = s_m;
  sort_misses_ascending(p, m);
  if (tid == 0) {
    ms.shared[0] = m;
    ms.shared[1] = 0;
    ms.shared[2] = s_lookups;
    ms.shared[3] = s_hits;
  }
}

__global__ void __launch_bounds__(kChunkThreads)
    ensure_chunk_kernel(const __grid_constant__ EnsureParams p, MultiBlockScratch ms) {
  using Sort = cub::BlockRadixSort<unsigned long long, kChunkThreads, kChunkItems, SlotId>;
  using Reduce = cub::BlockReduce<unsigned long long, kChunkThreads>;
  using ReduceInt = cub::BlockReduce<int, kChunkThreads>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Reduce::TempStorage reduce;
    typename ReduceInt::TempStorage reduce_int;
  } tmp;
  __shared__ unsigned long long s_min, s_max;
  __shared__ int s_evictable;
  const int m = ms.shared[0];
  if (ms.shared[1] != 0 || m == 0) return;
  const std::int64_t step = *p.step;
  const ResidencyView st = p.st;
  const int tid = threadIdx.x;
  const SlotId base = static_cast<SlotId>(std::int64_t{blockIdx.x} * kMultiChunk);
  unsigned long long key[kChunkItems];
  SlotId slot[kChunkItems];
  bool ev[kChunkItems];
  unsigned long long kmin = ~0ull, kmax = 0;
  int evictable = 0;
#pragma unroll
  for (int i = 0; i < kChunkItems; ++i) {
    const SlotId s = base + tid * kChunkItems + i;  // blocked: slot order = rank order
    slot[i] = s;
    ev[i] = false;
    key[i] = 0;
    if (s < st.num_slots) {
      const std::int64_t u = st.last_use[s];
      if (u < step) {
        ev[i] = true;
        key[i] = static_cast<unsigned long long>(u - kFreeSlotStep);
        kmin = key[i] < kmin ? key[i] : kmin;
        kmax = key[i] > kmax ? key[i] : kmax;
        ++evictable;
      }
    }
  }
  const unsigned long long bmin = Reduce(tmp.reduce).Reduce(kmin, MinU64{});
  if (tid == 0) s_min = bmin;
  __syncthreads();
  const unsigned long long bmax = Reduce(tmp.reduce).Reduce(kmax, MaxU64{});
  if (tid == 0) s_max = bmax;
  __syncthreads();
  const int bev = ReduceInt(tmp.reduce_int).Sum(evictable);
  if (tid == 0) s_evictable = bev;
  __syncthreads();
  const int chunk_ev = s_evictable;
  const int keep = chunk_ev < m ? chunk_ev : m;
  if (tid == 0) {
    ms.chunk_evictable[blockIdx.x] = chunk_ev;
    ms.chunk_counts[blockIdx.x] = keep;
  }
  if (keep == 0) return;  // uniform across the block
  const unsigned long long range = s_max - s_min;
  const int bits = bit_width_u64(range + 1);  // non-evictable items take key range + 1
#pragma unroll
  for (int i = 0; i < kChunkItems; ++i)
    key[i] = ev[i] ? key[i] - s_min : range + 1;
  __syncthreads();
  Sort(tmp.sort).Sort(key, slot, 0, bits > 0 ? bits : 1);
#pragma unroll
  for (int i = 0; i < kChunkItems; ++i) {
    const int rank = tid * kChunkItems + i;
    if (rank < keep) ms.candidates[std::int64_t{blockIdx.x} * kMultiChunk + rank] = slot[i];
  }
}

__global__ void __launch_bounds__(kMergeThreads)
    ensure_merge_kernel(const __grid_constant__ EnsureParams p, MultiBlockScratch ms, int chunks) {
  using Sort = cub::BlockRadixSort<unsigned long long, kMergeThreads, kMergeItems, SlotId>;
  using Reduce = cub::BlockReduce<unsigned long long, kMergeThreads>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ int s_total, s_evictable, s_evictions;
  __shared__ unsigned long long s_min, s_max;
  if (ms.shared[1] != 0) return;  // range error: the mark kernel reported it
  const int tid = threadIdx.x;
  const int m = ms.shared[0];
  const std::int64_t step = *p.step;
  const ResidencyView st = p.st;
  if (tid == 0) {
    int total = 0, evictable = 0;
    for (int c = 0; c < chunks; ++c) {
      ms.chunk_offsets[c] = total;
      total += m > 0 ? ms.chunk_counts[c] : 0;
      evictable += m > 0 ? ms.chunk_evictable[c] : 0;
    }
    ms.chunk_offsets[chunks] = total;
    s_total = total;
    s_evictable = evictable;
    s_evictions = 0;
  }
  __syncthreads();
  if (m > 0 && s_evictable < m) {
    for (int i = tid; i < m; i += kMergeThreads)
      st.slot_of_page[p.miss_pages[i]] = kNoSlot;
    if (tid == 0) {
      EnsureResult r;
      r.status = EnsureStatus::pool_too_small;
      r.lookups = ms.shared[2];
      r.hits = ms.shared[3];
      r.misses = m;
      r.evictable = s_evictable;
      finish_failed(p, r);
    }
    return;
  }
  const int total = s_total;
  if (m > 0 && total <= kMergeCapacity) {
    unsigned long long key[kMergeItems];
    SlotId slot[kMergeItems];
    unsigned long long kmin = ~0ull, kmax = 0;
#pragma unroll
    for (int i = 0; i < kMergeItems; ++i) {
      const int j = tid * kMergeItems + i;
      slot[i] = kNoSlot;
      key[i] = 0;
      if (j < total) {
        int lo = 0, hi = chunks - 1;  // the chunk c with offsets[c] <= j < offsets[c + 1]
        while (lo < hi) {
          const int mid = (lo + hi + 1) / 2;
          if (ms.chunk_offsets[mid] <= j) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        slot[i] = ms.candidates[std::int64_t{lo} * kMultiChunk + (j - ms.chunk_offsets[lo])];
        key[i] = static_cast<unsigned long long>(st.last_use[slot[i]] - kFreeSlotStep);
        kmin = key[i] < kmin ? key[i] : kmin;
        kmax = key[i] > kmax ? key[i] : kmax;
      }
    }
    const unsigned long long bmin = Reduce(tmp.reduce).Reduce(kmin, MinU64{});
    if (tid == 0) s_min = bmin;
    __syncthreads();
    const unsigned long long bmax = Reduce(tmp.reduce).Reduce(kmax, MaxU64{});
    if (tid == 0) s_max = bmax;
    __syncthreads();
    const unsigned long long range = s_max - s_min;
    const int bits = bit_width_u64(range + 1);
#pragma unroll
    for (int i = 0; i < kMergeItems; ++i)
      key[i] = slot[i] != kNoSlot ? key[i] - s_min : range + 1;
    __syncthreads();
    Sort(tmp.sort).Sort(key, slot, 0, bits > 0 ? bits : 1);
#pragma unroll
    for (int i = 0; i < kMergeItems; ++i) {
      const int rank = tid * kMergeItems + i;
      if (rank < m) p.victims[rank] = slot[i];
    }
  } else if (m > 0) {
    if (tid == 0) {
      ScanVictims finder;
      finder.select(st, step, m, p.victims);
    }
  }
  __syncthreads();
  const int evictions = install_misses(p, st, step, m);
  if (evictions) atomicAdd(&s_evictions, evictions);
  __syncthreads();
  if (tid == 0) {
    EnsureResult r;
    r.lookups = ms.shared[2];
    r.hits = ms.shared[3];
    r.misses = m;
    r.evictions = s_evictions;
    finish_ok(p, r);
  }
}

}  // namespace

void launch_ensure(const EnsureParams& p, EnsureForm form, cudaStream_t stream) {
  if (form == EnsureForm::core_thread) {
    ensure_core_kernel<<<1, 1, 0, stream>>>(p);
  } else if (form == EnsureForm::multi_block) {
    throw std::invalid_argument("launch_ensure: the multi-block form needs launch_ensure_multi");
  } else {
    ensure_block_kernel<<<1, kEnsureThreads, 0, stream>>>(p);
  }
  KVT_CUDA_CHECK(cudaGetLastError());
}

void launch_ensure_multi(const EnsureParams& p, const MultiBlockScratch& s, cudaStream_t stream) {
  const int chunks = multi_block_chunks(p.st.num_slots);
  ensure_mark_kernel<<<1, kEnsureThreads, 0, stream>>>(p, s);
  KVT_CUDA_CHECK(cudaGetLastError());
  ensure_chunk_kernel<<<chunks, kChunkThreads, 0, stream>>>(p, s);
  KVT_CUDA_CHECK(cudaGetLastError());
  ensure_merge_kernel<<<1, kMergeThreads, 0, stream>>>(p, s, chunks);
  KVT_CUDA_CHECK(cudaGetLastError());
}
}  // namespace kvtier::cuda
