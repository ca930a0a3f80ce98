#pragma once
// Device helpers shared by the QSA kernels: launch checks, bf16 / fp8 conversions, warp
// reductions, RoPE angles.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/qsa/qsa_kernels.hpp"

namespace kvtier::qsa::detail {

// Launch status check: throws std::runtime_error naming the kernel and the CUDA error.
inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("qsa ") + what + ": " + cudaGetErrorString(e));
}
inline void require(bool ok, const char* what, long long value) {
  if (!ok)
    throw std::invalid_argument(std::string("qsa: unsupported ") + what + " = " +
                                std::to_string(value));
}

__device__ __forceinline__ float bf16_to_float(std::uint16_t b) {
  return __uint_as_float(static_cast<unsigned>(b) << 16);
}
__device__ __forceinline__ std::uint16_t float_to_bf16(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// All lanes hold the sum (butterfly; deterministic for a given input order).
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// cos / sin of pair i at pos, computed in fp64, YaRN factor applied, rounded to fp32.
__device__ __forceinline__ void rope_cs(const Rope& r, int i, std::int64_t pos, float& c,
                                        float& s) {
  double sd, cd;
  sincos(static_cast<double>(pos) * r.inv_freq[i], &sd, &cd);
  c = static_cast<float>(cd * r.attention_factor);
  s = static_cast<float>(sd * r.attention_factor);
}

}  // namespace kvtier::qsa::detail
