// attend: sparse paged GQA attention split over the selected tokens, merged by fp32 LSE;
// fold: merge passes over disjoint token windows by their LSE.
#include <algorithm>

#include "cuda/qsa/attend_internal.cuh"
#include "model/attend_grid.hpp"

namespace kvtier::qsa {

namespace {

using detail::AttendParams;
using detail::kLog2e;
using detail::kNegInf;
constexpr int kWarps = detail::kAttWarps;
constexpr int kThreads = detail::kAttThreads;
constexpr int kPerLane = kHeadDim / 32;  // 8 dims of a head per lane

// The 8 dims of `lane` of one K or V row of fp8 codes, scaled.
__device__ __forceinline__ void load_row(const KvBanks& kv, const void* base, const float* scales,
                                         std::int64_t token, int kvh, int lane, float* out) {
  const std::int64_t elem = (token * kv.kv_heads + kvh) * kHeadDim + lane * kPerLane;
  const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const std::uint8_t*>(base) + elem);
  const float scale = scales[token * kv.kv_heads + kvh];
  const __nv_fp8x2_storage_t* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
#pragma unroll
  for (int j = 0; j < kPerLane / 2; ++j) {
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[j], __NV_E4M3)));
    out[2 * j] = f.x * scale;
    out[2 * j + 1] = f.y * scale;
  }
}

// The fp8 attend on the CUDA cores (bf16 banks run on tensor cores: attend_mma.cu).
// grid: (kv_heads, splits, rows); block: 4 warps. The CTA owns the kGroup query heads of one KV
// head and a contiguous slice of the row's token list; warp w takes tokens w, w + 4, ... of the
// slice, two at a time, keeping an online softmax per head (every lane holds the same m and l,
// and 8 dims of each head's accumulator). The warps merge in shared memory in warp order
// (deterministic), and the CTA writes its partial (acc, m, l) for the merge kernel.
template <int kGroup>
__global__ void __launch_bounds__(kThreads)
    attend_fp8_kernel(const __grid_constant__ AttendParams p) {
  __shared__ __align__(16) float qs[kGroup][kHeadDim];
  __shared__ __align__(16) float acc_s[kGroup][kHeadDim];
  __shared__ float ml_s[kWarps][kGroup][2];
  const int kvh = blockIdx.x, split = blockIdx.y, r = blockIdx.z;
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
        // an entry <= -2 reads page -2 - e of the in-place banks (same layout: codes and
        // scales exactly as the pool holds them), when the table has them
        const bool in_place = page <= -2 && p.table.in_place.k != nullptr;
        const KvBanks& kv = in_place ? p.table.in_place : p.kv;
        if (in_place) {
          page = -2 - page;
        } else if (page < 0) {
          page = p.table.dummy;
        }
        const std::int64_t token = std::int64_t{page} * p.kv.page_size + tok % p.kv.page_size;
        load_row(kv, in_place ? kv.k : kbase, kv.k_scale, token, kvh, lane, kf[u]);
        load_row(kv, in_place ? kv.v : vbase, kv.v_scale, token, kvh, lane, vf[u]);
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

struct MergeParams {
  const float* work_acc;
  const float* work_ml;
  int splits;
  float* o;
  float* lse;
};

// grid: rows * q_heads * slices; block: 8 warps. A block merges 256 / slices dims of one (row,
// head): the splits spread over the warps (warp w: splits w, w + 8, ...; lane: kDims dims), so a
// row of many splits costs a few L2 round trips, not one per split. Slices exist for attends of
// few rows and many splits (a one-row prefill query: 132 splits, 24 blocks): there 24 blocks
// reading 3.3 MB of partials set the merge's time, so more blocks each read a quarter. The max
// over splits is exact in any order; every dim's weighted sum is added per warp in split order,
// then over the warps in warp order, whatever the slices: deterministic, the same bits on every
// run and placement and for either slice count.
constexpr int kMergeWarps = 8;

template <int kDims>
struct MergePart {
  float2 ml;       // (m, l) of the split
  float a[kDims];  // the lane's dims of its accumulator
};

// kDims dims a lane: 8 (one slice, the whole head) or 2 (four slices of 64 dims).
template <int kDims>
struct MergeShape {
  static constexpr int kSlices = kPerLane / kDims;
  static constexpr int kSliceDims = kHeadDim / kSlices;
  // Splits a warp holds in registers: with at most kMergeWarps * kHeld splits every partial is
  // loaded in one round trip before the max is known (one slice: 72, the decode defaults; four
  // slices: 136, a one-row attend's 132 on the H200); more splits take a max pass, then a
  // round trip per 4 splits of a warp.
  static constexpr int kHeld = kDims == 8 ? 9 : 17;
};

template <int kDims>
__device__ __forceinline__ MergePart<kDims> load_part(const MergeParams& p, std::int64_t rh, int s,
                                                      int dim0) {
  MergePart<kDims> x;
  x.ml = *reinterpret_cast<const float2*>(&p.work_ml[(rh * p.splits + s) * 2]);
  const float* src = &p.work_acc[(rh * p.splits + s) * kHeadDim + dim0];
  if constexpr (kDims == 8) {
    const float4 a = *reinterpret_cast<const float4*>(src);
    const float4 b = *reinterpret_cast<const float4*>(src + 4);
    x.a[0] = a.x, x.a[1] = a.y, x.a[2] = a.z, x.a[3] = a.w;
    x.a[4] = b.x, x.a[5] = b.y, x.a[6] = b.z, x.a[7] = b.w;
  } else {
    static_assert(kDims == 2);
    const float2 a = *reinterpret_cast<const float2*>(src);
    x.a[0] = a.x, x.a[1] = a.y;
  }
  return x;
}
template <int kDims>
__device__ __forceinline__ MergePart<kDims> empty_part() {
  MergePart<kDims> x{};
  x.ml = make_float2(kNegInf, 0.0f);
  return x;
}
template <int kDims>
__device__ __forceinline__ void add_part(const MergePart<kDims>& x, float mx, float& sum,
                                         float (&acc)[kDims]) {
  const float w = x.ml.x == kNegInf ? 0.0f : exp2f(x.ml.x - mx);
  sum += x.ml.x == kNegInf ? 0.0f : x.ml.y * w;
#pragma unroll
  for (int j = 0; j < kDims; ++j)
    acc[j] += x.a[j] * w;
}

template <int kDims>
__global__ void __launch_bounds__(kMergeWarps * 32)
    merge_kernel(const __grid_constant__ MergeParams p) {
  using Shape = MergeShape<kDims>;
  constexpr int kHeld = Shape::kHeld;
  // An attend launched early after this merge may take the SMs this grid leaves free.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  __shared__ float red[kMergeWarps];
  __shared__ float sum_s[kMergeWarps];
  __shared__ __align__(16) float acc_s[kMergeWarps][Shape::kSliceDims];
  const std::int64_t rh = blockIdx.x / Shape::kSlices;
  const int slice0 = static_cast<int>(blockIdx.x % Shape::kSlices) * Shape::kSliceDims;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dim0 = slice0 + lane * kDims;
  const bool held = p.splits <= kMergeWarps * kHeld;
  MergePart<kDims> part[kHeld];
  float mx = kNegInf;
  if (held) {
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int s = warp + i * kMergeWarps;
      part[i] = s < p.splits ? load_part<kDims>(p, rh, s, dim0) : empty_part<kDims>();
      mx = fmaxf(mx, part[i].ml.x);
    }
  } else {
    for (int s = threadIdx.x; s < p.splits; s += kMergeWarps * 32)
      mx = fmaxf(mx, p.work_ml[(rh * p.splits + s) * 2]);
    mx = detail::warp_max(mx);
  }
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
#pragma unroll
  for (int w = 1; w < kMergeWarps; ++w)
    mx = fmaxf(mx, red[w]);
  float sum = 0.0f, acc[kDims] = {};
  if (mx != kNegInf) {
    if (held) {
#pragma unroll
      for (int i = 0; i < kHeld; ++i)
        if (warp + i * kMergeWarps < p.splits) add_part<kDims>(part[i], mx, sum, acc);
    } else {
#pragma unroll 4
      for (int s = warp; s < p.splits; s += kMergeWarps)
        add_part<kDims>(load_part<kDims>(p, rh, s, dim0), mx, sum, acc);
    }
  }
#pragma unroll
  for (int j = 0; j < kDims; ++j)
    acc_s[warp][lane * kDims + j] = acc[j];
  if (lane == 0) sum_s[warp] = sum;
  __syncthreads();
  const int d = threadIdx.x;
  if (d >= Shape::kSliceDims) return;
  float total = 0.0f, l = 0.0f;
#pragma unroll
  for (int w = 0; w < kMergeWarps; ++w) {
    total += acc_s[w][d];
    l += sum_s[w];
  }
  p.o[rh * kHeadDim + slice0 + d] = mx == kNegInf ? 0.0f : total / l;
  if (p.lse && slice0 + d == 0) p.lse[rh] = mx == kNegInf ? kNegInf : mx + log2f(l);
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

int merge_default_slices(int rows, int q_heads, int splits) {
  // Four slices only where one block per (row, head) would walk its splits in a loop (more than
  // it holds: a one-row prefill query's 132 on the H200) and the blocks stay fewer than the SMs.
  // Where every split is held, four times the blocks cost more than they save (H200,
  // 2026-12-03: 4 decode rows of 33 splits 8.6 -> 10.7 us, one row of 16 splits 7.3 -> 7.5).
  const bool held = splits <= kMergeWarps * MergeShape<8>::kHeld;
  return !held && std::int64_t{rows} * q_heads < sm_count() ? 4 : 1;
}

int attend_default_splits(int rows, int kv_heads, int width) {
  // the core's rule (model/attend_grid.hpp), which the cost model prices the CTAs by
  return kvtier::attend_splits(rows, kv_heads, width, sm_count());
}

namespace {

// Whether the tensor-core attend launches early (AttendParams::early): for device banks (the
// mirror's pool, in-place rows or not) when the grid takes more than one CTA slot per SM. Early
// measured faster for such grids and slower for one CTA per SM and for host banks
// (bench/results/kernel-choices.md); it never changes the output bits.
bool early_launch_pays(bool host_banks, std::int64_t ctas) {
  return !host_banks && ctas > sm_count();
}

// The merge as a programmatic dependent of the attend: its CTAs start while the attend runs
// and wait (griddepcontrol.wait) for its partials.
template <int kDims>
void launch_merge_shape(const MergeParams& mp, int rows_heads, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>(rows_heads * MergeShape<kDims>::kSlices);
  detail::launch_programmatic(merge_kernel<kDims>, dim3(blocks), dim3(kMergeWarps * 32), 0, s, mp);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void launch_merge(const MergeParams& mp, int rows_heads, int slices, cudaStream_t s) {
  if (slices == 1) {
    launch_merge_shape<8>(mp, rows_heads, s);
  } else {
    launch_merge_shape<2>(mp, rows_heads, s);
  }
}

}  // namespace

void merge(const float* work, int rows, int q_heads, int splits, float* o, float* lse, int slices,
           cudaStream_t s) {
  detail::require(slices == 1 || slices == 4, "merge slices (1 or 4)", slices);
  detail::require(splits >= 1, "splits", splits);
  if (rows == 0) return;
  const float* work_ml = work + std::int64_t{rows} * q_heads * splits * kHeadDim;
  launch_merge(MergeParams{work, work_ml, splits, o, lse}, rows * q_heads, slices, s);
}

AttendVariant attend_bf16_kernel(bool host_banks) {
  return host_banks ? AttendVariant::mma_load : AttendVariant::mma_async;
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
  AttendParams p{q, q_heads, rows, tokens, width, kv, table, splits, work_acc, work_ml};
  const std::int64_t ctas = std::int64_t{rows.count} * splits * kv.kv_heads;
  // Where most of what the attend reads lies: host memory when the banks are the host's, or
  // when a table with in-place entries says most are read in place; the gather and the early
  // launch follow it.
  const bool reads_host = kv.host || (table.in_place.k != nullptr && table.mostly_in_place);
  p.early = early_launch_pays(reads_host, ctas);
  if (table.in_place.k != nullptr) {
    detail::require(kv.fp8 == table.in_place.fp8, "in-place banks' dtype (fp8)",
                    table.in_place.fp8 ? 1 : 0);
    detail::require(
        table.in_place.page_size == kv.page_size && table.in_place.kv_heads == kv.kv_heads,
        "in-place banks' page size / KV heads", table.in_place.page_size);
  }
  if (kv.fp8) {
    const dim3 grid(static_cast<unsigned>(kv.kv_heads), static_cast<unsigned>(splits),
                    static_cast<unsigned>(rows.count));
    attend_fp8_kernel<12><<<grid, kThreads, 0, s>>>(p);
  } else {
    // pool rows and in-place rows, if any, in one kernel, either gather taking both
    detail::launch_attend_tc(p, attend_bf16_kernel(reads_host) == AttendVariant::mma_async, s);
  }
  KVT_CUDA_CHECK(cudaGetLastError());
  launch_merge(MergeParams{work_acc, work_ml, splits, o, lse}, rows.count * q_heads,
               merge_default_slices(rows.count, q_heads, splits), s);
}

void fold(float* acc_o, float* acc_lse, const float* o, const float* lse, int rows, int heads,
          cudaStream_t s) {
  if (rows * heads == 0) return;
  fold_kernel<<<rows * heads, kHeadDim, 0, s>>>({acc_o, acc_lse, o, lse});
  KVT_CUDA_CHECK(cudaGetLastError());
}

void fold_reset(float* acc_o, float* acc_lse, int rows, int heads, cudaStream_t s) {
  if (rows * heads == 0) return;
  fold_reset_kernel<<<rows * heads, kHeadDim, 0, s>>>(acc_o, acc_lse);
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::qsa
