// Index scoring: logits[r][b] = sum_h relu(q_h . k_b) / sqrt(128).
//
// Three kernels, chosen by shape in index_scores (why each: bench/results/kernel-choices.md):
//
// Main kernel (`index_mma_kernel`, 4 index heads, more than 16 rows): a CTA owns 128 rows (8 warps
// x 16 rows) and a chunk of blocks. Each warp keeps the A fragments of its 16 rows x 4 heads x 128
// dims in registers for the whole chunk (loaded once); the slab rows stream through shared memory
// in tiles of 64 blocks (cp.async, 4 stages, XOR-swizzled 16-byte chunks: conflict-free
// ldmatrix). Per 32 blocks a warp runs 8 k-steps x 4 heads x 4 n-tiles of mma.sync m16n8k16 (bf16
// in, fp32 accumulate; 16 independent accumulators: 238 registers, no spill), applies relu + the
// sum over heads (in head order, from 0.0f, then the scale: the same operations and order as the
// WMMA kernel) and stores the fp32 scores as 16-byte rows after one shuffle. Entries at or beyond
// a row's visible blocks are never written; 16-block groups beyond the warp's rows' visibility
// are skipped (causal). CTAs whose rows span several requests score on the CUDA cores.
//
// Decode kernel (`index_decode_kernel`, 4 index heads, at most 16 rows): the same mma.sync
// fragments and order (the same bits per row), shaped for few rows: see below.
//
// General kernel (`index_wmma_kernel`, any other head count, 1 .. 16): 64 x 64 tiles, WMMA
// 16x16x16 from padded shared memory, the Q tile reloaded per head.
#include <mma.h>

#include <algorithm>

#include "cuda/qsa/qsa_common.cuh"
#include "model/cost_model.hpp"

namespace kvtier::qsa {

namespace {

constexpr int kTileRows = 64;
constexpr int kTileBlocks = 64;
constexpr int kLd = kIndexDim + 8;  // padded smem row (bf16 elements), multiple of 8 for WMMA
constexpr int kLdOut = kTileBlocks + 4;
constexpr int kThreads = 128;
constexpr int kRatio = 4;

struct IndexParams {
  const std::uint16_t* iq;
  int heads;
  Rows rows;
  const std::uint16_t* slab;
  std::int64_t slab_stride;
  float* logits;
  std::int64_t logit_stride;
};

__device__ __forceinline__ std::int64_t visible(const IndexParams& p, int r) {
  return (std::int64_t{p.rows.pos[r]} + 1) / kRatio;
}

// Row r's score of block b on the CUDA cores, fp32 in head order (the fallback of the tensor-
// core kernels for CTAs whose rows belong to several requests).
__device__ __forceinline__ float cuda_core_score(const IndexParams& p, int r, std::int64_t b,
                                                 float inv_sqrt) {
  const std::uint16_t* k = p.slab + (std::int64_t{p.rows.req[r]} * p.slab_stride + b) * kIndexDim;
  float score = 0.0f;
  for (int h = 0; h < p.heads; ++h) {
    const std::uint16_t* q = p.iq + (std::int64_t{r} * p.heads + h) * kIndexDim;
    float dot = 0.0f;
    for (int d = 0; d < kIndexDim; ++d)
      dot += detail::bf16_to_float(q[d]) * detail::bf16_to_float(k[d]);
    score += fmaxf(dot, 0.0f);
  }
  return score * inv_sqrt;
}

__global__ void __launch_bounds__(kThreads)
    index_wmma_kernel(const __grid_constant__ IndexParams p) {
  using namespace nvcuda;
  __shared__ __align__(128) unsigned char smem_q[kTileRows * kLd * 2];  // Q tile, then scores
  __shared__ __align__(128) __nv_bfloat16 ks[kTileBlocks * kLd];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem_q);
  float* out = reinterpret_cast<float*>(smem_q);
  static_assert(kTileRows * kLdOut * 4 <= kTileRows * kLd * 2, "scores fit the Q tile");

  const int r0 = blockIdx.y * kTileRows;
  const std::int64_t b0 = std::int64_t{blockIdx.x} * kTileBlocks;
  const int nr = min(kTileRows, p.rows.count - r0);
  std::int64_t max_vis = 0;
  for (int i = 0; i < nr; ++i)
    max_vis = max(max_vis, visible(p, r0 + i));
  if (b0 >= max_vis) return;  // causal: nothing visible in this tile
  const float inv_sqrt = rsqrtf(static_cast<float>(kIndexDim));
  const std::int32_t req = p.rows.req[r0];
  const bool one_request = p.rows.req[r0 + nr - 1] == req;

  if (!one_request) {
    for (int t = threadIdx.x; t < nr * kTileBlocks; t += kThreads) {
      const int i = t / kTileBlocks;
      const std::int64_t b = b0 + t % kTileBlocks;
      const int r = r0 + i;
      if (b >= visible(p, r)) continue;
      p.logits[std::int64_t{r} * p.logit_stride + b] = cuda_core_score(p, r, b, inv_sqrt);
    }
    return;
  }

  // K tile: blocks b0 .. b0 + 63 of the request, zero beyond the visible ones.
  constexpr int kVecs = kIndexDim / 8;  // uint4 per row
  for (int t = threadIdx.x; t < kTileBlocks * kVecs; t += kThreads) {
    const int j = t / kVecs, c = t % kVecs;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (b0 + j < max_vis)
      val = *reinterpret_cast<const uint4*>(
          p.slab + (std::int64_t{req} * p.slab_stride + b0 + j) * kIndexDim + c * 8);
    *reinterpret_cast<uint4*>(ks + j * kLd + c * 8) = val;
  }
  const int warp = threadIdx.x / 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> sum[kTileBlocks / 16];
  for (auto& f : sum)
    wmma::fill_fragment(f, 0.0f);
  for (int h = 0; h < p.heads; ++h) {
    __syncthreads();  // previous head's Q tile consumed (and K tile written, first time)
    for (int t = threadIdx.x; t < kTileRows * kVecs; t += kThreads) {
      const int i = t / kVecs, c = t % kVecs;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (i < nr)
        val = *reinterpret_cast<const uint4*>(
            p.iq + ((std::int64_t{r0} + i) * p.heads + h) * kIndexDim + c * 8);
      *reinterpret_cast<uint4*>(qs + i * kLd + c * 8) = val;
    }
    __syncthreads();
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kTileBlocks / 16];
    for (auto& f : acc)
      wmma::fill_fragment(f, 0.0f);
#pragma unroll
    for (int kk = 0; kk < kIndexDim / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
      wmma::load_matrix_sync(a, qs + warp * 16 * kLd + kk * 16, kLd);
#pragma unroll
      for (int j = 0; j < kTileBlocks / 16; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(b, ks + j * 16 * kLd + kk * 16, kLd);
        wmma::mma_sync(acc[j], a, b, acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kTileBlocks / 16; ++j)
      for (int e = 0; e < acc[j].num_elements; ++e)
        sum[j].x[e] += fmaxf(acc[j].x[e], 0.0f);
  }
  __syncthreads();  // Q tile no longer read: reuse it for the scores
#pragma unroll
  for (int j = 0; j < kTileBlocks / 16; ++j) {
    for (int e = 0; e < sum[j].num_elements; ++e)
      sum[j].x[e] *= inv_sqrt;
    wmma::store_matrix_sync(out + warp * 16 * kLdOut + j * 16, sum[j], kLdOut, wmma::mem_row_major);
  }
  __syncthreads();
  for (int t = threadIdx.x; t < nr * kTileBlocks; t += kThreads) {
    const int i = t / kTileBlocks, j = t % kTileBlocks;
    if (b0 + j < visible(p, r0 + i))
      p.logits[(std::int64_t{r0} + i) * p.logit_stride + b0 + j] = out[i * kLdOut + j];
  }
}

// ---- Tensor-core kernel with the A fragments in registers (4 index heads) ----------------------
constexpr int kMmaHeads = 4;
constexpr int kMmaWarps = 8;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaRows = kMmaWarps * 16;  // rows of a CTA
constexpr int kSlabTile = 64;             // blocks per pipeline stage
constexpr int kMmaNt = 4;                 // n-tiles of 8 blocks per step: 32 blocks, 16 chains
constexpr int kSlabStages = 4;
constexpr int kRowChunks = kIndexDim / 8;  // 16-byte chunks of a slab row
constexpr std::size_t kMmaSmemBytes =
    std::size_t{kSlabStages} * kSlabTile * kIndexDim * sizeof(std::uint16_t);  // 64 KiB

__device__ __forceinline__ void store_scores(const IndexParams& p, int row, int vis, std::int64_t b,
                                             float4 v, bool vec) {
  if (b >= vis) return;
  float* dst = p.logits + std::int64_t{row} * p.logit_stride + b;
  if (b + 3 < vis && vec) {
    *reinterpret_cast<float4*>(dst) = v;
    return;
  }
  dst[0] = v.x;
  if (b + 1 < vis) dst[1] = v.y;
  if (b + 2 < vis) dst[2] = v.z;
  if (b + 3 < vis) dst[3] = v.w;
}

// The A fragments (m16n8k16 layout) of the index queries of rows ra and rb = ra + 8, every head
// and k-step (zero for a row the CTA does not own): loaded once, kept in registers.
__device__ __forceinline__ void load_query_fragments(const IndexParams& p, int ra, int rb,
                                                     bool has_a, bool has_b, int t,
                                                     unsigned (&qa)[kMmaHeads][kIndexDim / 16][4]) {
#pragma unroll
  for (int h = 0; h < kMmaHeads; ++h) {
    const std::uint16_t* qra = p.iq + (std::int64_t{ra} * p.heads + h) * kIndexDim + 2 * t;
    const std::uint16_t* qrb = p.iq + (std::int64_t{rb} * p.heads + h) * kIndexDim + 2 * t;
#pragma unroll
    for (int ks = 0; ks < kIndexDim / 16; ++ks) {
      qa[h][ks][0] = has_a ? *reinterpret_cast<const unsigned*>(qra + 16 * ks) : 0u;
      qa[h][ks][1] = has_b ? *reinterpret_cast<const unsigned*>(qrb + 16 * ks) : 0u;
      qa[h][ks][2] = has_a ? *reinterpret_cast<const unsigned*>(qra + 16 * ks + 8) : 0u;
      qa[h][ks][3] = has_b ? *reinterpret_cast<const unsigned*>(qrb + 16 * ks + 8) : 0u;
    }
  }
}

// Relu + sum over heads of n-tiles j0 and j0 + 1 (in head order from 0.0f, then the scale, as
// the WMMA kernel), then the rows' stores. Lane t holds columns 2t, 2t+1 (n-tile j0) and 8+2t,
// 9+2t (n-tile j0 + 1) of rows ra, rb; after one exchange with lane t ^ 1, even lanes hold
// 2t .. 2t+3, odd lanes 6+2t .. 9+2t, the 4 scores from block b on.
template <int kHeads, int kN>
__device__ __forceinline__ void store_tile_pair(const IndexParams& p,
                                                const float (&acc)[kHeads][kN][4], int j0,
                                                float inv_sqrt, bool odd, int ra, int vis_a, int rb,
                                                int vis_b, std::int64_t b, bool vec) {
  float s[2][4];
#pragma unroll
  for (int jn = 0; jn < 2; ++jn)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = 0.0f;
#pragma unroll
      for (int h = 0; h < kHeads; ++h)
        x += fmaxf(acc[h][j0 + jn][e], 0.0f);
      s[jn][e] = x * inv_sqrt;
    }
  const float sa0 = odd ? s[0][0] : s[1][0], sa1 = odd ? s[0][1] : s[1][1];
  const float sb0 = odd ? s[0][2] : s[1][2], sb1 = odd ? s[0][3] : s[1][3];
  const float ga0 = __shfl_xor_sync(0xffffffffu, sa0, 1);
  const float ga1 = __shfl_xor_sync(0xffffffffu, sa1, 1);
  const float gb0 = __shfl_xor_sync(0xffffffffu, sb0, 1);
  const float gb1 = __shfl_xor_sync(0xffffffffu, sb1, 1);
  const float4 oa =
      odd ? make_float4(ga0, ga1, s[1][0], s[1][1]) : make_float4(s[0][0], s[0][1], ga0, ga1);
  const float4 ob =
      odd ? make_float4(gb0, gb1, s[1][2], s[1][3]) : make_float4(s[0][2], s[0][3], gb0, gb1);
  store_scores(p, ra, vis_a, b, oa, vec);
  store_scores(p, rb, vis_b, b, ob, vec);
}

// grid: (block chunks, row tiles of 128); block: 8 warps; 64 KiB dynamic shared memory.
// `chunk`: blocks per CTA, a multiple of kSlabTile. `vec`: 16-byte aligned logit rows.
__global__ void __launch_bounds__(kMmaThreads, 1)
    index_mma_kernel(const __grid_constant__ IndexParams p, std::int64_t chunk, bool vec) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  std::uint16_t* slab_s = reinterpret_cast<std::uint16_t*>(smem_raw);
  __shared__ int s_vis;  // max visible blocks over the CTA's rows
  __shared__ int s_one;  // the rows belong to one request
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int r0 = blockIdx.y * kMmaRows;
  const int nr = min(kMmaRows, p.rows.count - r0);
  if (threadIdx.x == 0) {
    s_vis = 0;
    s_one = p.rows.req[r0] == p.rows.req[r0 + nr - 1];
  }
  __syncthreads();
  {
    int v = threadIdx.x < nr ? static_cast<int>(visible(p, r0 + threadIdx.x)) : 0;
    v = __reduce_max_sync(0xffffffffu, v);
    if (lane == 0 && v > 0) atomicMax(&s_vis, v);
  }
  __syncthreads();
  const std::int64_t max_vis = s_vis;
  const std::int64_t c0 = std::int64_t{blockIdx.x} * chunk;
  if (c0 >= max_vis) return;  // causal: nothing visible in this chunk (CTA-uniform)
  const std::int64_t c1 = min(c0 + chunk, max_vis);
  const float inv_sqrt = rsqrtf(static_cast<float>(kIndexDim));

  if (!s_one) {  // rows of several requests (decode batches): CUDA cores, as the WMMA kernel
    const std::int64_t span = c1 - c0;
    for (std::int64_t x = threadIdx.x; x < nr * span; x += kMmaThreads) {
      const int r = r0 + static_cast<int>(x / span);
      const std::int64_t b = c0 + x % span;
      if (b >= visible(p, r)) continue;
      p.logits[std::int64_t{r} * p.logit_stride + b] = cuda_core_score(p, r, b, inv_sqrt);
    }
    return;
  }

  const std::uint16_t* slab = p.slab + std::int64_t{p.rows.req[r0]} * p.slab_stride * kIndexDim;
  const int n_tiles = static_cast<int>((c1 - c0 + kSlabTile - 1) / kSlabTile);
  // Stage layout: [kSlabTile rows][16 chunks of 16 B], chunk c of row j at c ^ (j % 8).
  auto issue = [&](int tile, int stage) {
    const std::int64_t b0 = c0 + std::int64_t{tile} * kSlabTile;
    std::uint16_t* dst = slab_s + stage * kSlabTile * kIndexDim;
#pragma unroll
    for (int i = threadIdx.x; i < kSlabTile * kRowChunks; i += kMmaThreads) {
      const int j = i / kRowChunks, c = i % kRowChunks;
      const bool ok = b0 + j < c1;  // blocks past the visible ones: zero-filled, never read
      detail::cp_async16(dst + j * kIndexDim + ((c ^ (j & 7)) * 8),
                         slab + (ok ? b0 + j : c0) * kIndexDim + c * 8, ok);
    }
  };
#pragma unroll
  for (int st = 0; st < kSlabStages - 1; ++st) {
    if (st < n_tiles) issue(st, st);
    detail::cp_async_commit();
  }

  // A fragments of rows ra = 16 w + g and rb = ra + 8, all heads and k-steps (m16n8k16 layout).
  const int ra = r0 + warp * 16 + g, rb = ra + 8;
  const bool has_a = ra < r0 + nr, has_b = rb < r0 + nr;
  unsigned qa[kMmaHeads][kIndexDim / 16][4];
  load_query_fragments(p, ra, rb, has_a, has_b, t, qa);
  const int vis_a = has_a ? static_cast<int>(visible(p, ra)) : 0;
  const int vis_b = has_b ? static_cast<int>(visible(p, rb)) : 0;
  const int warp_vis = __reduce_max_sync(0xffffffffu, max(vis_a, vis_b));
  const bool odd = (t & 1) != 0;
  const int col = odd ? 6 + 2 * t : 2 * t;  // first of the 4 scores a lane stores per row

  for (int tile = 0; tile < n_tiles; ++tile) {
    detail::cp_async_wait<kSlabStages - 2>();
    __syncthreads();  // tile ready for all; every warp done with tile - 1's stage
    {
      const int nt = tile + kSlabStages - 1;
      if (nt < n_tiles) issue(nt, nt % kSlabStages);
      detail::cp_async_commit();
    }
    const std::uint16_t* st = slab_s + (tile % kSlabStages) * kSlabTile * kIndexDim;
    const std::int64_t b0 = c0 + std::int64_t{tile} * kSlabTile;
#pragma unroll 1
    for (int nn = 0; nn < kSlabTile / (8 * kMmaNt); ++nn) {
      const std::int64_t bn = b0 + 8 * kMmaNt * nn;
      if (bn >= warp_vis) break;  // warp-uniform: no row of the warp sees these blocks
      float acc[kMmaHeads][kMmaNt][4];
#pragma unroll
      for (int h = 0; h < kMmaHeads; ++h)
#pragma unroll
        for (int j = 0; j < kMmaNt; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[h][j][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kIndexDim / 16; ++ks) {
#pragma unroll
        for (int jp = 0; jp < kMmaNt / 2; ++jp) {
          // slab row this lane addresses for n-tiles 2 jp, 2 jp + 1
          const int j = 8 * kMmaNt * nn + 16 * jp + (lane / 16) * 8 + lane % 8;
          unsigned b[4];  // n-tile 2 jp: k 0-7, 8-15; n-tile 2 jp + 1: k 0-7, 8-15
          detail::ldmatrix_x4(b, st + j * kIndexDim + (((2 * ks + (lane / 8) % 2) ^ (j & 7)) * 8));
#pragma unroll
          for (int h = 0; h < kMmaHeads; ++h) {
            detail::mma_bf16(acc[h][2 * jp], qa[h][ks], b[0], b[1]);
            detail::mma_bf16(acc[h][2 * jp + 1], qa[h][ks], b[2], b[3]);
          }
        }
      }
#pragma unroll
      for (int jp = 0; jp < kMmaNt / 2; ++jp) {
        const std::int64_t bg = bn + 16 * jp;
        store_tile_pair(p, acc, 2 * jp, inv_sqrt, odd, ra, vis_a, rb, vis_b, bg + col, vec);
      }
    }
  }
  detail::cp_async_wait<0>();  // only empty groups can remain; leave nothing in flight
}

// ---- Decode kernel (few rows): the slab streamed once, per-warp pipelines ----------------------
// For 1 .. 16 rows the prefill kernel's 128-row CTAs are mostly idle. Here a group of up to 16
// consecutive rows of one request fills the 16 rows of one warp's A fragments, exactly as in
// index_mma_kernel (same mma.sync m16n8k16 operands in the same roles, the same k-step order,
// relu + head sum in head order from 0.0f, then the scale): a row scores the same bits here as
// in the prefill kernel. grid: (block chunks, rows); the CTAs of a group's rows share the
// chunk's 16-block tiles (so a row per request or many rows of one request keep the same grid);
// each warp streams its tiles through its own cp.async pipeline (kDecStages x 4 KiB), no
// block-wide barrier. Rows of different requests read different slabs, so every CTA serves one
// group only; a batch of many requests of a few rows each (batched decode) takes this kernel
// too, as long as no request has more rows than a group.
constexpr int kDecWarps = 4;
constexpr int kDecThreads = kDecWarps * 32;
constexpr int kDecStages = 4;
constexpr int kDecTile = 16;     // blocks per warp step
constexpr int kDecMaxRows = 16;  // index_scores takes this kernel at or below this many rows
constexpr int kDecGroup = 16;    // rows of one warp's A fragments
// The cost model prices the two kernels by this rule (IndexPath).
static_assert(kDecMaxRows == kIndexDecodeRows && kDecGroup == kIndexDecodeRows);
constexpr std::size_t kDecSmemBytes =
    std::size_t{kDecWarps} * kDecStages * kDecTile * kIndexDim * sizeof(std::uint16_t);  // 64 KiB

__global__ void __launch_bounds__(kDecThreads)
    index_decode_kernel(const __grid_constant__ IndexParams p, std::int64_t chunk, bool vec) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int r = blockIdx.y;
  // The group of row r: up to 16 consecutive rows of its request, from a leader.
  const std::int32_t req = p.rows.req[r];
  int start = r;
  while (start > 0 && p.rows.req[start - 1] == req)
    --start;
  const int lead = start + (r - start) / kDecGroup * kDecGroup;
  int nr = 1;
  while (nr < kDecGroup && lead + nr < p.rows.count && p.rows.req[lead + nr] == req)
    ++nr;
  const int share = r - lead;  // this CTA's share of the chunk among the group's CTAs

  const int ra = lead + g, rb = ra + 8;
  const bool has_a = g < nr, has_b = g + 8 < nr;
  const int vis_a = has_a ? static_cast<int>(visible(p, ra)) : 0;
  const int vis_b = has_b ? static_cast<int>(visible(p, rb)) : 0;
  const int group_vis = __reduce_max_sync(0xffffffffu, max(vis_a, vis_b));
  const std::int64_t c0 = std::int64_t{blockIdx.x} * chunk;
  if (c0 >= group_vis) return;
  const std::int64_t c1 = min(c0 + chunk, std::int64_t{group_vis});
  const std::int64_t tiles = (c1 - c0 + kDecTile - 1) / kDecTile;
  // The group's CTAs share the tiles, at least 8 per warp each (a warp loads the A fragments of
  // all the group's rows: 16 KiB for 16 rows); the CTAs beyond leave.
  const int active =
      static_cast<int>(min(std::int64_t{nr}, max(std::int64_t{1}, tiles / (8 * kDecWarps))));
  if (share >= active) return;
  const std::int64_t t0 = tiles * share / active, t1 = tiles * (share + 1) / active;
  // This warp's tiles: t0 + warp, t0 + warp + kDecWarps, ... below t1.
  const int mine = t0 + warp < t1 ? static_cast<int>((t1 - t0 - warp - 1) / kDecWarps + 1) : 0;
  if (mine == 0) return;  // warp-uniform; no block-wide barrier follows

  const std::uint16_t* slab = p.slab + std::int64_t{req} * p.slab_stride * kIndexDim;
  std::uint16_t* stages =
      reinterpret_cast<std::uint16_t*>(smem_raw) + warp * kDecStages * kDecTile * kIndexDim;
  // Stage layout: [16 rows][16 chunks of 16 B], chunk c of row j at c ^ (j % 8).
  auto issue = [&](int i, int stage) {
    const std::int64_t b0 = c0 + (t0 + warp + std::int64_t{i} * kDecWarps) * kDecTile;
    std::uint16_t* dst = stages + stage * kDecTile * kIndexDim;
#pragma unroll
    for (int q = lane; q < kDecTile * kRowChunks; q += 32) {
      const int j = q / kRowChunks, c = q % kRowChunks;
      const bool ok = b0 + j < c1;  // blocks past the visible ones: zero-filled, never stored
      detail::cp_async16(dst + j * kIndexDim + ((c ^ (j & 7)) * 8),
                         slab + (ok ? b0 + j : c0) * kIndexDim + c * 8, ok);
    }
  };
#pragma unroll
  for (int st = 0; st < kDecStages - 1; ++st) {
    if (st < mine) issue(st, st);
    detail::cp_async_commit();
  }

  unsigned qa[kMmaHeads][kIndexDim / 16][4];
  load_query_fragments(p, ra, rb, has_a, has_b, t, qa);
  const float inv_sqrt = rsqrtf(static_cast<float>(kIndexDim));
  const bool odd = (t & 1) != 0;
  const int col = odd ? 6 + 2 * t : 2 * t;  // first of the 4 scores a lane stores per row

#pragma unroll 1
  for (int i = 0; i < mine; ++i) {
    detail::cp_async_wait<kDecStages - 2>();
    __syncwarp();  // tile i visible to every lane; every lane done with tile i - 1's stage
    {
      const int ni = i + kDecStages - 1;
      if (ni < mine) issue(ni, ni % kDecStages);
      detail::cp_async_commit();
    }
    const std::uint16_t* st = stages + (i % kDecStages) * kDecTile * kIndexDim;
    const std::int64_t bg = c0 + (t0 + warp + std::int64_t{i} * kDecWarps) * kDecTile;
    float acc[kMmaHeads][2][4];
#pragma unroll
    for (int h = 0; h < kMmaHeads; ++h)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[h][j][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kIndexDim / 16; ++ks) {
      const int j = (lane / 16) * 8 + lane % 8;
      unsigned b[4];  // n-tile 0: k 0-7, 8-15; n-tile 1: k 0-7, 8-15
      detail::ldmatrix_x4(b, st + j * kIndexDim + (((2 * ks + (lane / 8) % 2) ^ (j & 7)) * 8));
#pragma unroll
      for (int h = 0; h < kMmaHeads; ++h) {
        detail::mma_bf16(acc[h][0], qa[h][ks], b[0], b[1]);
        detail::mma_bf16(acc[h][1], qa[h][ks], b[2], b[3]);
      }
    }
    // the same relu + head sum, exchange and stores as index_mma_kernel
    store_tile_pair(p, acc, 0, inv_sqrt, odd, ra, vis_a, rb, vis_b, bg + col, vec);
  }
  detail::cp_async_wait<0>();  // only empty groups can remain; leave nothing in flight
}

// Blocks per CTA of the decode kernel: at most two CTAs per SM over all rows (one wave), in whole
// warp tiles. The CTAs a row gets round down: rounding up sent 16 - 128 rows past the wave (32
// rows: 9 CTAs a row, 288 for 264 slots), whose last few CTAs then ran alone.
std::int64_t decode_chunk(int rows, std::int64_t max_blocks) {
  const int sms = sm_count();
  const std::int64_t per_row = std::max<std::int64_t>(1, 2 * sms / std::max(1, rows));
  const std::int64_t chunk = (max_blocks + per_row - 1) / per_row;
  constexpr std::int64_t kQuantum = kDecWarps * kDecTile;
  return std::max<std::int64_t>(kQuantum, (chunk + kQuantum - 1) / kQuantum * kQuantum);
}

void launch_decode(const IndexParams& p, std::int64_t max_blocks, bool vec, cudaStream_t s) {
  static const bool configured = [] {
    return cudaFuncSetAttribute(index_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kDecSmemBytes)) == cudaSuccess;
  }();
  if (!configured) KVT_CUDA_CHECK(cudaGetLastError());
  const std::int64_t chunk = decode_chunk(p.rows.count, max_blocks);
  const dim3 grid(static_cast<unsigned>((max_blocks + chunk - 1) / chunk),
                  static_cast<unsigned>(p.rows.count));
  index_decode_kernel<<<grid, kDecThreads, kDecSmemBytes, s>>>(p, chunk, vec);
}

// Blocks per CTA of the tensor-core kernel: about one wave (one CTA fits an SM) over the whole
// grid, in whole stages (the fastest chunk measured: bench/results/kernel-choices.md).
std::int64_t mma_chunk(int row_tiles, std::int64_t max_blocks) {
  const int sms = sm_count();
  const std::int64_t n_chunks = std::max<std::int64_t>(1, (sms + row_tiles / 2) / row_tiles);
  const std::int64_t chunk = (max_blocks + n_chunks - 1) / n_chunks;
  return std::max<std::int64_t>(kSlabTile, (chunk + kSlabTile - 1) / kSlabTile * kSlabTile);
}

void launch_mma(const dim3& grid, const IndexParams& p, std::int64_t chunk, bool vec,
                cudaStream_t s) {
  static const bool configured = [] {
    return cudaFuncSetAttribute(index_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kMmaSmemBytes)) == cudaSuccess;
  }();
  if (!configured) KVT_CUDA_CHECK(cudaGetLastError());
  index_mma_kernel<<<grid, kMmaThreads, kMmaSmemBytes, s>>>(p, chunk, vec);
}

}  // namespace

void index_scores(const std::uint16_t* iq, int heads, Rows rows, const std::uint16_t* slab,
                  std::int64_t slab_stride, float* logits, std::int64_t logit_stride,
                  std::int64_t max_blocks, cudaStream_t s, int rows_per_request) {
  detail::require(heads >= 1 && heads <= 16, "index heads", heads);
  detail::require(max_blocks <= logit_stride, "max_blocks (> logit_stride)", max_blocks);
  detail::require((rows.count + kTileRows - 1) / kTileRows <= 65535, "rows", rows.count);
  if (rows.count == 0 || max_blocks <= 0) return;
  const IndexParams p{iq, heads, rows, slab, slab_stride, logits, logit_stride};
  const bool vec = logit_stride % 4 == 0 && reinterpret_cast<std::uintptr_t>(logits) % 16 == 0;
  if (heads != kMmaHeads) {
    const dim3 grid(static_cast<unsigned>((max_blocks + kTileBlocks - 1) / kTileBlocks),
                    static_cast<unsigned>((rows.count + kTileRows - 1) / kTileRows));
    index_wmma_kernel<<<grid, kThreads, 0, s>>>(p);
  } else if (rows.count <= kDecMaxRows ||
             (rows_per_request >= 1 && rows_per_request <= kDecGroup)) {
    // Few rows, or many requests of few rows each (batched decode): the decode kernel's groups
    // are one request's rows, where the prefill kernel's 128-row tiles would span requests.
    launch_decode(p, max_blocks, vec, s);
  } else {
    const int row_tiles = (rows.count + kMmaRows - 1) / kMmaRows;
    const std::int64_t chunk = mma_chunk(row_tiles, max_blocks);
    const dim3 grid(static_cast<unsigned>((max_blocks + chunk - 1) / chunk),
                    static_cast<unsigned>(row_tiles));
    launch_mma(grid, p, chunk, vec, s);
  }
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::qsa
