// attend: sparse paged GQA attention split over the selected tokens, merged by fp32 LSE;
// fold: merge passes over disjoint token windows by their LSE.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::qsa {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kPerLane = kHeadDim / 32;  // 8 dims of a head per lane
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -__builtin_huge_valf();

struct AttendParams {
  const std::uint16_t* q;
  int q_heads;
  Rows rows;
  const std::int32_t* tokens;
  int width;
  KvBanks kv;
  PageTable table;
  int splits;
  float* work_acc;  // [rows][q_heads][splits][256]
  float* work_ml;   // [rows][q_heads][splits][2]
  bool kv_inner;    // grid (kv_heads, splits, rows) instead of (splits, kv_heads, rows)
};

template <bool kFp8>
__device__ __forceinline__ void load_row(const KvBanks& kv, const void* base, const float* scales,
                                         std::int64_t token, int kvh, int lane, float* out) {
  const std::int64_t elem = (token * kv.kv_heads + kvh) * kHeadDim + lane * kPerLane;
  if constexpr (kFp8) {
    const uint2 raw =
        *reinterpret_cast<const uint2*>(static_cast<const std::uint8_t*>(base) + elem);
    const float scale = scales[token * kv.kv_heads + kvh];
    const __nv_fp8x2_storage_t* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerLane / 2; ++j) {
      const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[j], __NV_E4M3)));
      out[2 * j] = f.x * scale;
      out[2 * j + 1] = f.y * scale;
    }
  } else {
    const uint4 raw =
        *reinterpret_cast<const uint4*>(static_cast<const std::uint16_t*>(base) + elem);
    const std::uint16_t* h = reinterpret_cast<const std::uint16_t*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      out[j] = detail::bf16_to_float(h[j]);
  }
}

// grid: (splits, kv_heads, rows); block: 4 warps. The CTA owns the kGroup query heads of one KV
// head and a contiguous slice of the row's token list; warp w takes tokens w, w + 4, ... of the
// slice, two at a time, keeping an online softmax per head (every lane holds the same m and l,
// and 8 dims of each head's accumulator). The warps merge in shared memory in warp order
// (deterministic), and the CTA writes its partial (acc, m, l) for the merge kernel.
template <int kGroup, bool kFp8>
__global__ void __launch_bounds__(kThreads) attend_kernel(const __grid_constant__ AttendParams p) {
  __shared__ __align__(16) float qs[kGroup][kHeadDim];
  __shared__ __align__(16) float acc_s[kGroup][kHeadDim];
  __shared__ float ml_s[kWarps][kGroup][2];
  const int split = p.kv_inner ? blockIdx.y : blockIdx.x;
  const int kvh = p.kv_inner ? blockIdx.x : blockIdx.y, r = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float qscale = rsqrtf(static_cast<float>(kHeadDim)) * kLog2e;
  for (int t = threadIdx.x; t < kGroup * kHeadDim; t += kThreads) {
    const int g = t / kHeadDim, d = t % kHeadDim;
    qs[g][d] = detail::bf16_to_float(
                   p.q[(std::int64_t{r} * p.q_heads + kvh * kGroup + g) * kHeadDim + d]) *
               qscale;
  }
  __syncthreads();

  const int chunk = (p.width + p.splits - 1) / p.splits;
  const int t0 = split * chunk, t1 = min(p.width, t0 + chunk);
  const std::int32_t* toks = p.tokens + std::int64_t{r} * p.width;
  const std::int32_t* pages = p.table.pages + std::int64_t{p.rows.req[r]} * p.table.stride;
  const void* kbase = p.kv.k;
  const void* vbase = p.kv.v;

  float m[kGroup], l[kGroup], acc[kGroup][kPerLane];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    m[g] = kNegInf;
    l[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      acc[g][j] = 0.0f;
  }
  for (int j0 = t0 + warp; j0 < t1; j0 += 2 * kWarps) {
    float kf[2][kPerLane], vf[2][kPerLane];
    bool valid[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int j = j0 + u * kWarps;
      const std::int32_t tok = j < t1 ? toks[j] : -1;
      valid[u] = tok >= 0;
      if (valid[u]) {
        std::int32_t page = pages[tok / p.kv.page_size];
        if (page < 0) page = p.table.dummy;
        const std::int64_t token = std::int64_t{page} * p.kv.page_size + tok % p.kv.page_size;
        load_row<kFp8>(p.kv, kbase, p.kv.k_scale, token, kvh, lane, kf[u]);
        load_row<kFp8>(p.kv, vbase, p.kv.v_scale, token, kvh, lane, vf[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (!valid[u]) continue;  // warp-uniform
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float4 qa = *reinterpret_cast<const float4*>(&qs[g][lane * kPerLane]);
        const float4 qb = *reinterpret_cast<const float4*>(&qs[g][lane * kPerLane + 4]);
        float s = qa.x * kf[u][0] + qa.y * kf[u][1] + qa.z * kf[u][2] + qa.w * kf[u][3] +
                  qb.x * kf[u][4] + qb.y * kf[u][5] + qb.z * kf[u][6] + qb.w * kf[u][7];
        s = detail::warp_sum(s);
        const float m_new = fmaxf(m[g], s);
        const float alpha = exp2f(m[g] - m_new);  // 0 when m was -inf
        const float pr = exp2f(s - m_new);
        l[g] = l[g] * alpha + pr;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j)
          acc[g][j] = acc[g][j] * alpha + pr * vf[u][j];
        m[g] = m_new;
      }
    }
  }
  if (lane == 0)
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      ml_s[warp][g][0] = m[g];
      ml_s[warp][g][1] = l[g];
    }
  __syncthreads();
  float f[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    float mx = kNegInf;
    for (int w = 0; w < kWarps; ++w)
      mx = fmaxf(mx, ml_s[w][g][0]);
    f[g] = m[g] == kNegInf ? 0.0f : exp2f(m[g] - mx);
  }
  for (int w = 0; w < kWarps; ++w) {
    if (w == warp)
#pragma unroll
      for (int g = 0; g < kGroup; ++g)
#pragma unroll
        for (int j = 0; j < kPerLane; ++j) {
          const float prev = w == 0 ? 0.0f : acc_s[g][lane * kPerLane + j];
          acc_s[g][lane * kPerLane + j] = prev + acc[g][j] * f[g];
        }
    __syncthreads();
  }
  const std::int64_t row_head0 = std::int64_t{r} * p.q_heads + kvh * kGroup;
  for (int t = threadIdx.x; t < kGroup * kHeadDim; t += kThreads) {
    const int g = t / kHeadDim, d = t % kHeadDim;
    p.work_acc[((row_head0 + g) * p.splits + split) * kHeadDim + d] = acc_s[g][d];
  }
  if (threadIdx.x < kGroup) {
    const int g = threadIdx.x;
    float mx = kNegInf, sum = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      mx = fmaxf(mx, ml_s[w][g][0]);
    for (int w = 0; w < kWarps; ++w)
      if (ml_s[w][g][0] != kNegInf) sum += ml_s[w][g][1] * exp2f(ml_s[w][g][0] - mx);
    p.work_ml[((row_head0 + g) * p.splits + split) * 2] = mx;
    p.work_ml[((row_head0 + g) * p.splits + split) * 2 + 1] = sum;
  }
}

// ---- Tensor-core attend (bf16 banks) ------------------------------------------------------------
// grid: (splits, kv_heads, rows); block: 4 warps; dynamic shared memory (kStages stages of a
// tile of kTile tokens of K and V, plus the tile's scores). The CTA walks its slice of the row's
// token list tile by tile; the tiles are gathered into shared memory by cp.async (16-byte
// copies, one 512-byte K or V row per warp instruction), kStages - 1 tiles ahead of the one
// computed. Per tile:
//   q.k  on tensor cores (mma m16n8k16 bf16, fp32 accumulate): A = the 12 query heads of the KV
//        head padded to 16 rows (kept in registers), B = K rows; warp w scores tokens 8w..8w+7;
//        products of bf16 are exact, so the scores are fp32 dot products;
//   softmax: every warp reads all 32 scores of its heads from shared memory and keeps the same
//        online (m, l) in fp32 (same inputs, same order: identical bits in every warp);
//   p.v  on tensor cores: warp w owns dims 64w..64w+63 of the 16 x 256 accumulator; the fp32
//        probabilities go in as two bf16 terms (hi + lo, error <= 2^-18 relative), so the output
//        stays within fp32-path accuracy (tests: 2e-5 against fp64).
// Deterministic: no atomics; fixed order everywhere.
constexpr int kTile = 32;
constexpr int kStages = 3;
constexpr int kRowPad = kHeadDim + 8;  // bf16 per shared row: 528 B, conflict-free ldmatrix
constexpr int kSPad = kTile + 4;

constexpr int kMapCap = 2048;  // tokens of a segment whose bank rows are looked up up front

template <int kSt>
struct MmaSmem {
  std::uint16_t k[kSt][kTile][kRowPad];
  std::uint16_t v[kSt][kTile][kRowPad];
  float s[16][kSPad];
};
// With the map: the physical bank row (page * page_size + offset, -1 = no token) of each token
// of the current segment of the CTA's slice, filled once per segment, so the gather of a tile
// issues its copies without waiting on the token list and page table loads.
template <int kSt>
struct MmaSmemMap {
  MmaSmem<kSt> base;
  std::int32_t map[kMapCap];
};

using detail::cp_async16;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::ldmatrix_x4;
using detail::ldmatrix_x4_trans;
using detail::mma_bf16;

// Two fp32 -> packed bf16 pair (x in the low half); hi + lo split of each.
__device__ __forceinline__ unsigned pack_bf16(float x, float y) {
  return static_cast<unsigned>(detail::float_to_bf16(x)) |
         (static_cast<unsigned>(detail::float_to_bf16(y)) << 16);
}
__device__ __forceinline__ void split_pair(float x, float y, unsigned& hi, unsigned& lo) {
  hi = pack_bf16(x, y);
  const float xh = detail::bf16_to_float(static_cast<std::uint16_t>(hi & 0xffffu));
  const float yh = detail::bf16_to_float(static_cast<std::uint16_t>(hi >> 16));
  lo = pack_bf16(x - xh, y - yh);
}

// kAsync: cp.async gather (device banks); otherwise 16-byte register loads then shared stores
// (faster over the host link). kMap: bank rows looked up per segment into shared memory (else
// per tile, in the gather).
// kSt: pipeline stages (3: two CTAs fit an SM; more: one CTA per SM, more tiles in flight).
template <bool kAsync, bool kMap, int kSt = kStages>
__global__ void __launch_bounds__(kThreads, 2)
    attend_mma_kernel(const __grid_constant__ AttendParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  MmaSmem<kSt>& sm = *reinterpret_cast<MmaSmem<kSt>*>(smem_raw);
  std::int32_t* map = reinterpret_cast<MmaSmemMap<kSt>*>(smem_raw)->map;  // only with kMap
  const int split = p.kv_inner ? blockIdx.y : blockIdx.x;
  const int kvh = p.kv_inner ? blockIdx.x : blockIdx.y, r = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const float qscale = rsqrtf(static_cast<float>(kHeadDim)) * kLog2e;
  // The merge kernel (launched as a programmatic dependent) may start now: it waits for this
  // grid's completion and memory (griddepcontrol.wait) before reading the partials.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // Q fragments (A of q.k): rows = heads (12 real, 4 zero), k = dims, 16 k-steps.
  const std::uint16_t* qrow = p.q + (std::int64_t{r} * p.q_heads + kvh * 12) * kHeadDim;
  unsigned qa[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int d = 16 * j + 2 * t;
    qa[j][0] = *reinterpret_cast<const unsigned*>(qrow + g * kHeadDim + d);
    qa[j][1] = g + 8 < 12 ? *reinterpret_cast<const unsigned*>(qrow + (g + 8) * kHeadDim + d) : 0u;
    qa[j][2] = *reinterpret_cast<const unsigned*>(qrow + g * kHeadDim + d + 8);
    qa[j][3] =
        g + 8 < 12 ? *reinterpret_cast<const unsigned*>(qrow + (g + 8) * kHeadDim + d + 8) : 0u;
  }

  const int chunk = (p.width + p.splits - 1) / p.splits;
  const int t0 = min(p.width, split * chunk), t1 = min(p.width, t0 + chunk);
  const std::int32_t* toks = p.tokens + std::int64_t{r} * p.width;
  const std::int32_t* pages = p.table.pages + std::int64_t{p.rows.req[r]} * p.table.stride;
  const std::uint16_t* kbase = static_cast<const std::uint16_t*>(p.kv.k);
  const std::uint16_t* vbase = static_cast<const std::uint16_t*>(p.kv.v);

  // Warp w gathers tokens w, w + 4, ... of the tile; lane = 16-byte chunk of the 512-byte row.
  int lo = t0, hi = t1;  // the current segment of the slice
  auto issue = [&](int tile, int stage) {
#pragma unroll
    for (int i = 0; i < kTile / kWarps; ++i) {
      const int row = warp + kWarps * i;
      const int j = lo + tile * kTile + row;
      std::int32_t tok = -1;
      std::int64_t elem = 0;
      if constexpr (kMap) {
        const std::int32_t bank_row = j < hi ? map[j - lo] : -1;
        tok = bank_row;
        if (bank_row >= 0)
          elem = (std::int64_t{bank_row} * p.kv.kv_heads + kvh) * kHeadDim + lane * 8;
      } else {
        tok = j < hi ? toks[j] : -1;
        if (tok >= 0) {
          std::int32_t page = pages[tok / p.kv.page_size];
          if (page < 0) page = p.table.dummy;
          const std::int64_t token = std::int64_t{page} * p.kv.page_size + tok % p.kv.page_size;
          elem = (token * p.kv.kv_heads + kvh) * kHeadDim + lane * 8;
        }
      }
      if constexpr (kAsync) {
        cp_async16(&sm.k[stage][row][lane * 8], kbase + elem, tok >= 0);
        cp_async16(&sm.v[stage][row][lane * 8], vbase + elem, tok >= 0);
      } else {
        uint4 a = make_uint4(0, 0, 0, 0), b = a;
        if (tok >= 0) {
          a = *reinterpret_cast<const uint4*>(kbase + elem);
          b = *reinterpret_cast<const uint4*>(vbase + elem);
        }
        *reinterpret_cast<uint4*>(&sm.k[stage][row][lane * 8]) = a;
        *reinterpret_cast<uint4*>(&sm.v[stage][row][lane * 8]) = b;
      }
    }
  };

  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};  // heads g and g + 8
  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      acc[i][c] = 0.0f;

  const int seg_step = kMap ? kMapCap : max(1, t1 - t0);
  for (lo = t0; lo < t1; lo += seg_step) {
    hi = min(t1, lo + seg_step);
    const int n_tiles = (hi - lo + kTile - 1) / kTile;
    if constexpr (kMap) {
      __syncthreads();  // every warp done with the previous segment (map, stages, scores)
      for (int i = threadIdx.x; i < hi - lo; i += kThreads) {
        const std::int32_t tok = toks[lo + i];
        std::int32_t bank_row = -1;
        if (tok >= 0) {
          std::int32_t page = pages[tok / p.kv.page_size];
          if (page < 0) page = p.table.dummy;
          bank_row = page * p.kv.page_size + tok % p.kv.page_size;
        }
        map[i] = bank_row;
      }
      __syncthreads();
    }
#pragma unroll
    for (int st = 0; st < kSt - 1; ++st) {
      if (st < n_tiles) issue(st, st);
      if constexpr (kAsync) cp_async_commit();
    }
    for (int tile = 0; tile < n_tiles; ++tile) {
      if constexpr (kAsync) cp_async_wait<kSt - 2>();
      __syncthreads();  // tile ready for all; every warp done with tile - 1 (its stage, sm.s)
      {
        const int nt = tile + kSt - 1;
        if (nt < n_tiles) issue(nt, nt % kSt);
        if constexpr (kAsync) cp_async_commit();
      }
      const int stage = tile % kSt;
      // q.k: warp w scores tokens 8w .. 8w + 7 of the tile.
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        unsigned b[4];
        ldmatrix_x4(b, &sm.k[stage][8 * warp + lane % 8][32 * jj + 8 * (lane / 8)]);
        mma_bf16(sc, qa[2 * jj], b[0], b[1]);
        mma_bf16(sc, qa[2 * jj + 1], b[2], b[3]);
      }
      {
        const int j = lo + tile * kTile + 8 * warp + 2 * t;
        bool v0, v1;
        if constexpr (kMap) {
          v0 = j < hi && map[j - lo] >= 0;
          v1 = j + 1 < hi && map[j + 1 - lo] >= 0;
        } else {
          v0 = j < hi && toks[j] >= 0;
          v1 = j + 1 < hi && toks[j + 1] >= 0;
        }
        *reinterpret_cast<float2*>(&sm.s[g][8 * warp + 2 * t]) =
            make_float2(v0 ? sc[0] * qscale : kNegInf, v1 ? sc[1] * qscale : kNegInf);
        *reinterpret_cast<float2*>(&sm.s[g + 8][8 * warp + 2 * t]) =
            make_float2(v0 ? sc[2] * qscale : kNegInf, v1 ? sc[3] * qscale : kNegInf);
      }
      __syncthreads();
      // Online softmax over the tile (rows g and g + 8; this thread's 8 of the 32 tokens, reduced
      // over the 4 lanes of the group by a butterfly: every lane and warp gets the same bits).
      float pv[2][2][4];  // [row][k-step][tokens 16kk + 2t, +1, +8, +9]
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          const float2 a = *reinterpret_cast<const float2*>(&sm.s[g + 8 * h][16 * kk + 2 * t]);
          const float2 b = *reinterpret_cast<const float2*>(&sm.s[g + 8 * h][16 * kk + 2 * t + 8]);
          pv[h][kk][0] = a.x;
          pv[h][kk][1] = a.y;
          pv[h][kk][2] = b.x;
          pv[h][kk][3] = b.y;
        }
        float mx = kNegInf;
#pragma unroll
        for (int kk = 0; kk < 2; ++kk)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            mx = fmaxf(mx, pv[h][kk][c]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx);
        const float m_use = m_new == kNegInf ? 0.0f : m_new;
        const float alpha = exp2f(m[h] - m_use);
        float sum = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 2; ++kk)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            pv[h][kk][c] = exp2f(pv[h][kk][c] - m_use);
            sum += pv[h][kk][c];
          }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l[h] = l[h] * alpha + sum;
        m[h] = m_new;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          acc[i][2 * h] *= alpha;
          acc[i][2 * h + 1] *= alpha;
        }
      }
      // p.v: warp w accumulates dims 64w .. 64w + 63 (8 n-tiles), two k-steps of 16 tokens.
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        unsigned ah[4], al[4];
        split_pair(pv[0][kk][0], pv[0][kk][1], ah[0], al[0]);
        split_pair(pv[1][kk][0], pv[1][kk][1], ah[1], al[1]);
        split_pair(pv[0][kk][2], pv[0][kk][3], ah[2], al[2]);
        split_pair(pv[1][kk][2], pv[1][kk][3], ah[3], al[3]);
#pragma unroll
        for (int nn = 0; nn < 4; ++nn) {
          unsigned b[4];
          ldmatrix_x4_trans(b, &sm.v[stage][16 * kk + lane % 8 + 8 * ((lane / 8) % 2)]
                                    [64 * warp + 16 * nn + 8 * (lane / 16)]);
          mma_bf16(acc[2 * nn], ah, b[0], b[1]);
          mma_bf16(acc[2 * nn], al, b[0], b[1]);
          mma_bf16(acc[2 * nn + 1], ah, b[2], b[3]);
          mma_bf16(acc[2 * nn + 1], al, b[2], b[3]);
        }
      }
    }
    if constexpr (kAsync) cp_async_wait<0>();  // no copy in flight (empty groups only)
  }                                            // segments

  const std::int64_t row_head0 = std::int64_t{r} * p.q_heads + kvh * 12;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = 64 * warp + 8 * i + 2 * t;
    *reinterpret_cast<float2*>(&p.work_acc[((row_head0 + g) * p.splits + split) * kHeadDim + d]) =
        make_float2(acc[i][0], acc[i][1]);
    if (g + 8 < 12)
      *reinterpret_cast<float2*>(
          &p.work_acc[((row_head0 + g + 8) * p.splits + split) * kHeadDim + d]) =
          make_float2(acc[i][2], acc[i][3]);
  }
  if (warp == 0 && t == 0) {
    p.work_ml[((row_head0 + g) * p.splits + split) * 2] = m[0];
    p.work_ml[((row_head0 + g) * p.splits + split) * 2 + 1] = l[0];
    if (g + 8 < 12) {
      p.work_ml[((row_head0 + g + 8) * p.splits + split) * 2] = m[1];
      p.work_ml[((row_head0 + g + 8) * p.splits + split) * 2 + 1] = l[1];
    }
  }
}

template <bool kAsync, bool kMap, int kSt = kStages>
void launch_attend_mma(const dim3& grid, const AttendParams& p, cudaStream_t s) {
  constexpr std::size_t bytes = kMap ? sizeof(MmaSmemMap<kSt>) : sizeof(MmaSmem<kSt>);
  static const bool configured = [] {
    return cudaFuncSetAttribute(attend_mma_kernel<kAsync, kMap, kSt>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(bytes)) == cudaSuccess;
  }();
  if (!configured) detail::check_launch("attend (shared memory attribute)");
  attend_mma_kernel<kAsync, kMap, kSt><<<grid, kThreads, bytes, s>>>(p);
}

struct MergeParams {
  const float* work_acc;
  const float* work_ml;
  int splits;
  float* o;
  float* lse;
};

// grid: rows * q_heads; block: 256 threads, one dim each. Splits merged in order.
__global__ void merge_kernel(const __grid_constant__ MergeParams p) {
  // Launched with programmatic stream serialization: wait for the attend grid (its partials
  // complete and visible). Without a programmatic launch this returns at once.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const std::int64_t rh = blockIdx.x;
  const int d = threadIdx.x;
  const float* ml = p.work_ml + rh * p.splits * 2;
  float mx = kNegInf;
  for (int s = 0; s < p.splits; ++s)
    mx = fmaxf(mx, ml[2 * s]);
  float sum = 0.0f, acc = 0.0f;
  if (mx != kNegInf)
    for (int s = 0; s < p.splits; ++s) {
      if (ml[2 * s] == kNegInf) continue;
      const float w = exp2f(ml[2 * s] - mx);
      sum += ml[2 * s + 1] * w;
      acc += p.work_acc[(rh * p.splits + s) * kHeadDim + d] * w;
    }
  p.o[rh * kHeadDim + d] = mx == kNegInf ? 0.0f : acc / sum;
  if (p.lse && d == 0) p.lse[rh] = mx == kNegInf ? kNegInf : mx + log2f(sum);
}

struct FoldParams {
  float* acc_o;
  float* acc_lse;
  const float* o;
  const float* lse;
};

// grid: rows * heads; block: 256, one dim each.
__global__ void fold_kernel(const __grid_constant__ FoldParams p) {
  const std::int64_t rh = blockIdx.x;
  const int d = threadIdx.x;
  const float a = p.acc_lse[rh], b = p.lse[rh];
  const float mx = fmaxf(a, b);
  __syncthreads();  // every thread read acc_lse before thread 0 rewrites it
  if (mx == kNegInf) return;
  const float wa = a == kNegInf ? 0.0f : exp2f(a - mx);
  const float wb = b == kNegInf ? 0.0f : exp2f(b - mx);
  const std::int64_t i = rh * kHeadDim + d;
  p.acc_o[i] = (p.acc_o[i] * wa + p.o[i] * wb) / (wa + wb);
  if (d == 0) p.acc_lse[rh] = mx + log2f(wa + wb);
}

__global__ void fold_reset_kernel(float* acc_o, float* acc_lse) {
  const std::int64_t rh = blockIdx.x;
  acc_o[rh * kHeadDim + threadIdx.x] = 0.0f;
  if (threadIdx.x == 0) acc_lse[rh] = kNegInf;
}

}  // namespace

std::int64_t attend_workspace_floats(int rows, int q_heads, int splits) {
  return std::int64_t{rows} * q_heads * splits * (kHeadDim + 2);
}

int attend_default_splits(int rows, int kv_heads, int width) {
  // One wave of the tensor-core kernel (2 CTAs per SM on an H200's 132 SMs), at least one tile
  // of 32 tokens per CTA.
  const int slots = 2 * 132;
  const int want = slots / std::max(1, rows * kv_heads);
  return std::clamp(want, 1, std::max(1, (width + 31) / 32));
}

namespace {

// Launch knobs read per call (benchmarks, diagnosis): KVTIER_QSA_ATTEND_GRID = split | kv (the
// fastest-varying grid index: the split (first versions) or the KV head, so that the CTAs
// reading the two 512-byte halves of a token's K / V row run side by side; default kv);
// KVTIER_QSA_ATTEND_PDL = 0 | 1 (merge launched as a programmatic dependent; default 1).
bool env_flag(const char* name, const char* on_value, bool fallback) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == 0) return fallback;
  return std::strcmp(e, on_value) == 0;
}
// KVTIER_QSA_ATTEND_STAGES = 3 | 4 | 6: pipeline stages of the cp.async kernel (default 3).
int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e == nullptr || *e == 0 ? fallback : std::atoi(e);
}

}  // namespace

AttendVariant attend_variant() {
  const char* e = std::getenv("KVTIER_QSA_ATTEND");
  if (e == nullptr) return AttendVariant::automatic;
  if (std::strcmp(e, "simt") == 0) return AttendVariant::simt;
  if (std::strcmp(e, "mma") == 0) return AttendVariant::mma_async;
  if (std::strcmp(e, "mma_ld") == 0) return AttendVariant::mma_load;
  if (std::strcmp(e, "mma_v1") == 0) return AttendVariant::mma_async_v1;
  return AttendVariant::automatic;
}

void attend(const std::uint16_t* q, int q_heads, Rows rows, const std::int32_t* tokens, int width,
            const KvBanks& kv, const PageTable& table, int splits, float* work, float* o,
            float* lse, cudaStream_t s) {
  detail::require(kv.kv_heads >= 1 && q_heads % kv.kv_heads == 0, "q_heads", q_heads);
  const int group = q_heads / kv.kv_heads;
  detail::require(group == 12, "GQA group (compiled: 12)", group);
  detail::require(splits >= 1 && splits <= 65535, "splits", splits);
  detail::require(kv.page_size >= 1, "page_size", kv.page_size);
  if (rows.count == 0) return;
  detail::require(rows.count <= 65535, "rows", rows.count);
  float* work_acc = work;
  float* work_ml = work + std::int64_t{rows.count} * q_heads * splits * kHeadDim;
  const bool kv_inner = env_flag("KVTIER_QSA_ATTEND_GRID", "kv", true);
  AttendParams p{q, q_heads, rows, tokens, width, kv, table, splits, work_acc, work_ml, kv_inner};
  const dim3 grid(static_cast<unsigned>(kv_inner ? kv.kv_heads : splits),
                  static_cast<unsigned>(kv_inner ? splits : kv.kv_heads),
                  static_cast<unsigned>(rows.count));
  AttendVariant variant = attend_variant();
  if (variant == AttendVariant::automatic)
    variant = kv.host ? AttendVariant::mma_load : AttendVariant::mma_async;
  if (kv.fp8)
    attend_kernel<12, true><<<grid, kThreads, 0, s>>>(p);
  else if (variant == AttendVariant::simt)
    attend_kernel<12, false><<<grid, kThreads, 0, s>>>(p);
  else if (variant == AttendVariant::mma_load)
    launch_attend_mma<false, true>(grid, p, s);
  else if (variant == AttendVariant::mma_async_v1)
    launch_attend_mma<true, false>(grid, p, s);
  else if (const int st = env_int("KVTIER_QSA_ATTEND_STAGES", kStages); st == 6)
    launch_attend_mma<true, true, 6>(grid, p, s);
  else if (st == 4)
    launch_attend_mma<true, true, 4>(grid, p, s);
  else
    launch_attend_mma<true, true>(grid, p, s);
  detail::check_launch("attend");
  const MergeParams mp{work_acc, work_ml, splits, o, lse};
  if (env_flag("KVTIER_QSA_ATTEND_PDL", "1", true)) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(rows.count * q_heads));
    cfg.blockDim = dim3(kHeadDim);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, merge_kernel, mp);
    if (e != cudaSuccess)
      throw std::runtime_error(std::string("qsa attend merge: ") + cudaGetErrorString(e));
  } else {
    merge_kernel<<<rows.count * q_heads, kHeadDim, 0, s>>>(mp);
  }
  detail::check_launch("attend merge");
}

void fold(float* acc_o, float* acc_lse, const float* o, const float* lse, int rows, int heads,
          cudaStream_t s) {
  if (rows * heads == 0) return;
  fold_kernel<<<rows * heads, kHeadDim, 0, s>>>({acc_o, acc_lse, o, lse});
  detail::check_launch("fold");
}

void fold_reset(float* acc_o, float* acc_lse, int rows, int heads, cudaStream_t s) {
  if (rows * heads == 0) return;
  fold_reset_kernel<<<rows * heads, kHeadDim, 0, s>>>(acc_o, acc_lse);
  detail::check_launch("fold reset");
}

}  // namespace kvtier::qsa
