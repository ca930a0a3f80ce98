// The tensor-core attend kernel (bf16 banks): the q.k and p.v of a CTA's slice of a row's token
// list on mma.sync, the tiles gathered into shared memory (cp.async from device banks, 16-byte
// register loads from host banks). Partials (acc, m, l) per split go to the merge (attend_fold.cu).
#include <string>

#include "cuda/qsa/attend_internal.cuh"
#include "model/translate.hpp"

namespace kvtier::qsa::detail {

namespace {

// grid: (KV heads, splits, rows), so that the CTAs of one split's KV heads run side by side;
// block: 4 warps; dynamic shared memory (kSt stages of a tile of kTile tokens of the KV head's K
// and V, the tile's scores, and the bank rows of the slice's current segment). The CTA walks its
// slice of the row's token list tile by tile; the tiles are gathered into shared memory kSt - 1
// tiles ahead of the one computed (cp.async), or one tile ahead through registers (register
// loads: the next tile's loads are in flight while the current one is computed). Per tile:
//   q.k  on tensor cores (mma m16n8k16 bf16, fp32 accumulate): A = the 12 query heads of the KV
//        head padded to 16 rows (kept in registers), B = K rows; warp w scores tokens 8w..8w+7
//        as 4 independent chains of 4 k-steps, summed (a + b) + (c + d); products of bf16 are
//        exact, so the scores are fp32 dot products;
//   softmax: every warp reads all 32 scores of its heads from shared memory and keeps the same
//        online (m, l) in fp32 (same inputs, same order: identical bits in every warp);
//   p.v  on tensor cores: warp w owns dims 64w..64w+63 of the 16 x 256 accumulator; the fp32
//        probabilities go in as two bf16 terms (hi + lo, error <= 2^-18 relative), so the output
//        stays within fp32-path accuracy (tests: 2e-5 against fp64).
// The gather: warp w takes rows w, w + 4, ... of the tile; per row its lanes copy the 512-byte K
// row, then the V row. The arithmetic does not depend on the gather: both forms give the same
// bits. Deterministic: no atomics; fixed order everywhere. One KV head per CTA, 3 stages, bank
// rows looked up per segment, plain loads and q.k in 4 chains are the forms measured fastest
// (bench/results/kernel-choices.md).
constexpr int kTile = 32;
constexpr int kRowPad = kHeadDim + 8;  // bf16 per shared row: 528 B, conflict-free ldmatrix
constexpr int kSPad = kTile + 4;
constexpr int kMapCap = 2048;  // tokens of a segment whose bank rows are looked up up front

constexpr int kSt = 3;  // pipeline stages
constexpr int kRowsPerWarp = kTile / kAttWarps;

struct MmaSmem {
  std::uint16_t k[kSt][kTile][kRowPad];
  std::uint16_t v[kSt][kTile][kRowPad];
  float s[16][kSPad];
  // The physical bank row (page * page_size + offset, -1 = no token) of each token of the
  // current segment of the CTA's slice, filled once per segment, so the gather of a tile issues
  // its loads without waiting on the token list and page table loads.
  std::int32_t map[kMapCap];
};

// Two fp32 -> packed bf16 pair (x in the low half); hi + lo split of each.
__device__ __forceinline__ unsigned pack_bf16(float x, float y) {
  return static_cast<unsigned>(float_to_bf16(x)) | (static_cast<unsigned>(float_to_bf16(y)) << 16);
}
__device__ __forceinline__ void split_pair(float x, float y, unsigned& hi, unsigned& lo) {
  hi = pack_bf16(x, y);
  const float xh = bf16_to_float(static_cast<std::uint16_t>(hi & 0xffffu));
  const float yh = bf16_to_float(static_cast<std::uint16_t>(hi >> 16));
  lo = pack_bf16(x - xh, y - yh);
}

// kAsync: cp.async gather (device banks), else 16-byte register loads (host banks). kInPlace:
// table entries <= -2 name page -2 - e of p.table.in_place (the mirror's pages not resident,
// read from the host bank in place); such rows are held in the map as -2 - bank row. Either
// gather takes them: cp.async where most entries are in the pool, register loads where most
// are read in place (PageTable::mostly_in_place).
template <bool kAsync, bool kInPlace>
__global__ void __launch_bounds__(kAttThreads, 2)
    attend_mma_kernel(const __grid_constant__ AttendParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  MmaSmem& sm = *reinterpret_cast<MmaSmem*>(smem_raw);
  std::int32_t* map = sm.map;
  const int kvh = blockIdx.x, split = blockIdx.y, r = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const float qscale = rsqrtf(static_cast<float>(kHeadDim)) * kLog2e;
  // The merge kernel (launched as a programmatic dependent) may start now: it waits for this
  // grid's completion and memory (griddepcontrol.wait) before reading the partials.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // Launched early (AttendParams::early): every input may come from the kernel before. Without a
  // programmatic launch this returns at once.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");

  const int chunk = (p.width + p.splits - 1) / p.splits;
  const int t0 = min(p.width, split * chunk), t1 = min(p.width, t0 + chunk);
  const std::int32_t* toks = p.tokens + std::int64_t{r} * p.width;
  const std::int32_t* pages = p.table.pages + std::int64_t{p.rows.req[r]} * p.table.stride;
  const std::uint16_t* kbase = static_cast<const std::uint16_t*>(p.kv.k);
  const std::uint16_t* vbase = static_cast<const std::uint16_t*>(p.kv.v);
  const std::uint16_t* in_place_k = static_cast<const std::uint16_t*>(p.table.in_place.k);
  const std::uint16_t* in_place_v = static_cast<const std::uint16_t*>(p.table.in_place.v);

  // Q fragments (A of q.k): rows = heads (12 real, 4 zero), k = dims, 16 k-steps. Loaded after
  // the first tiles' loads are issued (their latency then hides the Q loads').
  const std::uint16_t* qrow = p.q + (std::int64_t{r} * p.q_heads + kvh * 12) * kHeadDim;
  unsigned qa[16][4] = {};
  auto load_q = [&] {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int d = 16 * j + 2 * t;
      qa[j][0] = *reinterpret_cast<const unsigned*>(qrow + g * kHeadDim + d);
      qa[j][1] =
          g + 8 < 12 ? *reinterpret_cast<const unsigned*>(qrow + (g + 8) * kHeadDim + d) : 0u;
      qa[j][2] = *reinterpret_cast<const unsigned*>(qrow + g * kHeadDim + d + 8);
      qa[j][3] =
          g + 8 < 12 ? *reinterpret_cast<const unsigned*>(qrow + (g + 8) * kHeadDim + d + 8) : 0u;
    }
  };

  int lo = t0, hi = t1;  // the current segment of the slice
  // Element offset of lane's 16 bytes of the KV head in the bank row of tile row `row`, or -1;
  // kb, vb: the banks that row is in (p.table.in_place's for an in-place row, else p.kv's).
  auto row_elem = [&](int tile, int row, const std::uint16_t*& kb,
                      const std::uint16_t*& vb) -> std::int64_t {
    const int j = lo + tile * kTile + row;
    std::int64_t bank_row = j < hi ? map[j - lo] : -1;
    kb = kbase;
    vb = vbase;
    if constexpr (kInPlace) {
      if (bank_row <= -2) {
        bank_row = -2 - bank_row;
        kb = in_place_k;
        vb = in_place_v;
      }
    }
    return bank_row < 0 ? -1 : (bank_row * p.kv.kv_heads + kvh) * kHeadDim + lane * 8;
  };
  auto issue_async = [&](int tile, int stage) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int row = warp + kAttWarps * i;
      const std::uint16_t *kb, *vb;
      const std::int64_t e = row_elem(tile, row, kb, vb);
      const std::int64_t ec = e < 0 ? 0 : e;
      cp_async16(&sm.k[stage][row][lane * 8], kb + ec, e >= 0);
      cp_async16(&sm.v[stage][row][lane * 8], vb + ec, e >= 0);
    }
  };
  // Register path: every load of a tile issued before any of its shared stores.
  uint4 rk[kRowsPerWarp], rv[kRowsPerWarp];
  auto load_regs = [&](int tile) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const std::uint16_t *kb, *vb;
      const std::int64_t e = row_elem(tile, warp + kAttWarps * i, kb, vb);
      rk[i] = e < 0 ? make_uint4(0, 0, 0, 0) : *reinterpret_cast<const uint4*>(kb + e);
      rv[i] = e < 0 ? make_uint4(0, 0, 0, 0) : *reinterpret_cast<const uint4*>(vb + e);
    }
  };
  auto store_regs = [&](int stage) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int row = warp + kAttWarps * i;
      *reinterpret_cast<uint4*>(&sm.k[stage][row][lane * 8]) = rk[i];
      *reinterpret_cast<uint4*>(&sm.v[stage][row][lane * 8]) = rv[i];
    }
  };

  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};  // heads g and g + 8
  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      acc[i][c] = 0.0f;

  for (lo = t0; lo < t1; lo += kMapCap) {
    hi = min(t1, lo + kMapCap);
    const int n_tiles = (hi - lo + kTile - 1) / kTile;
    __syncthreads();  // every warp done with the previous segment (map, stages, scores)
    for (int i = threadIdx.x; i < hi - lo; i += kAttThreads) {
      const std::int32_t tok = toks[lo + i];
      std::int32_t bank_row = -1;
      if (tok >= 0) {
        std::int32_t page = pages[tok / p.kv.page_size];
        bool in_place = false;
        if constexpr (kInPlace) {
          if (page <= -2) {
            page = in_place_page(page);
            in_place = true;
          }
        }
        if (page < 0) page = p.table.dummy;
        bank_row = page * p.kv.page_size + tok % p.kv.page_size;
        if (in_place) bank_row = -2 - bank_row;
      }
      map[i] = bank_row;
    }
    __syncthreads();
#pragma unroll
    for (int st = 0; st < kSt - 1; ++st) {
      if constexpr (kAsync) {
        if (st < n_tiles) issue_async(st, st);
        cp_async_commit();
      } else if (st < n_tiles) {
        load_regs(st);
        if (st == 0 && lo == t0) load_q();
        store_regs(st);
      }
    }
    if constexpr (kAsync)
      if (lo == t0) load_q();
    for (int tile = 0; tile < n_tiles; ++tile) {
      if constexpr (kAsync) cp_async_wait<kSt - 2>();
      __syncthreads();  // tile ready for all; every warp done with tile - 1 (its stage, sm.s)
      const int nt = tile + kSt - 1;
      if constexpr (kAsync) {
        if (nt < n_tiles) issue_async(nt, nt % kSt);
        cp_async_commit();
      } else if (nt < n_tiles) {
        load_regs(nt);  // stored after this tile's arithmetic
      }
      const int stage = tile % kSt;
      // q.k: warp w scores tokens 8w .. 8w + 7 of the tile, k-step j into chain j % 4.
      float sc[4];
      {
        float part[4][4] = {};
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          unsigned b[4];
          ldmatrix_x4(b, &sm.k[stage][8 * warp + lane % 8][32 * jj + 8 * (lane / 8)]);
          mma_bf16(part[(2 * jj) % 4], qa[2 * jj], b[0], b[1]);
          mma_bf16(part[(2 * jj + 1) % 4], qa[2 * jj + 1], b[2], b[3]);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c)
          sc[c] = (part[0][c] + part[1][c]) + (part[2][c] + part[3][c]);
      }
      {
        const int j = lo + tile * kTile + 8 * warp + 2 * t;
        const bool v0 = j < hi && (kInPlace ? map[j - lo] != -1 : map[j - lo] >= 0);
        const bool v1 = j + 1 < hi && (kInPlace ? map[j + 1 - lo] != -1 : map[j + 1 - lo] >= 0);
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
      // Register path: the next tile into its stage (free since the barrier above: its last
      // reader was tile - 1); visible after the next iteration's barrier.
      if constexpr (!kAsync)
        if (nt < n_tiles) store_regs(nt % kSt);
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

template <bool kAsync, bool kInPlace>
void launch(const AttendParams& p, cudaStream_t s) {
  constexpr std::size_t bytes = sizeof(MmaSmem);
  static const bool configured = [] {
    return cudaFuncSetAttribute(attend_mma_kernel<kAsync, kInPlace>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(bytes)) == cudaSuccess;
  }();
  if (!configured) KVT_CUDA_CHECK(cudaGetLastError());
  const dim3 grid(static_cast<unsigned>(p.kv.kv_heads), static_cast<unsigned>(p.splits),
                  static_cast<unsigned>(p.rows.count));
  if (p.early)
    launch_programmatic(attend_mma_kernel<kAsync, kInPlace>, grid, dim3(kAttThreads), bytes, s, p);
  else
    attend_mma_kernel<kAsync, kInPlace><<<grid, kAttThreads, bytes, s>>>(p);
}

}  // namespace

void launch_attend_tc(const AttendParams& p, bool async, cudaStream_t s) {
  if (p.table.in_place.k != nullptr) {
    if (async)
      launch<true, true>(p, s);
    else
      launch<false, true>(p, s);
  } else if (async) {
    launch<true, false>(p, s);
  } else {
    launch<false, false>(p, s);
  }
}

}  // namespace kvtier::qsa::detail
