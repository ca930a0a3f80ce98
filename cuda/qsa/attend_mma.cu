// The tensor-core attend kernel (bf16 banks): the q.k and p.v of a CTA's slice of a row's token
// list on mma.sync, the tiles gathered into shared memory (cp.async from device banks, 16-byte
// register loads from host banks, or bulk copies on the TMA unit). Partials (acc, m, l) per split
// go to the merge (attend_fold.cu).
#include <cooperative_groups.h>

#include <string>

#include "cuda/qsa/attend_internal.cuh"

namespace kvtier::qsa::detail {

namespace {

namespace cg = cooperative_groups;

// grid: (groups, splits, rows) with kv_inner, else (splits, groups, rows); a group is kKh KV
// heads; block: 4 warps per KV head; dynamic shared memory (kSt stages of a tile of kTile tokens
// of K and V of the group's heads, plus the tile's scores). The CTA walks its slice of the row's
// token list tile by tile; the tiles are gathered into shared memory kSt - 1 tiles ahead of the
// one computed (cp.async), or one tile ahead through registers (register loads: the next tile's
// loads are in flight while the current one is computed). Warp w of the CTA serves KV head
// kvh0 + w / 4 as its "head warp" w % 4. Per tile and KV head:
//   q.k  on tensor cores (mma m16n8k16 bf16, fp32 accumulate): A = the 12 query heads of the KV
//        head padded to 16 rows (kept in registers), B = K rows; head warp w scores tokens
//        8w..8w+7; products of bf16 are exact, so the scores are fp32 dot products;
//   softmax: every warp of the head reads all 32 scores of its heads from shared memory and keeps
//        the same online (m, l) in fp32 (same inputs, same order: identical bits in every warp);
//   p.v  on tensor cores: head warp w owns dims 64w..64w+63 of the 16 x 256 accumulator; the fp32
//        probabilities go in as two bf16 terms (hi + lo, error <= 2^-18 relative), so the output
//        stays within fp32-path accuracy (tests: 2e-5 against fp64).
// The gather: warp w takes rows w, w + 4 kKh, ... of the tile; per row its lanes copy the K rows
// of the group's heads (kKh x 512 contiguous bytes: one 1 KiB piece for kKh = 2), then the V rows.
// The arithmetic of a (KV head, split) does not depend on kKh, the stages or the gather: every
// variant gives the same bits. Deterministic: no atomics; fixed order everywhere.
constexpr int kTile = 32;
constexpr int kRowPad = kHeadDim + 8;  // bf16 per shared row: 528 B, conflict-free ldmatrix
constexpr int kSPad = kTile + 4;
// Tokens of a segment whose bank rows are looked up up front: 2048, or 1024 where three CTAs
// share an SM (their shared memory must stay under a third of the SM's 228 KiB).
__host__ __device__ constexpr int map_cap(int ctas_per_sm) { return ctas_per_sm >= 3 ? 1024 : 2048; }

template <int kSt, int kKh>
struct MmaSmem {
  std::uint16_t k[kSt][kKh][kTile][kRowPad];
  std::uint16_t v[kSt][kKh][kTile][kRowPad];
  float s[kKh][16][kSPad];
};
// With the map: the physical bank row (page * page_size + offset, -1 = no token) of each token
// of the current segment of the CTA's slice, filled once per segment, so the gather of a tile
// issues its loads without waiting on the token list and page table loads. The bulk gather
// signals each stage's arrival on its own mbarrier.
template <int kSt, int kKh, int kCap>
struct MmaSmemMap {
  MmaSmem<kSt, kKh> base;
  std::int32_t map[kCap];
  std::uint64_t bar[kSt];
};

// mbarrier and bulk-copy (TMA) helpers, sm_90.
__device__ __forceinline__ void mbar_init(std::uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
}
// Copies `bytes` (a multiple of 16, both ends 16-byte aligned) from global memory (device or
// mapped host) into this CTA's shared memory; completion counts on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes,
                                          std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// 16-byte gather loads (ld_mode of AttendParams); the asm forms keep their issue order.
__device__ __forceinline__ uint4 ld16(const std::uint16_t* src, int mode) {
  uint4 r;
  if (mode == 1)
    asm volatile("ld.global.cg.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(src));
  else if (mode == 2)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(src));
  else if (mode == 3)
    asm volatile("ld.global.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(src));
  else
    r = *reinterpret_cast<const uint4*>(src);
  return r;
}
// cp.async with the L2::256B prefetch hint (zero-fills the destination when !valid).
__device__ __forceinline__ void cp_async16_l2(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}

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

// The cluster merge (AttendParams::cluster_merge): the CTAs of one (row, KV-head group) form a
// cluster along the splits. Each leaves its partial (acc, m, l) in its own shared memory, over
// the stages it no longer needs; after a cluster barrier CTA c merges outputs c, c + S x threads,
// ... reading the S partials through distributed shared memory, in the merge kernel's order:
// split s of S <= 8 is that kernel's warp s, whose sums start at 0 and hold one product each,
// and the warps past S add +0 (which turns a -0 sum into +0). So the bits equal the merge
// kernel's. A second barrier keeps every partial alive until all CTAs have read it.
template <int kCtaThreads, int kKh>
__device__ __forceinline__ void merge_in_cluster(const AttendParams& p, unsigned char* smem_raw,
                                                 const float (&acc)[8][4], const float (&m)[2],
                                                 const float (&l)[2], int r, int kvh0) {
  constexpr int kHeads = kKh * 12, kOut = kHeads * kHeadDim;
  cg::cluster_group cluster = cg::this_cluster();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hl = warp / kAttWarps, wq = warp % kAttWarps, g = lane / 4, t = lane % 4;
  float* part = reinterpret_cast<float*>(smem_raw);  // [kHeads][256]
  float* part_ml = part + kOut;                       // [kHeads][2]
  __syncthreads();  // every warp done with the stages
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = 64 * wq + 8 * i + 2 * t;
    *reinterpret_cast<float2*>(&part[(hl * 12 + g) * kHeadDim + d]) =
        make_float2(acc[i][0], acc[i][1]);
    if (g + 8 < 12)
      *reinterpret_cast<float2*>(&part[(hl * 12 + g + 8) * kHeadDim + d]) =
          make_float2(acc[i][2], acc[i][3]);
  }
  if (wq == 0 && t == 0) {
    part_ml[(hl * 12 + g) * 2] = m[0];
    part_ml[(hl * 12 + g) * 2 + 1] = l[0];
    if (g + 8 < 12) {
      part_ml[(hl * 12 + g + 8) * 2] = m[1];
      part_ml[(hl * 12 + g + 8) * 2 + 1] = l[1];
    }
  }
  cluster.sync();
  const int splits = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  for (int i = rank * kCtaThreads + static_cast<int>(threadIdx.x); i < kOut;
       i += splits * kCtaThreads) {
    const int hh = i / kHeadDim, d = i % kHeadDim;
    float mx = kNegInf;
    for (int s = 0; s < splits; ++s)
      mx = fmaxf(mx, cluster.map_shared_rank(part_ml, s)[hh * 2]);
    float total = 0.0f, sum = 0.0f;
    if (mx != kNegInf) {
      for (int s = 0; s < splits; ++s) {
        const float ms = cluster.map_shared_rank(part_ml, s)[hh * 2];
        const float ls = cluster.map_shared_rank(part_ml, s)[hh * 2 + 1];
        const float w = ms == kNegInf ? 0.0f : exp2f(ms - mx);
        total = __fadd_rn(total, __fmul_rn(cluster.map_shared_rank(part, s)[i], w));
        sum = __fadd_rn(sum, ms == kNegInf ? 0.0f : __fmul_rn(ls, w));
      }
      if (splits < kMergeWarps) {
        total = __fadd_rn(total, 0.0f);
        sum = __fadd_rn(sum, 0.0f);
      }
    }
    const std::int64_t rh = std::int64_t{r} * p.q_heads + kvh0 * 12 + hh;
    p.o[rh * kHeadDim + d] = mx == kNegInf ? 0.0f : total / sum;
    if (p.lse != nullptr && d == 0) p.lse[rh] = mx == kNegInf ? kNegInf : mx + log2f(sum);
  }
  cluster.sync();
}

// kGather: how a tile reaches shared memory (kRegs, kCpAsync, kBulk: one lane per token row
// issues the row's K and V copies on the TMA unit, so the gather costs a few instructions per
// row instead of one per 16 bytes; needs the map). kOcc: CTAs per SM the launch bounds and the
// shared memory allow (2, or 3 with 2 stages and 1 KV head per CTA).
enum Gather { kRegs, kCpAsync, kBulk };
template <int kGather, bool kMap, int kSt, int kKh, int kOcc>
__global__ void __launch_bounds__(kAttThreads* kKh, kOcc / kKh)
    attend_mma_kernel(const __grid_constant__ AttendParams p) {
  constexpr bool kAsync = kGather == kCpAsync;
  constexpr int kCtaThreads = kAttThreads * kKh;
  constexpr int kCtaWarps = kAttWarps * kKh;
  constexpr int kRowsPerWarp = kTile / kCtaWarps;
  constexpr int kCap = map_cap(kOcc);
  static_assert(kGather != kBulk || (kMap && kTile == 32), "bulk gather: one lane per tile row");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  MmaSmem<kSt, kKh>& sm = *reinterpret_cast<MmaSmem<kSt, kKh>*>(smem_raw);
  auto& smap = *reinterpret_cast<MmaSmemMap<kSt, kKh, kCap>*>(smem_raw);  // only with kMap
  std::int32_t* map = smap.map;
  const int split = p.kv_inner ? blockIdx.y : blockIdx.x;
  const int kvh0 = (p.kv_inner ? blockIdx.x : blockIdx.y) * kKh, r = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hl = warp / kAttWarps, wq = warp % kAttWarps;  // head of the group, head warp
  const int g = lane / 4, t = lane % 4;
  const float qscale = rsqrtf(static_cast<float>(kHeadDim)) * kLog2e;
  // The merge kernel (launched as a programmatic dependent) may start now: it waits for this
  // grid's completion and memory (griddepcontrol.wait) before reading the partials.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  const int chunk = (p.width + p.splits - 1) / p.splits;
  const int t0 = min(p.width, split * chunk), t1 = min(p.width, t0 + chunk);
  const std::int32_t* toks = p.tokens + std::int64_t{r} * p.width;
  const std::int32_t* pages = p.table.pages + std::int64_t{p.rows.req[r]} * p.table.stride;
  const std::uint16_t* kbase = static_cast<const std::uint16_t*>(p.kv.k);
  const std::uint16_t* vbase = static_cast<const std::uint16_t*>(p.kv.v);

  // Q fragments (A of q.k): rows = heads (12 real, 4 zero), k = dims, 16 k-steps. Loaded after
  // the first tiles' loads are issued (their latency then hides the Q loads').
  const std::uint16_t* qrow = p.q + (std::int64_t{r} * p.q_heads + (kvh0 + hl) * 12) * kHeadDim;
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
  // Element offset of lane's 16 bytes of KV head kvh0 in the bank row of tile row `row`, or -1.
  auto row_elem = [&](int tile, int row) -> std::int64_t {
    const int j = lo + tile * kTile + row;
    std::int64_t bank_row = -1;
    if constexpr (kMap) {
      if (j < hi) bank_row = map[j - lo];
    } else {
      const std::int32_t tok = j < hi ? toks[j] : -1;
      if (tok >= 0) {
        std::int32_t page = pages[tok / p.kv.page_size];
        if (page < 0) page = p.table.dummy;
        bank_row = std::int64_t{page} * p.kv.page_size + tok % p.kv.page_size;
      }
    }
    return bank_row < 0 ? -1 : (bank_row * p.kv.kv_heads + kvh0) * kHeadDim + lane * 8;
  };
  auto issue_async = [&](int tile, int stage) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int row = warp + kCtaWarps * i;
      const std::int64_t e = row_elem(tile, row);
      const std::int64_t ec = e < 0 ? 0 : e;
      if (p.ld_mode > 0) {
#pragma unroll
        for (int h = 0; h < kKh; ++h)
          cp_async16_l2(&sm.k[stage][h][row][lane * 8], kbase + ec + h * kHeadDim, e >= 0);
#pragma unroll
        for (int h = 0; h < kKh; ++h)
          cp_async16_l2(&sm.v[stage][h][row][lane * 8], vbase + ec + h * kHeadDim, e >= 0);
      } else {
#pragma unroll
        for (int h = 0; h < kKh; ++h)
          cp_async16(&sm.k[stage][h][row][lane * 8], kbase + ec + h * kHeadDim, e >= 0);
#pragma unroll
        for (int h = 0; h < kKh; ++h)
          cp_async16(&sm.v[stage][h][row][lane * 8], vbase + ec + h * kHeadDim, e >= 0);
      }
    }
  };
  // Register path: every load of a tile issued before any of its shared stores.
  uint4 rk[kRowsPerWarp][kKh], rv[kRowsPerWarp][kKh];
  auto load_regs = [&](int tile) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const std::int64_t e = row_elem(tile, warp + kCtaWarps * i);
#pragma unroll
      for (int h = 0; h < kKh; ++h)
        rk[i][h] = e < 0 ? make_uint4(0, 0, 0, 0) : ld16(kbase + e + h * kHeadDim, p.ld_mode);
#pragma unroll
      for (int h = 0; h < kKh; ++h)
        rv[i][h] = e < 0 ? make_uint4(0, 0, 0, 0) : ld16(vbase + e + h * kHeadDim, p.ld_mode);
    }
  };
  auto store_regs = [&](int stage) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int row = warp + kCtaWarps * i;
#pragma unroll
      for (int h = 0; h < kKh; ++h) {
        *reinterpret_cast<uint4*>(&sm.k[stage][h][row][lane * 8]) = rk[i][h];
        *reinterpret_cast<uint4*>(&sm.v[stage][h][row][lane * 8]) = rv[i][h];
      }
    }
  };

  // Bulk path: warp 0 fills a stage, lane i the tile's row i. Rows without a token are zeroed
  // (their scores are masked, but p.v must not meet NaN bytes); the fence orders those and
  // earlier generic accesses of the stage before the copies (async proxy).
  auto issue_bulk = [&](int tile, int stage) {
    if (warp != 0) return;
    const int j = lo + tile * kTile + lane;
    const std::int64_t bank_row = j < hi ? map[j - lo] : -1;
    const unsigned valid = __ballot_sync(0xffffffffu, bank_row >= 0);
    for (unsigned empty = ~valid; empty != 0; empty &= empty - 1) {
      const int row = __ffs(static_cast<int>(empty)) - 1;
#pragma unroll
      for (int h = 0; h < kKh; ++h) {
        *reinterpret_cast<uint4*>(&sm.k[stage][h][row][lane * 8]) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(&sm.v[stage][h][row][lane * 8]) = make_uint4(0, 0, 0, 0);
      }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    if (lane == 0)
      mbar_arrive_expect_tx(&smap.bar[stage],
                            static_cast<unsigned>(__popc(valid)) * 2 * kKh * kHeadDim * 2);
    __syncwarp();
    if (bank_row >= 0) {
      const std::int64_t e = (bank_row * p.kv.kv_heads + kvh0) * kHeadDim;
#pragma unroll
      for (int h = 0; h < kKh; ++h)
        bulk_copy(&sm.k[stage][h][lane][0], kbase + e + h * kHeadDim, kHeadDim * 2,
                  &smap.bar[stage]);
#pragma unroll
      for (int h = 0; h < kKh; ++h)
        bulk_copy(&sm.v[stage][h][lane][0], vbase + e + h * kHeadDim, kHeadDim * 2,
                  &smap.bar[stage]);
    }
  };
  unsigned bar_phase = 0;  // bit s: the parity of stage s's next completion
  if constexpr (kGather == kBulk) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int st = 0; st < kSt; ++st)
        mbar_init(&smap.bar[st]);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // The segment loop's first barrier publishes the initialised mbarriers.
  }

  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};  // heads g and g + 8
  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      acc[i][c] = 0.0f;

  const int seg_step = kMap ? kCap : max(1, t1 - t0);
  for (lo = t0; lo < t1; lo += seg_step) {
    hi = min(t1, lo + seg_step);
    const int n_tiles = (hi - lo + kTile - 1) / kTile;
    if constexpr (kMap) {
      __syncthreads();  // every warp done with the previous segment (map, stages, scores)
      for (int i = threadIdx.x; i < hi - lo; i += kCtaThreads) {
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
      if constexpr (kGather == kBulk) {
        if (st < n_tiles) issue_bulk(st, st);
      } else if constexpr (kAsync) {
        if (st < n_tiles) issue_async(st, st);
        cp_async_commit();
      } else if (st < n_tiles) {
        load_regs(st);
        if (st == 0 && lo == t0) load_q();
        store_regs(st);
      }
    }
    if constexpr (kGather != kRegs)
      if (lo == t0) load_q();
    for (int tile = 0; tile < n_tiles; ++tile) {
      const int stage = tile % kSt;
      if constexpr (kGather == kBulk) {
        mbar_wait(&smap.bar[stage], (bar_phase >> stage) & 1u);
        bar_phase ^= 1u << stage;
      }
      if constexpr (kAsync) cp_async_wait<kSt - 2>();
      __syncthreads();  // tile ready for all; every warp done with tile - 1 (its stage, sm.s)
      const int nt = tile + kSt - 1;
      if constexpr (kGather == kBulk) {
        if (nt < n_tiles) issue_bulk(nt, nt % kSt);
      } else if constexpr (kAsync) {
        if (nt < n_tiles) issue_async(nt, nt % kSt);
        cp_async_commit();
      } else if (nt < n_tiles) {
        load_regs(nt);  // stored after this tile's arithmetic
      }
      // q.k: head warp wq scores tokens 8wq .. 8wq + 7 of the tile.
      // Either 4 independent chains of 4 k-steps (k-step j into chain j % 4) or one chain of 16.
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (p.qk_split) {
        float part[4][4] = {};
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          unsigned b[4];
          ldmatrix_x4(b, &sm.k[stage][hl][8 * wq + lane % 8][32 * jj + 8 * (lane / 8)]);
          mma_bf16(part[(2 * jj) % 4], qa[2 * jj], b[0], b[1]);
          mma_bf16(part[(2 * jj + 1) % 4], qa[2 * jj + 1], b[2], b[3]);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c)
          sc[c] = (part[0][c] + part[1][c]) + (part[2][c] + part[3][c]);
      } else {
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          unsigned b[4];
          ldmatrix_x4(b, &sm.k[stage][hl][8 * wq + lane % 8][32 * jj + 8 * (lane / 8)]);
          mma_bf16(sc, qa[2 * jj], b[0], b[1]);
          mma_bf16(sc, qa[2 * jj + 1], b[2], b[3]);
        }
      }
      {
        const int j = lo + tile * kTile + 8 * wq + 2 * t;
        bool v0, v1;
        if constexpr (kMap) {
          v0 = j < hi && map[j - lo] >= 0;
          v1 = j + 1 < hi && map[j + 1 - lo] >= 0;
        } else {
          v0 = j < hi && toks[j] >= 0;
          v1 = j + 1 < hi && toks[j + 1] >= 0;
        }
        *reinterpret_cast<float2*>(&sm.s[hl][g][8 * wq + 2 * t]) =
            make_float2(v0 ? sc[0] * qscale : kNegInf, v1 ? sc[1] * qscale : kNegInf);
        *reinterpret_cast<float2*>(&sm.s[hl][g + 8][8 * wq + 2 * t]) =
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
          const float2 a = *reinterpret_cast<const float2*>(&sm.s[hl][g + 8 * h][16 * kk + 2 * t]);
          const float2 b =
              *reinterpret_cast<const float2*>(&sm.s[hl][g + 8 * h][16 * kk + 2 * t + 8]);
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
      // p.v: head warp wq accumulates dims 64wq .. 64wq + 63 (8 n-tiles), two k-steps of 16
      // tokens.
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
          ldmatrix_x4_trans(b, &sm.v[stage][hl][16 * kk + lane % 8 + 8 * ((lane / 8) % 2)]
                                    [64 * wq + 16 * nn + 8 * (lane / 16)]);
          mma_bf16(acc[2 * nn], ah, b[0], b[1]);
          mma_bf16(acc[2 * nn], al, b[0], b[1]);
          mma_bf16(acc[2 * nn + 1], ah, b[2], b[3]);
          mma_bf16(acc[2 * nn + 1], al, b[2], b[3]);
        }
      }
      // Register path: the next tile into its stage (free since the barrier above: its last
      // reader was tile - 1); visible after the next iteration's barrier.
      if constexpr (kGather == kRegs)
        if (nt < n_tiles) store_regs(nt % kSt);
    }
    if constexpr (kAsync) cp_async_wait<0>();  // no copy in flight (empty groups only)
  }                                            // segments

  const std::int64_t row_head0 = std::int64_t{r} * p.q_heads + (kvh0 + hl) * 12;
  if (p.cluster_merge) {
    merge_in_cluster<kCtaThreads, kKh>(p, smem_raw, acc, m, l, r, kvh0);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = 64 * wq + 8 * i + 2 * t;
    *reinterpret_cast<float2*>(&p.work_acc[((row_head0 + g) * p.splits + split) * kHeadDim + d]) =
        make_float2(acc[i][0], acc[i][1]);
    if (g + 8 < 12)
      *reinterpret_cast<float2*>(
          &p.work_acc[((row_head0 + g + 8) * p.splits + split) * kHeadDim + d]) =
          make_float2(acc[i][2], acc[i][3]);
  }
  if (wq == 0 && t == 0) {
    p.work_ml[((row_head0 + g) * p.splits + split) * 2] = m[0];
    p.work_ml[((row_head0 + g) * p.splits + split) * 2 + 1] = l[0];
    if (g + 8 < 12) {
      p.work_ml[((row_head0 + g + 8) * p.splits + split) * 2] = m[1];
      p.work_ml[((row_head0 + g + 8) * p.splits + split) * 2 + 1] = l[1];
    }
  }
}

template <int kGather, bool kMap, int kSt, int kKh, int kOcc = 2>
void launch(const AttendParams& p, cudaStream_t s) {
  constexpr std::size_t bytes =
      kMap ? sizeof(MmaSmemMap<kSt, kKh, map_cap(kOcc)>) : sizeof(MmaSmem<kSt, kKh>);
  static_assert(kOcc == 2 || bytes + 1024 <= 228 * 1024 / kOcc, "shared memory per CTA");
  static const bool configured = [] {
    return cudaFuncSetAttribute(attend_mma_kernel<kGather, kMap, kSt, kKh, kOcc>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(bytes)) == cudaSuccess;
  }();
  if (!configured) check_launch("attend (shared memory attribute)");
  const unsigned groups = static_cast<unsigned>(p.kv.kv_heads / kKh);
  const unsigned splits = static_cast<unsigned>(p.splits);
  const dim3 grid(p.kv_inner ? groups : splits, p.kv_inner ? splits : groups,
                  static_cast<unsigned>(p.rows.count));
  if (!p.cluster_merge) {
    attend_mma_kernel<kGather, kMap, kSt, kKh, kOcc><<<grid, kAttThreads * kKh, bytes, s>>>(p);
    return;
  }
  require(p.splits <= kClusterMergeMaxSplits, "splits (cluster merge)", p.splits);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kAttThreads * kKh);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = p.kv_inner ? 1 : splits;
  attr[0].val.clusterDim.y = p.kv_inner ? splits : 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e =
      cudaLaunchKernelEx(&cfg, attend_mma_kernel<kGather, kMap, kSt, kKh, kOcc>, p);
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("qsa attend (cluster of ") + std::to_string(splits) +
                             "): " + cudaGetErrorString(e));
}

}  // namespace

void launch_attend_tc(const AttendParams& p, int gather, bool map, int stages, int kv_heads_per_cta,
                      int ctas_per_sm, cudaStream_t s) {
  require(gather >= kRegs && gather <= kBulk, "attend gather form", gather);
  require(kv_heads_per_cta == 1 || kv_heads_per_cta == 2, "KV heads per CTA", kv_heads_per_cta);
  require(p.kv.kv_heads % kv_heads_per_cta == 0, "kv_heads (per-CTA pairs)", p.kv.kv_heads);
  require(ctas_per_sm == 2 || (ctas_per_sm == 3 && kv_heads_per_cta == 1 && map),
          "attend CTAs per SM", ctas_per_sm);
  if (!map) {
    require(gather == kCpAsync && kv_heads_per_cta == 1,
            "per-tile lookup variant (KV heads per CTA)", kv_heads_per_cta);
    launch<kCpAsync, false, 3, 1>(p, s);
  } else if (ctas_per_sm == 3) {  // 2 stages: three CTAs' shared memory fits one SM
    if (gather == kBulk)
      launch<kBulk, true, 2, 1, 3>(p, s);
    else {
      require(gather == kCpAsync, "attend gather form (3 CTAs per SM)", gather);
      launch<kCpAsync, true, 2, 1, 3>(p, s);
    }
  } else if (gather == kBulk) {
    require(kv_heads_per_cta == 1 && stages == 3, "attend stages (bulk gather)", stages);
    launch<kBulk, true, 3, 1>(p, s);
  } else if (kv_heads_per_cta == 2) {
    require(stages == 2 || stages == 3, "attend stages (2 KV heads per CTA)", stages);
    if (gather == kCpAsync)
      stages == 2 ? launch<kCpAsync, true, 2, 2>(p, s) : launch<kCpAsync, true, 3, 2>(p, s);
    else
      stages == 2 ? launch<kRegs, true, 2, 2>(p, s) : launch<kRegs, true, 3, 2>(p, s);
  } else {
    require(stages == 3 || stages == 4, "attend stages (1 KV head per CTA)", stages);
    if (gather == kCpAsync)
      stages == 3 ? launch<kCpAsync, true, 3, 1>(p, s) : launch<kCpAsync, true, 4, 1>(p, s);
    else
      stages == 3 ? launch<kRegs, true, 3, 1>(p, s) : launch<kRegs, true, 4, 1>(p, s);
  }
}

}  // namespace kvtier::qsa::detail
