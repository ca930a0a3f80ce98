// Projections of up to 64 rows on tensor cores (mma_gemm.hpp).
#include <cooperative_groups.h>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "cuda/runner/mma_gemm.hpp"

#include "cuda/cuda_check.hpp"
#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::runner {

namespace {

namespace cg = cooperative_groups;
using qsa::detail::float_to_bf16;
using qsa::detail::mma_bf16;

constexpr int kMaxSplit = 8;        // k_split: blocks a cluster (the portable cluster size)
constexpr int kMaxRowTiles = 8;     // 8 rows a tile: kMmaMaxRows
constexpr int kMinSliceChunks = 8;  // see mma_gemm_tiling

// One launch for up to kProjectionMaxGroup matrices that read the same x: the grid is the
// concatenation of each matrix's column blocks (block_end: running ends, in column blocks; each
// is a cluster of k_split blocks), as in skinny_gemm.
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

constexpr int kWarps = 4;  // a block: 4 warps side by side over columns, one K slice

// The shared memory of a block: a ring of kStages chunk stages, each x's rows of the chunk
// ([NT x 8][32] bf16, 64 bytes a row) and every warp's weight rows ([warp][MT][2][32 lanes] x 16
// bytes); after the last chunk, the warps' partial sums ([warp][accumulator][lane] fp32).
template <int MT, int NT>
struct Smem {
  static constexpr int kXBytes = NT * 8 * 64;
  static constexpr int kWBytes = kWarps * MT * 2 * 32 * 16;
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kStages = 49152 / kStageBytes < 8 ? 49152 / kStageBytes : 8;
  static constexpr int kBytes = kStages * kStageBytes;  // <= 48 KiB: no opt-in needed
  static constexpr int kAcc = MT * NT * 4;
  static_assert(kStages >= 3);
  static_assert(kWarps * kAcc * 32 * 4 <= kBytes);
};

// K is walked in chunks of 32. Lane (g = lane / 4, t = lane % 4) takes 16 bytes (8 k values)
// at k = 32 c + 8 t of weight rows g and g + 8 of each 16-column tile and of x row g of each
// 8-row tile. A chunk is two m16n8k16 steps; step s feeds the mma the words {x, y} (s = 0) or
// {z, w} (s = 1) of those 16 bytes as the fragments' k pairs {2t, 2t+1} and {2t+8, 2t+9}. That
// permutes k inside the chunk, the same way for W (operand A) and x (operand B), so the sum is
// the product's, and every operand arrives with one 16-byte load and no shuffle.
//
// grid: for every matrix, its column blocks (kWarps x MT x 16 columns) x k_split; a cluster is
// the k_split blocks of one column block, block rank r summing the chunks of K slice r. In a
// block the warps take neighbouring columns and share the K slice, so x comes into shared memory
// once for all of them (x re-read from L2: rows / (64 MT) bytes a byte of W). Both stream by
// cp.async through the ring, kStages - 1 chunks in flight (28-24 KiB of weights a block, 4-5
// blocks an SM: what HBM rate needs). A lane reads back its own weight slots; the x stage is
// shared, so the block meets at a barrier before each chunk: the chunk has landed for all, and
// the slot the next copy fills has been read by all. At the end each block leaves its warps'
// partial sums in its shared memory and, after a cluster barrier, block r adds the r-th share of
// every element over the cluster's blocks (distributed shared memory) in rank order: the same
// sum whatever the timing.
template <int MT, int NT>
__global__ void __launch_bounds__(kWarps * 32)
    mma_kernel(const std::uint16_t* __restrict__ x, int rows, int in,
               const __grid_constant__ GroupParams g, bool f32_out, bool accumulate) {
  using L = Smem<MT, NT>;
  constexpr int kStages = L::kStages, kAcc = L::kAcc;
  extern __shared__ uint4 smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int block = static_cast<int>(blockIdx.x) / splits;  // column block over all matrices
  int j = 0;
  while (j + 1 < g.n && block >= g.block_end[j])
    ++j;
  const int first = j == 0 ? 0 : g.block_end[j - 1];
  const int out = g.m[j].out;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int gr = lane / 4, tg = lane % 4;
  const int col0 = (block - first) * kWarps * MT * 16 + warp * MT * 16;  // this warp's
  const int chunks = (in + 31) / 32;
  const int per = (chunks + splits - 1) / splits;
  const int c_begin = rank * per;
  const int c_end = min(chunks, c_begin + per);

  // This lane's weight rows at its 16 bytes of chunk 0; rows past the end clamped (never read).
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
  // The x pieces this thread copies for each chunk: piece p = tid + 128 i is row p / 4, 16 bytes
  // p % 4 (NT x 32 pieces: one or two a thread).
  constexpr int kXPer = (NT * 32 + kWarps * 32 - 1) / (kWarps * 32);
  const uint4* xsrc[kXPer];
  bool xcopy[kXPer], xok[kXPer];
#pragma unroll
  for (int i = 0; i < kXPer; ++i) {
    const int p = tid + i * kWarps * 32, row = p / 4;
    xcopy[i] = row < NT * 8;
    xok[i] = row < rows;
    xsrc[i] =
        reinterpret_cast<const uint4*>(x + static_cast<std::int64_t>(min(row, rows - 1)) * in) +
        p % 4;
  }
  auto stage = [&](int c) {
    return reinterpret_cast<unsigned char*>(smem) + (c % kStages) * L::kStageBytes;
  };
  // Chunk c into its stage; past the slice nothing (an empty group keeps the count).
  auto issue = [&](int c) {
    if (c >= c_end) return;
    unsigned char* st = stage(c);
#pragma unroll
    for (int i = 0; i < kXPer; ++i) {
      if (!xcopy[i]) continue;
      const bool kin = c * 32 + (tid % 4) * 8 < in;  // (p % 4 == tid % 4)
      cp_async16(st + (tid + i * kWarps * 32) * 16, kin ? xsrc[i] + c * 4 : xsrc[i], kin && xok[i]);
    }
    const bool kin = c * 32 + tg * 8 < in;
    uint4* ws = reinterpret_cast<uint4*>(st + L::kXBytes) + warp * MT * 2 * 32 + lane;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        cp_async16(ws + (mt * 2 + h) * 32, kin ? wr[mt][h] + c * 4 : wr[mt][h], kin && wok[mt][h]);
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
  for (int c = c_begin; c < c_end; ++c) {
    cp_async_wait<kStages - 2>();  // this thread's copies of chunk c have landed
    __syncthreads();               // everyone's; and everyone has read the stage of chunk c - 1
    issue(c + kStages - 1);        // into that stage
    cp_async_commit();
    const unsigned char* st = stage(c);
    const uint4* ws = reinterpret_cast<const uint4*>(st + L::kXBytes) + warp * MT * 2 * 32 + lane;
    const uint4* xs = reinterpret_cast<const uint4*>(st) + gr * 4 + tg;
    uint4 wv[MT][2], xv[NT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        wv[mt][h] = ws[(mt * 2 + h) * 32];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      xv[nt] = xs[nt * 32];  // row 8 nt + g: 4 words of 16 bytes a row
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
  __syncthreads();     // and no thread may still read a stage

  // Accumulator (mt, nt, i) of lane (g, t) is column col0 + 16 mt + g + 8 (i / 2) of row
  // 8 nt + 2 t + i % 2 (the m16n8 C fragment).
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        red[(warp * kAcc + (mt * NT + nt) * 4 + i) * 32 + lane] = acc[mt][nt][i];
  cluster.sync();  // every block's partial sums are in place
  constexpr int kElems = kWarps * kAcc * 32;
  const int share = kElems / splits;  // kElems is a multiple of 512: any split of 1..8 divides it
  void* y = g.m[j].y;
  for (int p = rank * share + tid; p < (rank + 1) * share; p += kWarps * 32) {
    const int w = p / (kAcc * 32), e = (p / 32) % kAcc, r = p % 32;
    const int l = (r % 8) * 4 + r / 8;  // eight neighbouring threads: eight neighbouring columns
    const int at_red = (w * kAcc + e) * 32 + l;
    float v = cluster.map_shared_rank(red, 0)[at_red];
    for (int q = 1; q < splits; ++q)
      v += cluster.map_shared_rank(red, q)[at_red];
    const int i = e % 4, nt = (e / 4) % NT, mt = e / (4 * NT);
    const int col =
        (block - first) * kWarps * MT * 16 + w * MT * 16 + mt * 16 + (l / 4) + (i / 2) * 8;
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
  cluster.sync();  // no block leaves while another still reads its shared memory
}

template <int MT, int NT>
void launch(const std::uint16_t* x, int rows, int in, const GroupParams& g, bool f32, bool acc,
            int k_split, cudaStream_t s) {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(k_split);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(g.block_end[g.n - 1] * k_split));
  cfg.blockDim = dim3(kWarps * 32);
  cfg.dynamicSmemBytes = Smem<MT, NT>::kBytes;
  cfg.stream = s;
  cfg.attrs = &cluster;
  cfg.numAttrs = 1;
  KVT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, mma_kernel<MT, NT>, x, rows, in, g, f32, acc));
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
  if (t.k_split != 1 && t.k_split != 2 && t.k_split != 4 && t.k_split != kMaxSplit)
    throw std::invalid_argument("mma_gemm: unsupported k_split = " + std::to_string(t.k_split));
  check_aligned(x, "x");
  GroupParams g{};
  int blocks = 0;
  for (const ProjectionOutput& o : outputs) {
    if (o.out <= 0) throw std::invalid_argument("mma_gemm: an output of no columns");
    check_aligned(o.w, "W");
    blocks += (o.out + kWarps * t.col_tiles * 16 - 1) / (kWarps * t.col_tiles * 16);
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

// The tiling, measured on the H200 (bench_projections sweep, bench/results/
// projections-h200-2026-12-01.md): what matters is how many blocks the launch has.
// k_split: the output projection (2,560 columns, in 6,144) has 40 column blocks of one tile, far
// too few to keep HBM busy: split over 8 blocks it ran 42 -> 14 us at 9 rows. The six grouped
// projections (13,952 columns: 218 column blocks) ran fastest unsplit (26 us against 28 split
// 8 ways: splitting costs the partial sums' adds and shorter pipelines). So K splits in powers of
// two until the launch has kMinBlocks blocks, at most 8 ways (the portable cluster size), each
// slice keeping at least kMinSliceChunks chunks (the ring's depth).
// col_tiles: a block reads x from L2 once for its 64 x col_tiles columns, rows / (64 col_tiles)
// bytes of x a byte of W, and each warp reads it again from shared memory (rows / (16
// col_tiles)). Past 32 rows two tiles pay where columns are many (the grouped six at 64 rows: 38
// against 54 us), not where they are few (the output projection at 64 rows: 25 against 24 us:
// fewer blocks), hence kTwoTileColumns: 100 column blocks of two tiles.
MmaTiling mma_gemm_tiling(int rows, int in, std::span<const ProjectionOutput> outputs) {
  constexpr int kMinBlocks = 200;
  constexpr int kTwoTileColumns = 100 * kWarps * 2 * 16;
  int columns = 0;
  for (const ProjectionOutput& o : outputs)
    columns += o.out;
  MmaTiling t;
  t.col_tiles = rows > 32 && columns >= kTwoTileColumns ? 2 : 1;
  const int per_block = kWarps * t.col_tiles * 16;
  int blocks = 0;
  for (const ProjectionOutput& o : outputs)
    blocks += (o.out + per_block - 1) / per_block;
  const int chunks = (in + 31) / 32;
  t.k_split = 1;
  while (t.k_split < kMaxSplit && blocks * t.k_split < kMinBlocks &&
         chunks >= 2 * t.k_split * kMinSliceChunks)
    t.k_split *= 2;
  return t;
}

bool mma_gemm_fits(int rows, int in) {
  return rows >= 1 && rows <= kMmaMaxRows && in > 0 && in % 8 == 0;
}

void mma_gemm(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, void* y,
              bool f32_out, bool accumulate, cudaStream_t s) {
  if (out <= 0) return;
  const ProjectionOutput o{w, out, y};
  run(x, rows, in, {&o, 1}, f32_out, accumulate, mma_gemm_tiling(rows, in, {&o, 1}), s);
}

void mma_gemm_group(const std::uint16_t* x, int rows, int in,
                    std::span<const ProjectionOutput> outputs, cudaStream_t s) {
  run(x, rows, in, outputs, false, false, mma_gemm_tiling(rows, in, outputs), s);
}

void mma_gemm_tiled(const std::uint16_t* x, int rows, int in,
                    std::span<const ProjectionOutput> outputs, bool f32_out, bool accumulate,
                    MmaTiling t, cudaStream_t s) {
  run(x, rows, in, outputs, f32_out, accumulate, t, s);
}

}  // namespace kvtier::runner
