// Projections of up to 64 rows on tensor cores (mma_gemm.hpp).
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "cuda/runner/mma_gemm.hpp"

#include "cuda/cuda_check.hpp"
#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::runner {

namespace {

using qsa::detail::float_to_bf16;
using qsa::detail::mma_bf16;

constexpr int kMaxWarps = 8;        // k_split: warps a block
constexpr int kMaxRowTiles = 8;     // 8 rows a tile: kMmaMaxRows
constexpr int kMinSliceChunks = 8;  // see mma_gemm_tiling

// One launch for up to kProjectionMaxGroup matrices that read the same x: the grid is the
// concatenation of each matrix's column blocks (block_end: running ends), as in skinny_gemm.
struct GroupParams {
  ProjectionOutput m[kProjectionMaxGroup];
  int block_end[kProjectionMaxGroup];
  int n;
};

// 16-byte async copy global -> shared, bypassing L1 (each weight is read once); zero-fills the
// destination when !valid. The "memory" clobbers keep the compiler from moving this thread's
// shared-memory reads of a slot across the copy into it or the wait for it.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(qsa::detail::smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Shared memory of a warp: its ring of weight chunks, later its partial sums (8 KiB).
constexpr int kWarpSmemBytes = 8192;

// K is walked in chunks of 32. Lane (g = lane / 4, t = lane % 4) takes 16 bytes (8 k values)
// at k = 32 c + 8 t of weight rows g and g + 8 of each 16-column tile and of x row g of each
// 8-row tile. A chunk is two m16n8k16 steps; step s feeds the mma the words {x, y} (s = 0) or
// {z, w} (s = 1) of those 16 bytes as the fragments' k pairs {2t, 2t+1} and {2t+8, 2t+9}. That
// permutes k inside the chunk, the same way for W (operand A) and x (operand B), so the sum is
// the product's, and every operand arrives with one 16-byte load and no shuffle.
//
// grid: the column blocks of every matrix (MT x 16 columns each); block: k_split warps, warp w
// sums the chunks of its contiguous K slice. The weights stream through a ring of kStages
// chunks in the warp's shared memory by cp.async, kStages - 1 chunks in flight a warp (6-7 KiB,
// ~100 KiB an SM at two blocks: what HBM rate needs, with no registers held for it). Each lane
// copies and reads back only its own 16-byte slots, so the ring needs no barrier: the wait of
// cp.async makes a lane's copies visible to itself. x comes through L1 (__ldg): every column
// block reads the same few rows. Then every warp leaves its accumulators in its shared memory
// ([warp][accumulator][lane]) and the block adds them in warp order: deterministic.
template <int MT, int NT>
__global__ void __launch_bounds__(kMaxWarps * 32, 2)
    mma_kernel(const std::uint16_t* __restrict__ x, int rows, int in,
               const __grid_constant__ GroupParams g, bool f32_out, bool accumulate) {
  constexpr int kStages = 8 / MT;  // [kStages][MT][2][32] uint4: 8 KiB
  constexpr int kAcc = MT * NT * 4;
  static_assert(kAcc * 32 * sizeof(float) <= kWarpSmemBytes);
  extern __shared__ uint4 smem[];
  int j = 0;
  while (j + 1 < g.n && static_cast<int>(blockIdx.x) >= g.block_end[j])
    ++j;
  const int first = j == 0 ? 0 : g.block_end[j - 1];
  const int out = g.m[j].out;
  const int col0 = (static_cast<int>(blockIdx.x) - first) * MT * 16;
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int gr = lane / 4, tg = lane % 4;
  const int chunks = (in + 31) / 32;
  const int per = (chunks + warps - 1) / warps;
  const int c_begin = warp * per;
  const int c_end = min(chunks, c_begin + per);
  uint4* ring = smem + warp * (kWarpSmemBytes / 16);

  // Row pointers at this lane's 16 bytes of chunk 0; rows past the end are clamped (never read).
  const uint4* wr[MT][2];
  bool wok[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + mt * 16 + h * 8 + gr;
      wok[mt][h] = col < out;
      wr[mt][h] = reinterpret_cast<const uint4*>(
                      g.m[j].w + static_cast<std::int64_t>(min(col, out - 1)) * in) +
                  tg;
    }
  }
  // x row 8 nt + g at xg + nt * in (8 rows of in / 8 words); read only when the row exists
  const uint4* xg = reinterpret_cast<const uint4*>(x + static_cast<std::int64_t>(gr) * in) + tg;
  // Chunk c into ring slot c % kStages; past the slice: nothing (an empty group keeps the count).
  auto issue = [&](int c) {
    if (c >= c_end) return;
    const bool kin = c * 32 + tg * 8 < in;
    uint4* slot = ring + (c % kStages) * MT * 2 * 32 + lane;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        cp_async16(slot + (mt * 2 + h) * 32, kin ? wr[mt][h] + c * 4 : wr[mt][h],
                   kin && wok[mt][h]);
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[mt][nt][i] = 0.0f;

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    issue(c_begin + st);
    cp_async_commit();
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int c = c_begin; c < c_end; ++c) {
    cp_async_wait<kStages - 2>();  // chunk c has landed (the groups complete in order)
    const uint4* slot = ring + (c % kStages) * MT * 2 * 32 + lane;
    uint4 wv[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        wv[mt][h] = slot[(mt * 2 + h) * 32];
    // into the slot chunk c - 1 left: its words fed the mma of the last iteration already
    issue(c + kStages - 1);
    cp_async_commit();
    const bool kin = c * 32 + tg * 8 < in;
    uint4 xv[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      xv[nt] = kin && nt * 8 + gr < rows ? __ldg(xg + nt * in + c * 4) : zero;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const uint4& lo = wv[mt][0];  // column g of the tile
        const uint4& hi = wv[mt][1];  // column g + 8
        const unsigned a[4] = {s ? lo.z : lo.x, s ? hi.z : hi.x, s ? lo.w : lo.y, s ? hi.w : hi.y};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma_bf16(acc[mt][nt], a, s ? xv[nt].z : xv[nt].x, s ? xv[nt].w : xv[nt].y);
      }
    }
  }
  cp_async_wait<0>();  // no copy may land in the ring once it holds the partial sums,
  __syncwarp();        // and no lane may still read a slot that another overwrites

  // Accumulator (mt, nt, i) of lane (g, t) is column col0 + 16 mt + g + 8 (i / 2) of row
  // 8 nt + 2 t + i % 2 (the m16n8 C fragment).
  float* mine = reinterpret_cast<float*>(ring);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        mine[((mt * NT + nt) * 4 + i) * 32 + lane] = acc[mt][nt][i];
  __syncthreads();
  const float* red = reinterpret_cast<const float*>(smem);
  constexpr int kWarpFloats = kWarpSmemBytes / 4;
  void* y = g.m[j].y;
  for (int p = static_cast<int>(threadIdx.x); p < kAcc * 32; p += static_cast<int>(blockDim.x)) {
    const int e = p / 32, r = p % 32;
    const int l = (r % 8) * 4 + r / 8;  // eight neighbouring threads: eight neighbouring columns
    float v = red[e * 32 + l];
    for (int w = 1; w < warps; ++w)
      v += red[w * kWarpFloats + e * 32 + l];
    const int i = e % 4, nt = (e / 4) % NT, mt = e / (4 * NT);
    const int col = col0 + mt * 16 + (l / 4) + (i / 2) * 8;
    const int row = nt * 8 + (l % 4) * 2 + i % 2;
    if (col >= out || row >= rows) continue;
    const std::int64_t at = static_cast<std::int64_t>(row) * out + col;
    if (f32_out) {
      float* yf = static_cast<float*>(y);
      yf[at] = accumulate ? yf[at] + v : v;
    } else {
      static_cast<std::uint16_t*>(y)[at] = float_to_bf16(v);
    }
  }
}

template <int MT, int NT>
void launch(const std::uint16_t* x, int rows, int in, const GroupParams& g, bool f32, bool acc,
            int k_split, cudaStream_t s) {
  constexpr int kMaxSmem = kMaxWarps * kWarpSmemBytes;
  // 64 KiB at 8 warps: above the default 48 KiB of dynamic shared memory. Set once per kernel,
  // at its first launch.
  static const bool raised = [] {
    KVT_CUDA_CHECK(cudaFuncSetAttribute(mma_kernel<MT, NT>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    return true;
  }();
  (void)raised;
  const unsigned grid = static_cast<unsigned>(g.block_end[g.n - 1]);
  const std::size_t smem = static_cast<std::size_t>(k_split) * kWarpSmemBytes;
  mma_kernel<MT, NT><<<grid, k_split * 32, smem, s>>>(x, rows, in, g, f32, acc);
}

// The one dispatch point of the compile-time sizes: MT in {1, 2}, NT = ceil(rows / 8) in 1..8.
template <int MT, int NT = 1>
void launch_rows(const std::uint16_t* x, int rows, int in, const GroupParams& g, bool f32, bool acc,
                 int k_split, cudaStream_t s) {
  if constexpr (NT <= kMaxRowTiles) {
    if ((rows + 7) / 8 == NT) return launch<MT, NT>(x, rows, in, g, f32, acc, k_split, s);
    return launch_rows<MT, NT + 1>(x, rows, in, g, f32, acc, k_split, s);
  } else {
    throw std::invalid_argument("mma_gemm: unsupported rows = " + std::to_string(rows));
  }
}

void check_aligned(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    throw std::invalid_argument(std::string("mma_gemm: ") + what + " not 16-byte aligned");
}

void run(const std::uint16_t* x, int rows, int in, std::span<const ProjectionOutput> outputs,
         bool f32_out, bool accumulate, MmaTiling t, cudaStream_t s) {
  if (!mma_gemm_fits(rows, in))
    throw std::invalid_argument("mma_gemm: shape rows = " + std::to_string(rows) +
                                ", in = " + std::to_string(in));
  if (outputs.empty() || outputs.size() > static_cast<std::size_t>(kProjectionMaxGroup))
    throw std::invalid_argument("mma_gemm: 1.." + std::to_string(kProjectionMaxGroup) +
                                " outputs, got " + std::to_string(outputs.size()));
  if (t.col_tiles != 1 && t.col_tiles != 2)
    throw std::invalid_argument("mma_gemm: unsupported col_tiles = " + std::to_string(t.col_tiles));
  if (t.k_split != 1 && t.k_split != 2 && t.k_split != 4 && t.k_split != kMaxWarps)
    throw std::invalid_argument("mma_gemm: unsupported k_split = " + std::to_string(t.k_split));
  check_aligned(x, "x");
  GroupParams g{};
  int blocks = 0;
  for (const ProjectionOutput& o : outputs) {
    if (o.out <= 0) throw std::invalid_argument("mma_gemm: an output of no columns");
    check_aligned(o.w, "W");
    blocks += (o.out + t.col_tiles * 16 - 1) / (t.col_tiles * 16);
    g.m[g.n] = o;
    g.block_end[g.n++] = blocks;
  }
  if (t.col_tiles == 1)
    launch_rows<1>(x, rows, in, g, f32_out, accumulate, t.k_split, s);
  else
    launch_rows<2>(x, rows, in, g, f32_out, accumulate, t.k_split, s);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

}  // namespace

// Column tiles: a warp re-reads x for every 16 x col_tiles columns it computes, rows / (16 x
// col_tiles) bytes of x through L1 per byte of W. Up to 32 rows one tile keeps that at <= 2;
// above, two tiles do (at twice the accumulators: 64 registers at 64 rows).
// k_split: W of a projection is out x in; a warp a column tile over the whole K would leave the
// 2,560 columns of the output projection (in 6,144) to 160 warps, far too few to keep HBM
// busy. Splitting K over up to 8 warps a block gives every shape of the runner 8x the warps,
// while each slice keeps at least kMinSliceChunks chunks (one batch of loads in flight). It
// depends on `in` alone, so that a row's bits do not depend on the rows beside it.
MmaTiling mma_gemm_tiling(int rows, int in) {
  MmaTiling t;
  t.col_tiles = rows <= 32 ? 1 : 2;
  const int chunks = (in + 31) / 32;
  t.k_split = kMaxWarps;
  while (t.k_split > 1 && chunks < t.k_split * kMinSliceChunks)
    t.k_split /= 2;
  return t;
}

bool mma_gemm_fits(int rows, int in) {
  return rows >= 1 && rows <= kMmaMaxRows && in > 0 && in % 8 == 0;
}

void mma_gemm(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, void* y,
              bool f32_out, bool accumulate, cudaStream_t s) {
  if (out <= 0) return;
  const ProjectionOutput o{w, out, y};
  run(x, rows, in, {&o, 1}, f32_out, accumulate, mma_gemm_tiling(rows, in), s);
}

void mma_gemm_group(const std::uint16_t* x, int rows, int in,
                    std::span<const ProjectionOutput> outputs, cudaStream_t s) {
  run(x, rows, in, outputs, false, false, mma_gemm_tiling(rows, in), s);
}

void mma_gemm_tiled(const std::uint16_t* x, int rows, int in,
                    std::span<const ProjectionOutput> outputs, bool f32_out, bool accumulate,
                    MmaTiling t, cudaStream_t s) {
  run(x, rows, in, outputs, f32_out, accumulate, t, s);
}

}  // namespace kvtier::runner
