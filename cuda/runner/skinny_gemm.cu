// Decode projections of a few rows (skinny_gemm.hpp): one warp per output column.
#include <span>
#include <stdexcept>
#include <string>

#include "cuda/runner/skinny_gemm.hpp"

#include "cuda/cuda_check.hpp"

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

// Weights stream once from HBM (not kept in L1); the few activation rows stay cached.
__device__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// grid: ceil(out / 8); block: 8 warps, warp w computes column blockIdx.x * 8 + w for every row.
// Each lane issues kBatch weight loads before it uses any, so that enough bytes are in flight per
// SM for HBM rate (one load in flight per lane reads well below it: bench/results/
// kernel-choices.md).
// One launch for up to kProjectionMaxGroup matrices that read the same x: the grid is the
// concatenation of each matrix's ceil(out / 8) blocks (block_end: running ends), so the
// small projections share a wave with the large ones instead of each paying a launch and a
// ramp of its own.
struct GroupParams {
  ProjectionOutput m[kProjectionMaxGroup];
  int block_end[kProjectionMaxGroup];
  int n;
};

template <int kRows>
__global__ void skinny_kernel(const std::uint16_t* __restrict__ x, int in,
                              const __grid_constant__ GroupParams g, bool f32_out,
                              bool accumulate) {
  constexpr int kBatch = 8;
  int j = 0;
  while (j + 1 < g.n && static_cast<int>(blockIdx.x) >= g.block_end[j])
    ++j;
  const int first = j == 0 ? 0 : g.block_end[j - 1];
  const int out = g.m[j].out;
  const std::uint16_t* __restrict__ w = g.m[j].w;
  void* y = g.m[j].y;
  const int lane = threadIdx.x % 32;
  const int o = (static_cast<int>(blockIdx.x) - first) * kWarps + threadIdx.x / 32;
  if (o >= out) return;
  const auto* wr = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(o) * in);
  const int vecs = in / 8;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    acc[r] = 0.0f;
  for (int base = 0; base < vecs; base += 32 * kBatch) {
    uint4 wv[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = base + b * 32 + lane;
      wv[b] = i < vecs ? load_stream(wr + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = base + b * 32 + lane;
      if (i >= vecs) break;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint4 xv =
            __ldg(reinterpret_cast<const uint4*>(x + static_cast<std::int64_t>(r) * in) + i);
        acc[r] += dot8(wv[b], xv);
      }
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
void launch(const std::uint16_t* x, int in, const GroupParams& g, bool f32, bool acc,
            cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(g.block_end[g.n - 1]);
  skinny_kernel<kRows><<<grid, kWarps * 32, 0, s>>>(x, in, g, f32, acc);
}

void launch_rows(const std::uint16_t* x, int rows, int in, const GroupParams& g, bool f32, bool acc,
                 cudaStream_t s) {
  switch (rows) {
    case 1:
      launch<1>(x, in, g, f32, acc, s);
      break;
    case 2:
      launch<2>(x, in, g, f32, acc, s);
      break;
    case 3:
      launch<3>(x, in, g, f32, acc, s);
      break;
    case 4:
      launch<4>(x, in, g, f32, acc, s);
      break;
    case 5:
      launch<5>(x, in, g, f32, acc, s);
      break;
    case 6:
      launch<6>(x, in, g, f32, acc, s);
      break;
    case 7:
      launch<7>(x, in, g, f32, acc, s);
      break;
    default:
      launch<8>(x, in, g, f32, acc, s);
      break;
  }
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

}  // namespace

bool skinny_gemm_fits(int rows, int in) {
  return rows >= 1 && rows <= kSkinnyMaxRows && in > 0 && in % 8 == 0;
}

void skinny_gemm(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, void* y,
                 bool f32_out, bool accumulate, cudaStream_t s) {
  if (!skinny_gemm_fits(rows, in)) throw std::invalid_argument("skinny_gemm: shape");
  if (out <= 0) return;
  GroupParams g{};
  g.m[0] = {w, out, y};
  g.block_end[0] = (out + kWarps - 1) / kWarps;
  g.n = 1;
  launch_rows(x, rows, in, g, f32_out, accumulate, s);
}

void skinny_gemm_group(const std::uint16_t* x, int rows, int in,
                       std::span<const ProjectionOutput> outputs, cudaStream_t s) {
  if (!skinny_gemm_fits(rows, in)) throw std::invalid_argument("skinny_gemm_group: shape");
  if (outputs.empty() || outputs.size() > static_cast<std::size_t>(kProjectionMaxGroup))
    throw std::invalid_argument("skinny_gemm_group: 1.." + std::to_string(kProjectionMaxGroup) +
                                " outputs");
  GroupParams g{};
  int blocks = 0;
  for (const ProjectionOutput& o : outputs) {
    if (o.out <= 0) throw std::invalid_argument("skinny_gemm_group: an output of no columns");
    blocks += (o.out + kWarps - 1) / kWarps;
    g.m[g.n] = o;
    g.block_end[g.n++] = blocks;
  }
  launch_rows(x, rows, in, g, false, false, s);
}

}  // namespace kvtier::runner
