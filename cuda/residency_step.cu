// The one-launch residency step (kernels.hpp, launch_residency_step): the leading block compacts
// and ensures, then every block copies the misses and translates. It replaces four dependent
// launches (compaction, ensure, copy, translate), but not their chain of dependent memory round
// trips, so alone on the GPU it is no faster than they are (bench/results/kernel-choices.md). Its
// use is beside the attention on a few blocks (MirrorEngine::residency_beside_async), where one
// launch keeps few SMs busy.
#include <cuda/atomic>

#include "cuda/compact_row.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/ensure_block.cuh"
#include "cuda/kernels.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/word_copy.cuh"
#include "model/compaction.hpp"
#include "model/translate.hpp"

namespace kvtier::cuda {
namespace {

using ensure_block::kEnsureThreads;

// Items a lane holds per pass of a row: 32 x 17 = 544 covers a decode row (512 chosen blocks
// and the tail) in one pass, so the row's loads are all in flight together.
constexpr int kLaneItems = 17;
constexpr std::int32_t kNoItem = -1;

__device__ inline unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One row's compaction by one warp, with compact_row's output. A row's items are its chosen
// blocks, then the causal tail's first block (tail.begin is a multiple of the ratio), each
// lane holding kLaneItems consecutive items. Positions are block x ratio and a page holds
// page_size / ratio whole blocks, so order and page index follow from block ids alone (int32:
// fewer registers). With prev = the largest earlier block (a max-scan over lanes), an item
// starts a page iff its page index differs from prev's, and its output index is the number
// of earlier starts. That is compact_row's result whenever no block goes backwards and all
// lie inside the table; otherwise lane 0 reruns compact_row itself.
__device__ void compact_row_in_warp(const CompactParams& p, int r, int lane) {
  constexpr unsigned kAll = 0xffffffffu;
  const std::int32_t* blocks = p.blocks + std::int64_t{r} * p.n_blocks;
  const PageId* table = p.tables + std::int64_t{r} * p.table_stride;
  const std::int64_t table_len = p.table_len[r];
  PageId* out = p.out + std::int64_t{r} * p.width;
  const TokenRange tail = causal_tail(p.pos[r], p.compress_ratio);
  const std::int64_t tail_block = tail.begin / p.compress_ratio;
  const bool has_tail = tail.begin < tail.end;
  const int n_blocks = p.tail_only != nullptr && p.tail_only[r] != 0 ? 0 : p.n_blocks;
  const int items = n_blocks + (has_tail ? 1 : 0);
  const int blocks_per_page = p.page_size / p.compress_ratio;
  // A page's blocks are a power of two in every geometry kvtier ships: a shift, not a division
  // (one warp compacts a row, and its instructions, not its loads, are most of its time: the
  // shift took 1.5 us off the row's 8, bench/results/residency-step-h200-2026-12-02.md).
  const int page_shift = __popc(blocks_per_page) == 1 ? __ffs(blocks_per_page) - 1 : -1;
  auto page_of = [page_shift, blocks_per_page](std::int32_t block) {
    return page_shift >= 0 ? block >> page_shift : block / blocks_per_page;
  };
  // A tail block beyond int32 cannot be held as an item, and pages must hold whole blocks:
  // the core handles such rows.
  bool bad = (has_tail && tail_block > INT32_MAX) || p.page_size % p.compress_ratio != 0;
  std::int32_t carry_block = kNoItem;  // the largest block of earlier passes
  int carry_count = 0;                 // pages started in earlier passes
  // The first pass does not wait for the row's position (its blocks' loads go out at once);
  // the checks below stop it before any write when the row is bad.
  for (int base = 0; base == 0 || (base < items && !__any_sync(kAll, bad));
       base += 32 * kLaneItems) {
    const int first = base + lane * kLaneItems;
    std::int32_t item[kLaneItems];
    std::int32_t lane_max = kNoItem;
#pragma unroll
    for (int k = 0; k < kLaneItems; ++k) {
      const int i = first + k;
      item[k] = kNoItem;
      if (i < n_blocks) {
        item[k] = blocks[i] >= 0 ? blocks[i] : kNoItem;
      } else if (i < items) {
        item[k] = static_cast<std::int32_t>(tail_block);
      }
      lane_max = item[k] > lane_max ? item[k] : lane_max;
    }
    std::int32_t incl_max = lane_max;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const std::int32_t v = __shfl_up_sync(kAll, incl_max, d);
      if (lane >= d) incl_max = v > incl_max ? v : incl_max;
    }
    std::int32_t prev = __shfl_up_sync(kAll, incl_max, 1);
    if (lane == 0) prev = kNoItem;
    if (prev < carry_block) prev = carry_block;
    // this lane's page starts (a bit per item), and the order and range checks
    unsigned start_bits = 0;
    std::int32_t q = prev;
#pragma unroll
    for (int k = 0; k < kLaneItems; ++k) {
      if (item[k] == kNoItem) continue;
      const std::int32_t index = page_of(item[k]);
      if (item[k] < q || index >= table_len) bad = true;
      if (q == kNoItem || index != page_of(q)) start_bits |= 1u << k;
      q = item[k] > q ? item[k] : q;
    }
    if (__any_sync(kAll, bad)) break;
    const int starts = __popc(start_bits);
    int incl = starts;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(kAll, incl, d);
      if (lane >= d) incl += v;
    }
    // The table loads of all starts first (in place of their items), then the stores: one
    // round trip per pass, not one per page.
#pragma unroll
    for (int k = 0; k < kLaneItems; ++k)
      if (start_bits & (1u << k)) item[k] = table[page_of(item[k])];
    int k_out = carry_count + incl - starts;
#pragma unroll
    for (int k = 0; k < kLaneItems; ++k) {
      if (!(start_bits & (1u << k))) continue;
      if (k_out < p.width) out[k_out] = item[k];
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
    out[k] = kNoPage;
  if (lane == 0 && carry_count > p.width) atomicAdd(p.dropped, carry_count - p.width);
}

// kStamps: the benchmarks' form, which records the phases (p.stamps); apart, because holding the
// stamp row costs registers the step does not have to spare (1024 threads of at most 64).
template <int W, bool kStamps>
__global__ void __launch_bounds__(kEnsureThreads)
    residency_step_kernel(const __grid_constant__ ResidencyStepParams p,
                          const __grid_constant__ words::WordPlan plan) {
  __shared__ unsigned long long s_ticket, s_start_ns, s_start_clock;
  if (kStamps && threadIdx.x == 0) {  // in shared memory: no registers held
    s_start_ns = globaltimer_ns();
    s_start_clock = clock64();
  }
  if (threadIdx.x == 0) s_ticket = atomicAdd(&p.ticket->taken, 1ull);
  __syncthreads();
  const unsigned long long ticket = s_ticket;
  const unsigned long long launch = ticket / gridDim.x;  // launches before this one
  const unsigned long long worker = ticket % gridDim.x;
  unsigned long long* const stamps =
      kStamps ? p.stamps.at + (launch % static_cast<unsigned>(p.stamps.launches)) * kStepStamps
              : nullptr;
  ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device> published(
      p.ticket->published);
  if (worker == 0) {
    // The first block to start leads: it runs, so blocks waiting for it cannot deadlock.
    if (stamps != nullptr && threadIdx.x == 0) {
      stamps[kStampStartNs] = s_start_ns;
      stamps[kStampStart] = s_start_clock;
      stamps[kStampTicket] = clock64();
    }
    const int lane = threadIdx.x & 31;
    for (int r = threadIdx.x >> 5; r < p.compact.rows; r += kEnsureThreads / 32)
      compact_row_in_warp(p.compact, r, lane);
    __syncthreads();  // the query is complete (global writes of this block are visible to it)
    ensure_block::stamp_clock(stamps, kStampCompacted);
    ensure_block::ensure_in_one_block(p.ensure, stamps);
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();  // the whole block's writes, ordered by the barrier, before the release
      published.store(launch + 1, ::cuda::memory_order_release);
      if (stamps != nullptr) {
        stamps[kStampPublished] = clock64();
        stamps[kStampPublishedNs] = globaltimer_ns();
      }
    }
  } else {
    if (threadIdx.x == 0) {
      while (published.load(::cuda::memory_order_acquire) <= launch)
        __nanosleep(64);
      __threadfence();
    }
    __syncthreads();
  }
  // Every block: its share of the miss copy and of the translate, after the leader's state
  // changes (the acquire above, shared with the block by the barrier).
  const std::int64_t threads = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t thread = static_cast<std::int64_t>(worker) * blockDim.x + threadIdx.x;
  words::copy_pages<W>(p.copy, plan, thread, threads);
  const TranslateParams& t = p.translate;
  int missing = 0;
  for (std::int64_t i = thread; i < t.n; i += threads)
    missing +=
        translate_pages(t.logical + i, 1, t.slot_of_page, t.num_pages, t.dummy, t.physical + i);
  if (missing) atomicAdd(t.missing, missing);
  if (stamps != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(stamps + kStampEndNs, globaltimer_ns());
  }
}

template <int W>
struct StepLaunch {
  static void run(const ResidencyStepParams& p, const words::WordPlan& plan, cudaStream_t s) {
    // 0: one block of 1024 threads per SM, so that every block can be resident at once
    const int grid = p.blocks > 0 ? p.blocks : qsa::sm_count();
    if (p.stamps.at != nullptr) {
      residency_step_kernel<W, true><<<grid, kEnsureThreads, 0, s>>>(p, plan);
    } else {
      residency_step_kernel<W, false><<<grid, kEnsureThreads, 0, s>>>(p, plan);
    }
  }
};

}  // namespace

void launch_residency_step(const ResidencyStepParams& p, cudaStream_t stream) {
  const int w = words::word_bytes(p.copy.layout);
  words::dispatch_word<StepLaunch>(w, p, words::plan_for(p.copy.layout, w), stream);
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::cuda
