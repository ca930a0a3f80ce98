// Data kernels: multi-bank miss copy, write-through store, and the selected-token read, all in
// whole words (cuda/word_copy.cuh).
#include <cstdint>

#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/word_copy.cuh"

namespace kvtier::cuda {
namespace {

using namespace words;

int grid_for_device() {
  return qsa::sm_count() * 8;  // 8 blocks of 256 per SM: enough requests in flight for PCIe
}

constexpr int kThreads = 256;

// ---------------------------------------------------------------------------------------
// Multi-bank copy (words::copy_pages over the whole grid).
template <int W>
__global__ void __launch_bounds__(kThreads)
    copy_kernel(const __grid_constant__ CopyParams p, const __grid_constant__ WordPlan plan) {
  copy_pages<W>(p, plan, std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                std::int64_t{gridDim.x} * blockDim.x);
}

// ---------------------------------------------------------------------------------------
// Store: item v of n * layer_token_words words.
template <int W>
__global__ void __launch_bounds__(kThreads)
    store_kernel(const __grid_constant__ StoreParams p, const __grid_constant__ WordPlan plan) {
  using Word = typename WordOf<W>::type;
  const std::int64_t total = std::int64_t{p.n} * plan.layer_token_words;
  for (std::int64_t v = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < total;
       v += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = v / plan.layer_token_words;
    std::int64_t w = v - i * plan.layer_token_words;
    int k = 0;
    while (k + 1 < plan.kinds && w >= plan.token_words[k]) {
      w -= plan.token_words[k];
      ++k;
    }
    const PageId page = p.pages[i];
    const std::int32_t token = p.tokens[i];
    if (page < 0 || page >= p.num_pages || token < 0 || token >= p.layout.page_size) {
      if (v == i * plan.layer_token_words) atomicAdd(p.bad, 1);
      continue;
    }
    const std::int64_t tw = plan.token_words[k];
    const Word val = reinterpret_cast<const Word*>(p.src[k])[i * tw + w];
    const std::int64_t in_page = std::int64_t{token} * tw + w;
    const std::int64_t page_words = tw * p.layout.page_size;
    if (p.host[k] != nullptr)
      reinterpret_cast<Word*>(p.host[k])[std::int64_t{page} * page_words + in_page] = val;
    if (p.pool[k] != nullptr) {
      const SlotId s = p.slot_of_page == nullptr ? page : p.slot_of_page[page];
      if (s >= 0) reinterpret_cast<Word*>(p.pool[k])[std::int64_t{s} * page_words + in_page] = val;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Read + checksum: item v of rows * max_tokens * layer_token_words words.
template <class Word>
__device__ unsigned long long word_term(const Word& x, std::int64_t pos, std::int64_t index) {
  return checksum_term(static_cast<unsigned long long>(x), pos, index);
}
template <>
__device__ unsigned long long word_term<Word16>(const Word16& x, std::int64_t pos,
                                                std::int64_t index) {
  return checksum_term(x.lo, pos, 2 * index) + checksum_term(x.hi, pos, 2 * index + 1);
}

template <int W>
__global__ void __launch_bounds__(kThreads)
    read_kernel(const __grid_constant__ ReadParams p, const __grid_constant__ WordPlan plan) {
  using Word = typename WordOf<W>::type;
  const std::int64_t per_row = std::int64_t{p.max_tokens} * plan.layer_token_words;
  const std::int64_t total = std::int64_t{p.rows} * per_row;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  unsigned long long sum = 0;
  int missing = 0;
  for (std::int64_t v0 = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v0 < total;
       v0 += stride * kBatch) {
    Word vals[kBatch];
    std::int64_t pos_of[kBatch];
    std::int64_t idx_of[kBatch];
    bool live[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const std::int64_t v = v0 + b * stride;
      live[b] = false;
      if (v >= total) continue;
      const std::int64_t r = v / per_row;
      std::int64_t rem = v - r * per_row;
      const std::int64_t t = rem / plan.layer_token_words;
      std::int64_t w = rem - t * plan.layer_token_words;
      const std::int64_t widx = w;
      int k = 0;
      while (k + 1 < plan.kinds && w >= plan.token_words[k]) {
        w -= plan.token_words[k];
        ++k;
      }
      const std::int64_t pos = p.positions[r * p.max_tokens + t];
      if (pos < 0) continue;
      const std::int64_t index = pos / p.layout.page_size;
      const bool first_word = widx == 0;
      if (index >= p.table_len[r]) {
        if (first_word) ++missing;
        continue;
      }
      const PageId page = p.tables[r * p.table_stride + index];
      std::int64_t where = p.dummy;
      if (page >= 0 && page < p.num_pages) {
        where = page;
        if (p.slot_of_page != nullptr) {
          const SlotId s = p.slot_of_page[page];
          where = s >= 0 ? s : p.dummy;
          if (s < 0 && first_word) ++missing;
        }
      } else if (first_word) {
        ++missing;
      }
      const std::int64_t bank = std::int64_t{p.layer} * p.layout.banks_per_layer + k;
      const std::int64_t tw = plan.token_words[k];
      const Word* src = reinterpret_cast<const Word*>(p.banks[bank]) +
                        where * tw * p.layout.page_size + (pos % p.layout.page_size) * tw + w;
      vals[b] = *src;
      pos_of[b] = pos;
      idx_of[b] = widx;
      live[b] = true;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (live[b]) sum += word_term<Word>(vals[b], pos_of[b], idx_of[b]);
  }
  for (int off = 16; off > 0; off /= 2)
    sum += __shfl_down_sync(0xffffffffu, sum, off);
  if ((threadIdx.x & 31) == 0 && sum != 0) atomicAdd(p.checksum, sum);
  if (missing) atomicAdd(p.missing, missing);
}

template <int W>
struct CopyLaunch {
  static void run(const CopyParams& p, const WordPlan& plan, cudaStream_t s) {
    copy_kernel<W><<<grid_for_device(), kThreads, 0, s>>>(p, plan);
  }
};
template <int W>
struct StoreLaunch {
  static void run(const StoreParams& p, const WordPlan& plan, int grid, cudaStream_t s) {
    store_kernel<W><<<grid, kThreads, 0, s>>>(p, plan);
  }
};
template <int W>
struct ReadLaunch {
  static void run(const ReadParams& p, const WordPlan& plan, cudaStream_t s) {
    read_kernel<W><<<grid_for_device(), kThreads, 0, s>>>(p, plan);
  }
};

}  // namespace

void launch_copy(const CopyParams& p, cudaStream_t stream) {
  const int w = word_bytes(p.layout);
  dispatch_word<CopyLaunch>(w, p, plan_for(p.layout, w), stream);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void launch_store(const StoreParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  const int w = word_bytes(p.layout);
  const WordPlan plan = plan_for(p.layout, w);
  const std::int64_t items = std::int64_t{p.n} * plan.layer_token_words;
  const std::int64_t want = (items + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(want < grid_for_device() ? want : grid_for_device());
  dispatch_word<StoreLaunch>(w, p, plan, grid, stream);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void launch_read(const ReadParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.max_tokens <= 0) return;
  const int w = word_bytes(p.layout);
  dispatch_word<ReadLaunch>(w, p, plan_for(p.layout, w), stream);
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::cuda

namespace kvtier::cuda {
namespace {
__global__ void fill_kernel(const __grid_constant__ FillParams p) {
  // 32-bit words; every bank kind's token bytes are a multiple of 4.
  std::int64_t words[4];
  std::int64_t total_per_token = 0;
  const int kinds = p.layout.banks_per_layer;
  for (int k = 0; k < kinds; ++k) {
    words[k] = p.layout.token_bytes(PageLayout::kind_of(k)) / 4;
    total_per_token += words[k];
  }
  const std::int64_t total = std::int64_t{p.n} * total_per_token;
  for (std::int64_t v = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < total;
       v += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = v / total_per_token;
    std::int64_t w = v - i * total_per_token;
    int k = 0;
    while (k + 1 < kinds && w >= words[k]) {
      w -= words[k];
      ++k;
    }
    reinterpret_cast<std::uint32_t*>(p.dst[k])[i * words[k] + w] =
        token_word(p.positions[i], p.layer, k, w);
  }
}
}  // namespace

void launch_fill(const FillParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  const std::int64_t items =
      std::int64_t{p.n} * (p.layout.layer_page_bytes() / p.layout.page_size / 4);
  const std::int64_t want = (items + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(want < grid_for_device() ? want : grid_for_device());
  fill_kernel<<<grid, kThreads, 0, stream>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}
}  // namespace kvtier::cuda
