// The one-launch residency step (kernels.hpp, launch_residency_step): the leading block compacts
// and ensures, then every block copies the misses and translates. It replaces four dependent
// launches (compaction, ensure, copy, translate), but not their chain of dependent memory round
// trips, so alone on the GPU it is no faster than they are (bench/results/kernel-choices.md). Its
// use is beside the attention on a few blocks (MirrorEngine::residency_beside_async), where one
// launch keeps few SMs busy.
#include <cuda/atomic>

#include "cuda/cuda_check.hpp"
#include "cuda/ensure_block.cuh"
#include "cuda/kernels.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/step_compaction.cuh"
#include "cuda/word_copy.cuh"
#include "model/compaction.hpp"
#include "model/translate.hpp"

namespace kvtier::cuda {
namespace {

using ensure_block::kEnsureThreads;

__device__ inline unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
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
    __shared__ step_compaction::ChunkSummary s_chunks[kEnsureThreads / 32];
    step_compaction::compact_rows(p.compact, s_chunks);
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
