#include <stdexcept>
#include <string>

#include "cuda/runner/skinny_gemm.hpp"

namespace kvtier::runner {

namespace {

constexpr int kWarps = 8;

__device__ float bf16_lo(unsigned v) {
  return __uint_as_float(v << 16);
}
__device__ float bf16_hi(unsigned v) {
  return __uint_as_float(v & 0xffff0000u);
}

__device__ std::uint16_t to_bf16(float x) {
  const unsigned u = __float_as_uint(x);
  if (isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ float dot8(uint4 a, uint4 b) {
  float s = bf16_lo(a.x) * bf16_lo(b.x);
  s = fmaf(bf16_hi(a.x), bf16_hi(b.x), s);
  s = fmaf(bf16_lo(a.y), bf16_lo(b.y), s);
  s = fmaf(bf16_hi(a.y), bf16_hi(b.y), s);
  s = fmaf(bf16_lo(a.z), bf16_lo(b.z), s);
  s = fmaf(bf16_hi(a.z), bf16_hi(b.z), s);
  s = fmaf(bf16_lo(a.w), bf16_lo(b.w), s);
  s = fmaf(bf16_hi(a.w), bf16_hi(b.w), s);
  return s;
}

// grid: ceil(out / 8); block: 8 warps, warp w computes column blockIdx.x * 8 + w for every row.
template <int kRows>
__global__ void skinny_kernel(const std::uint16_t* __restrict__ x,
                              const std::uint16_t* __restrict__ w, int in, int out, void* y,
                              bool f32_out, bool accumulate) {
  const int lane = threadIdx.x % 32;
  const int o = blockIdx.x * kWarps + threadIdx.x / 32;
  if (o >= out) return;
  const auto* wr = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(o) * in);
  const int vecs = in / 8;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    acc[r] = 0.0f;
  for (int i = lane; i < vecs; i += 32) {
    const uint4 wv = __ldg(wr + i);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint4 xv =
          __ldg(reinterpret_cast<const uint4*>(x + static_cast<std::int64_t>(r) * in) + i);
      acc[r] += dot8(wv, xv);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off >>= 1)
      v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) {
      const std::int64_t at = static_cast<std::int64_t>(r) * out + o;
      if (f32_out) {
        float* yf = static_cast<float*>(y);
        yf[at] = accumulate ? yf[at] + v : v;
      } else {
        static_cast<std::uint16_t*>(y)[at] = to_bf16(v);
      }
    }
  }
}

template <int kRows>
void launch(const std::uint16_t* x, const std::uint16_t* w, int in, int out, void* y, bool f32,
            bool acc, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>((out + kWarps - 1) / kWarps);
  skinny_kernel<kRows><<<grid, kWarps * 32, 0, s>>>(x, w, in, out, y, f32, acc);
}

}  // namespace

bool skinny_gemm_fits(int rows, int in) {
  return rows >= 1 && rows <= kSkinnyMaxRows && in > 0 && in % 8 == 0;
}

void skinny_gemm(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, void* y,
                 bool f32_out, bool accumulate, cudaStream_t s) {
  if (!skinny_gemm_fits(rows, in)) throw std::invalid_argument("skinny_gemm: shape");
  if (out <= 0) return;
  switch (rows) {
    case 1:
      launch<1>(x, w, in, out, y, f32_out, accumulate, s);
      break;
    case 2:
      launch<2>(x, w, in, out, y, f32_out, accumulate, s);
      break;
    case 3:
      launch<3>(x, w, in, out, y, f32_out, accumulate, s);
      break;
    case 4:
      launch<4>(x, w, in, out, y, f32_out, accumulate, s);
      break;
    case 5:
      launch<5>(x, w, in, out, y, f32_out, accumulate, s);
      break;
    case 6:
      launch<6>(x, w, in, out, y, f32_out, accumulate, s);
      break;
    case 7:
      launch<7>(x, w, in, out, y, f32_out, accumulate, s);
      break;
    default:
      launch<8>(x, w, in, out, y, f32_out, accumulate, s);
      break;
  }
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("skinny_gemm: ") + cudaGetErrorString(e));
}

}  // namespace kvtier::runner
