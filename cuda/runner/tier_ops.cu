#include <cub/block/block_scan.cuh>
#include <stdexcept>
#include <string>

#include "cuda/runner/tier_ops.hpp"

#include "cuda/cuda_check.hpp"

namespace kvtier::runner {

namespace {

constexpr int kThreads = 256;
constexpr int kUnionThreads = 1024;

unsigned grid_for(std::int64_t n, int per_block = kThreads) {
  const std::int64_t g = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(g < 65535 * 16 ? g : 65535 * 16);
}

__device__ std::uint16_t to_bf16(float x) {
  const unsigned u = __float_as_uint(x);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// splitmix64 of (row, column, salt): the fill's only source of values.
__device__ float hash_unit(std::int64_t row, std::int64_t col, std::uint64_t salt) {
  unsigned long long z = static_cast<unsigned long long>(row) * 0x9E3779B97F4A7C15ull +
                         static_cast<unsigned long long>(col) * 0xC2B2AE3D27D4EB4Full + salt;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // 24 high bits -> [-1, 1)
  return static_cast<float>(static_cast<int>(z >> 40) - (1 << 23)) * (1.0f / (1 << 23));
}

__global__ void union_mark_kernel(const std::int32_t* blocks, int k,
                                  const std::int32_t* group_of_row, std::int64_t words,
                                  std::int64_t max_blocks, std::uint32_t* bitmap) {
  const std::int64_t r = blockIdx.x;
  std::uint32_t* bits = bitmap + std::int64_t{group_of_row[r]} * words;
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    const std::int32_t b = blocks[r * k + i];
    if (b >= 0 && b < max_blocks) atomicOr(bits + b / 32, 1u << (b % 32));
  }
}

// One CTA per group: popcount per thread's run of words, block scan, ordered write.
__global__ void union_list_kernel(const std::uint32_t* bitmap, std::int64_t words,
                                  std::int32_t* lists, std::int64_t list_stride,
                                  std::int32_t* counts) {
  using Scan = cub::BlockScan<int, kUnionThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ int total;
  const std::int64_t g = blockIdx.x;
  const std::uint32_t* bits = bitmap + g * words;
  std::int32_t* out = lists + g * list_stride;
  const std::int64_t per = (words + kUnionThreads - 1) / kUnionThreads;
  const std::int64_t w0 = threadIdx.x * per;
  const std::int64_t w1 = w0 + per < words ? w0 + per : words;
  int mine = 0;
  for (std::int64_t w = w0; w < w1; ++w)
    mine += __popc(bits[w]);
  int at = 0;
  int sum = 0;
  Scan(temp).ExclusiveSum(mine, at, sum);
  if (threadIdx.x == 0) total = sum;
  for (std::int64_t w = w0; w < w1; ++w) {
    std::uint32_t m = bits[w];
    while (m != 0u) {
      const int b = __ffs(static_cast<int>(m)) - 1;
      out[at++] = static_cast<std::int32_t>(w * 32 + b);
      m &= m - 1u;
    }
  }
  __syncthreads();
  for (std::int64_t i = total + threadIdx.x; i < list_stride; i += blockDim.x)
    out[i] = -1;
  if (threadIdx.x == 0) counts[g] = total;
}

__global__ void window_table_kernel(std::int64_t n, std::int64_t stride, int q, std::int64_t p0,
                                    std::int64_t p1, std::int32_t* table) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t req = i / stride, page = i % stride;
    table[i] = req == q && page >= p0 && page < p1 ? static_cast<std::int32_t>(page - p0) : -1;
  }
}

__global__ void window_tokens_kernel(const std::int32_t* tokens, int width,
                                     const std::int32_t* row_req, std::int64_t n, int q,
                                     std::int64_t t0, std::int64_t t1, std::int32_t* out) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int32_t t = tokens[i];
    out[i] = row_req[i / width] == q && t >= t0 && t < t1 ? t : -1;
  }
}

struct GatherArgs {
  BankPair b;
  const std::int32_t* pages;
};

// grid (pages, banks); 16-byte words.
__global__ void gather_pages_kernel(const __grid_constant__ GatherArgs a) {
  const std::int64_t i = blockIdx.x;
  const int bank = static_cast<int>(blockIdx.y);
  const std::int64_t words = a.b.page_bytes[bank] / 16;
  const auto* src =
      reinterpret_cast<const uint4*>(a.b.src[bank]) + std::int64_t{a.pages[i]} * words;
  auto* dst = reinterpret_cast<uint4*>(a.b.dst[bank]) + i * words;
  for (std::int64_t w = threadIdx.x; w < words; w += blockDim.x)
    dst[w] = src[w];
}

__global__ void hash_bf16_kernel(std::uint16_t* out, std::int64_t n, int dim, std::int64_t row0,
                                 std::uint64_t salt, float scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = to_bf16(scale * hash_unit(row0 + i / dim, i % dim, salt));
}

__global__ void hash_f32_kernel(float* out, std::int64_t n, int dim, std::int64_t row0,
                                std::uint64_t salt, float scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = __uint_as_float(
        static_cast<unsigned>(to_bf16(scale * hash_unit(row0 + i / dim, i % dim, salt))) << 16);
}

__global__ void iota_kernel(std::int32_t* out, std::int64_t n, std::int32_t first, int step) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = first + static_cast<std::int32_t>(i) * step;
}

__global__ void gather_rows_kernel(const float* x, const std::int32_t* idx, int cols, float* out) {
  const std::int64_t r = blockIdx.x;
  const float* src = x + std::int64_t{idx[r]} * cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    out[r * cols + i] = src[i];
}

__global__ void silu_mul_kernel(const std::uint16_t* gate, const std::uint16_t* up, std::int64_t n,
                                std::uint16_t* out) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float g = __uint_as_float(static_cast<unsigned>(gate[i]) << 16);
    const float u = __uint_as_float(static_cast<unsigned>(up[i]) << 16);
    out[i] = to_bf16(g / (1.0f + __expf(-g)) * u);
  }
}

}  // namespace

std::int64_t union_bitmap_words(int groups, std::int64_t max_blocks) {
  return std::int64_t{groups} * ((max_blocks + 31) / 32);
}

void union_selections(const std::int32_t* blocks, int k, int rows, const std::int32_t* group_of_row,
                      int groups, std::int64_t max_blocks, std::uint32_t* bitmap,
                      std::int32_t* lists, std::int64_t list_stride, std::int32_t* counts,
                      cudaStream_t s) {
  if (rows <= 0 || groups <= 0) return;
  if (list_stride < max_blocks) throw std::invalid_argument("union_selections: list_stride");
  const std::int64_t words = (max_blocks + 31) / 32;
  KVT_CUDA_CHECK(cudaMemsetAsync(bitmap, 0, static_cast<std::size_t>(groups * words) * 4, s));
  union_mark_kernel<<<rows, kThreads, 0, s>>>(blocks, k, group_of_row, words, max_blocks, bitmap);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
  union_list_kernel<<<groups, kUnionThreads, 0, s>>>(bitmap, words, lists, list_stride, counts);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void window_table(int requests, std::int64_t stride, int q, std::int64_t p0, std::int64_t p1,
                  std::int32_t* table, cudaStream_t s) {
  const std::int64_t n = std::int64_t{requests} * stride;
  if (n <= 0) return;
  window_table_kernel<<<grid_for(n), kThreads, 0, s>>>(n, stride, q, p0, p1, table);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void window_tokens(const std::int32_t* tokens, int width, const std::int32_t* row_req, int rows,
                   int q, std::int64_t t0, std::int64_t t1, std::int32_t* out, cudaStream_t s) {
  const std::int64_t n = std::int64_t{rows} * width;
  if (n <= 0) return;
  window_tokens_kernel<<<grid_for(n), kThreads, 0, s>>>(tokens, width, row_req, n, q, t0, t1, out);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void gather_pages(const BankPair& b, const std::int32_t* pages, std::int64_t n, cudaStream_t s) {
  if (n <= 0 || b.banks <= 0) return;
  if (b.banks > 4 || n > INT32_MAX) throw std::invalid_argument("gather_pages: shape");
  for (int i = 0; i < b.banks; ++i)
    if (b.page_bytes[i] % 16 != 0) throw std::invalid_argument("gather_pages: page bytes % 16");
  gather_pages_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(b.banks)), kThreads, 0,
                        s>>>(GatherArgs{b, pages});
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void hash_bf16(std::uint16_t* out, std::int64_t rows, int dim, std::int64_t row0,
               std::uint64_t salt, float scale, cudaStream_t s) {
  const std::int64_t n = rows * dim;
  if (n <= 0) return;
  hash_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(out, n, dim, row0, salt, scale);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void hash_f32(float* out, std::int64_t rows, int dim, std::int64_t row0, std::uint64_t salt,
              float scale, cudaStream_t s) {
  const std::int64_t n = rows * dim;
  if (n <= 0) return;
  hash_f32_kernel<<<grid_for(n), kThreads, 0, s>>>(out, n, dim, row0, salt, scale);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void iota_i32(std::int32_t* out, std::int64_t n, std::int32_t first, cudaStream_t s) {
  if (n <= 0) return;
  iota_kernel<<<grid_for(n), kThreads, 0, s>>>(out, n, first, 1);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void fill_i32(std::int32_t* out, std::int64_t n, std::int32_t v, cudaStream_t s) {
  if (n <= 0) return;
  iota_kernel<<<grid_for(n), kThreads, 0, s>>>(out, n, v, 0);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void gather_rows(const float* x, const std::int32_t* idx, int n, int cols, float* out,
                 cudaStream_t s) {
  if (n <= 0) return;
  gather_rows_kernel<<<n, kThreads, 0, s>>>(x, idx, cols, out);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

void silu_mul(const std::uint16_t* gate, const std::uint16_t* up, std::int64_t count,
              std::uint16_t* out, cudaStream_t s) {
  if (count <= 0) return;
  silu_mul_kernel<<<grid_for(count), kThreads, 0, s>>>(gate, up, count, out);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

}  // namespace kvtier::runner
