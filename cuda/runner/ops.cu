#include <cmath>

#include "cuda/runner/ops.hpp"

namespace kvtier::runner {

namespace {

constexpr int kThreads = 256;

__device__ float bf16_to_f(std::uint16_t b) {
  return __uint_as_float(static_cast<unsigned>(b) << 16);
}

// Round to nearest even; NaN stays NaN (same rule as the CPU side).
__device__ std::uint16_t f_to_bf16(float x) {
  const unsigned u = __float_as_uint(x);
  if (isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__global__ void embed_kernel(const std::uint16_t* table, const std::int32_t* tokens, int hidden,
                             float* out) {
  const std::int64_t r = blockIdx.x;
  const std::uint16_t* src = table + std::int64_t{tokens[r]} * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    out[r * hidden + i] = bf16_to_f(src[i]);
}

// Sum over the CTA; every thread gets the result. `red` is kThreads / 32 floats of shared
// memory owned by the caller. Deterministic (fixed tree).
__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w)
    t += red[w];
  __syncthreads();
  return t;
}

__global__ void rms_norm_kernel(const float* x, const std::uint16_t* w, int n, float eps,
                                std::uint16_t* out) {
  __shared__ float red[kThreads / 32];
  const std::int64_t r = blockIdx.x;
  const float* row = x + r * n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    ss += row[i] * row[i];
  ss = block_sum(ss, red);
  const float inv = rsqrtf(ss / static_cast<float>(n) + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    out[r * n + i] = f_to_bf16(row[i] * inv * (1.0f + bf16_to_f(w[i])));
}

__global__ void gate_mul_kernel(const float* o, const std::uint16_t* gate, std::int64_t count,
                                std::uint16_t* out) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float g = bf16_to_f(gate[i]);
    out[i] = f_to_bf16(o[i] / (1.0f + expf(-g)));
  }
}

__global__ void argmax_kernel(const float* logits, int n, std::int32_t* out) {
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
  const float* row = logits + std::int64_t{blockIdx.x} * n;
  float bv = -INFINITY;
  int bi = n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = isnan(row[i]) ? -INFINITY : row[i];
    if (v > bv || (v == bv && i < bi)) {
      bv = v;
      bi = i;
    }
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = best_v[threadIdx.x + s];
      const int oi = best_i[threadIdx.x + s];
      if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_i[0] < n ? best_i[0] : 0;
}

}  // namespace

void embed(const std::uint16_t* table, const std::int32_t* tokens, int rows, int hidden, float* out,
           cudaStream_t s) {
  if (rows <= 0 || hidden <= 0) return;
  embed_kernel<<<rows, kThreads, 0, s>>>(table, tokens, hidden, out);
}

void rms_norm(const float* x, const std::uint16_t* w, int rows, int n, float eps,
              std::uint16_t* out, cudaStream_t s) {
  if (rows <= 0 || n <= 0) return;
  rms_norm_kernel<<<rows, kThreads, 0, s>>>(x, w, n, eps, out);
}

void gate_mul(const float* o, const std::uint16_t* gate, std::int64_t count, std::uint16_t* out,
              cudaStream_t s) {
  if (count <= 0) return;
  const std::int64_t blocks = std::min<std::int64_t>((count + kThreads - 1) / kThreads, 65535);
  gate_mul_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(o, gate, count, out);
}

void argmax(const float* logits, int rows, int n, std::int32_t* out, cudaStream_t s) {
  if (rows <= 0 || n <= 0) return;
  argmax_kernel<<<rows, kThreads, 0, s>>>(logits, n, out);
}

}  // namespace kvtier::runner
