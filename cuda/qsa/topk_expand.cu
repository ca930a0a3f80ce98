// top-k: exact radix select of the k largest fp32 logits per row, ties to the lower block id,
// written ascending; expand: chosen blocks -> token positions plus the causal tail.
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <limits>

#include "cuda/qsa/qsa_common.cuh"
#include "cuda/qsa/topk_internal.cuh"
#include "model/cost_model.hpp"

namespace kvtier::qsa {

// The cost model prices the cluster kernel's rows with their own terms (TopkPath).
static_assert(detail::kTopkClusterMaxRows == kTopkClusterRows);

namespace {

constexpr int kThreads = 1024;
constexpr int kItems = 16;  // contiguous items per thread in the ordered final pass

struct TopkParams {
  const float* logits;
  std::int64_t stride;
  const std::int32_t* n_valid;
  Rows rows;
  int ratio, k;
  std::int32_t* out;
};

using Scan = cub::BlockScan<int, kThreads>;

// One CTA of 1024 threads per row. Three histogram passes find the k-th largest key T and how
// many keys equal to T are taken (need_eq); a final pass over tiles in ascending id order
// selects keys > T and the first need_eq keys == T, placing them by a block-wide prefix scan.
// Deterministic: no atomics decide an order (the shared histograms only count).
__global__ void __launch_bounds__(kThreads) topk_kernel(const __grid_constant__ TopkParams p) {
  __shared__ int hist[kBins];
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ unsigned found_digit;
  __shared__ int found_above;
  const int r = blockIdx.x, tid = threadIdx.x;
  const std::int64_t n =
      p.n_valid ? std::int64_t{p.n_valid[r]} : (std::int64_t{p.rows.pos[r]} + 1) / p.ratio;
  std::int32_t* out = p.out + std::int64_t{r} * p.k;
  const float* x = p.logits + std::int64_t{r} * p.stride;
  if (n <= p.k) {
    for (int i = tid; i < p.k; i += kThreads)
      out[i] = i < n ? i : -1;
    return;
  }
  unsigned prefix = 0, mask = 0;
  int remaining = p.k;  // keys still to take at and below the current prefix
  const int shifts[3] = {21, 10, 0};
  const int widths[3] = {11, 11, 10};
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = shifts[pass];
    const unsigned digit_mask = (1u << widths[pass]) - 1u;
    for (int i = tid; i < kBins; i += kThreads)
      hist[i] = 0;
    __syncthreads();
    for (std::int64_t i = tid; i < n; i += kThreads) {
      const unsigned key = order_key(x[i]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & digit_mask], 1);
    }
    __syncthreads();
    // Thread t holds bins 2047 - 2t and 2046 - 2t (descending digits); the exclusive scan
    // gives the count of keys in higher bins.
    const int d_hi = kBins - 1 - 2 * tid, d_lo = d_hi - 1;
    const int c_hi = hist[d_hi], c_lo = hist[d_lo];
    int above;
    Scan(scan_tmp).ExclusiveSum(c_hi + c_lo, above);
    if (above < remaining && above + c_hi >= remaining) {
      found_digit = static_cast<unsigned>(d_hi);
      found_above = above;
    } else if (above + c_hi < remaining && above + c_hi + c_lo >= remaining) {
      found_digit = static_cast<unsigned>(d_lo);
      found_above = above + c_hi;
    }
    __syncthreads();
    prefix |= found_digit << shift;
    mask |= digit_mask << shift;
    remaining -= found_above;
    __syncthreads();  // found_* read by all before the next pass writes them
  }
  const unsigned threshold = prefix;
  const int need_eq = remaining;
  int eq_base = 0, sel_base = 0;
  for (std::int64_t tile = 0; tile < n; tile += std::int64_t{kThreads} * kItems) {
    const std::int64_t first = tile + std::int64_t{tid} * kItems;
    unsigned keys[kItems];
    int eq = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      keys[j] = first + j < n ? order_key(x[first + j]) : 0u;
      eq += (first + j < n && keys[j] == threshold) ? 1 : 0;
    }
    int eq_before, eq_total;
    Scan(scan_tmp).ExclusiveSum(eq, eq_before, eq_total);
    __syncthreads();
    int rank = eq_base + eq_before;
    int sel = 0;
    bool take[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const bool valid = first + j < n;
      bool t = valid && keys[j] > threshold;
      if (valid && keys[j] == threshold) {
        t = rank < need_eq;
        ++rank;
      }
      take[j] = t;
      sel += t ? 1 : 0;
    }
    int sel_before, sel_total;
    Scan(scan_tmp).ExclusiveSum(sel, sel_before, sel_total);
    __syncthreads();
    int o = sel_base + sel_before;
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      if (take[j]) out[o++] = static_cast<std::int32_t>(first + j);
    eq_base += eq_total;
    sel_base += sel_total;
  }
}

// ---- Multi-CTA top-k ------------------------------------------------------------------------
// The same radix select with each row cut into chunks of kChunk keys, one CTA per (chunk, row),
// in five launches after a memset of the workspace: three histogram passes (shared histogram of
// the chunk, warp-aggregated atomics, then added into the row's global histogram: integer sums,
// so the counts do not depend on the order), a count pass (keys > T and == T per chunk) and a
// write pass (each chunk places its picks after those of the chunks before it, ties ranked in
// id order across chunks). Every CTA re-derives the digits found so far from the global
// histograms (same data, same scan: same answer in every CTA).
constexpr int kMcThreads = 512;
constexpr int kMcItems = 16;
constexpr int kChunk = kMcThreads * kMcItems;  // 8192 keys per CTA
using McScan = cub::BlockScan<int, kMcThreads>;

struct McParams {
  const float* logits;
  std::int64_t stride;
  const std::int32_t* n_valid;
  Rows rows;
  int ratio, k;
  std::int32_t* out;
  int* hist;     // [rows][3][kBins]
  int2* counts;  // [rows][chunks] (> T, == T)
  int chunks;
  std::int64_t max_n;
};

__device__ __forceinline__ std::int64_t mc_row_n(const McParams& p, int r) {
  const std::int64_t n =
      p.n_valid ? std::int64_t{p.n_valid[r]} : (std::int64_t{p.rows.pos[r]} + 1) / p.ratio;
  return min(max(n, std::int64_t{0}), p.max_n);
}

struct McState {
  unsigned prefix, mask;
  int remaining;
};

// The digits of passes 0 .. passes-1 from the row's global histograms (all threads call it).
__device__ McState mc_state(const McParams& p, int r, int passes, McScan::TempStorage& tmp,
                            unsigned& found_digit, int& found_above) {
  McState st{0u, 0u, p.k};
  const int shifts[3] = {21, 10, 0};
  const int widths[3] = {11, 11, 10};
  const int tid = threadIdx.x;
  for (int pass = 0; pass < passes; ++pass) {
    const int* h = p.hist + (std::int64_t{r} * 3 + pass) * kBins;
    // Thread t holds the 4 bins 2047 - 4t .. 2044 - 4t (descending digits).
    int c[4], tot = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      c[i] = h[kBins - 1 - 4 * tid - i];
      tot += c[i];
    }
    int above;
    McScan(tmp).ExclusiveSum(tot, above);
    int run = above;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (run < st.remaining && run + c[i] >= st.remaining) {
        found_digit = static_cast<unsigned>(kBins - 1 - 4 * tid - i);
        found_above = run;
      }
      run += c[i];
    }
    __syncthreads();
    st.prefix |= found_digit << shifts[pass];
    st.mask |= ((1u << widths[pass]) - 1u) << shifts[pass];
    st.remaining -= found_above;
    __syncthreads();
  }
  return st;
}

template <int kPass>
__global__ void __launch_bounds__(kMcThreads) topk_hist_kernel(const __grid_constant__ McParams p) {
  __shared__ int hist[kBins];
  __shared__ typename McScan::TempStorage tmp;
  __shared__ unsigned found_digit;
  __shared__ int found_above;
  const int c = blockIdx.x, r = blockIdx.y, tid = threadIdx.x;
  const std::int64_t n = mc_row_n(p, r);
  const std::int64_t begin = std::int64_t{c} * kChunk;
  if (n <= p.k || begin >= n) return;  // uniform over the CTA
  const McState st = mc_state(p, r, kPass, tmp, found_digit, found_above);
  constexpr int shift = kPass == 0 ? 21 : (kPass == 1 ? 10 : 0);
  constexpr unsigned digit_mask = kPass == 2 ? 0x3ffu : 0x7ffu;
  for (int i = tid; i < kBins; i += kMcThreads)
    hist[i] = 0;
  __syncthreads();
  const float* x = p.logits + std::int64_t{r} * p.stride;
  const std::int64_t end = min(n, begin + kChunk);
  for (std::int64_t i0 = begin; i0 < end; i0 += kMcThreads) {
    const std::int64_t i = i0 + tid;
    const bool valid = i < end;
    const unsigned key = valid ? order_key(x[i]) : 0u;
    const bool in = valid && (key & st.mask) == st.prefix;
    const unsigned bin = in ? (key >> shift) & digit_mask : 0xffffffffu;
    // Warp-aggregated: one shared atomic per distinct bin of the warp.
    const unsigned active = __ballot_sync(0xffffffffu, in);
    if (in) {
      const unsigned same = __match_any_sync(active, bin);
      if ((threadIdx.x % 32) == static_cast<unsigned>(__ffs(static_cast<int>(same)) - 1))
        atomicAdd(&hist[bin], __popc(same));
    }
  }
  __syncthreads();
  int* g = p.hist + (std::int64_t{r} * 3 + kPass) * kBins;
  for (int i = tid; i < kBins; i += kMcThreads)
    if (hist[i] != 0) atomicAdd(&g[i], hist[i]);
}

__global__ void __launch_bounds__(kMcThreads)
    topk_count_kernel(const __grid_constant__ McParams p) {
  __shared__ typename McScan::TempStorage tmp;
  __shared__ unsigned found_digit;
  __shared__ int found_above;
  __shared__ int sums[2][kMcThreads / 32];
  const int c = blockIdx.x, r = blockIdx.y, tid = threadIdx.x;
  const std::int64_t n = mc_row_n(p, r);
  const std::int64_t begin = std::int64_t{c} * kChunk;
  if (n <= p.k || begin >= n) return;
  const McState st = mc_state(p, r, 3, tmp, found_digit, found_above);
  const float* x = p.logits + std::int64_t{r} * p.stride;
  const std::int64_t end = min(n, begin + kChunk);
  int gt = 0, eq = 0;
  for (std::int64_t i = begin + tid; i < end; i += kMcThreads) {
    const unsigned key = order_key(x[i]);
    gt += key > st.prefix ? 1 : 0;
    eq += key == st.prefix ? 1 : 0;
  }
  gt = __reduce_add_sync(0xffffffffu, gt);
  eq = __reduce_add_sync(0xffffffffu, eq);
  if (tid % 32 == 0) {
    sums[0][tid / 32] = gt;
    sums[1][tid / 32] = eq;
  }
  __syncthreads();
  if (tid == 0) {
    int a = 0, b = 0;
    for (int w = 0; w < kMcThreads / 32; ++w) {
      a += sums[0][w];
      b += sums[1][w];
    }
    p.counts[std::int64_t{r} * p.chunks + c] = make_int2(a, b);
  }
}

__global__ void __launch_bounds__(kMcThreads)
    topk_write_kernel(const __grid_constant__ McParams p) {
  __shared__ typename McScan::TempStorage tmp;
  __shared__ unsigned found_digit;
  __shared__ int found_above;
  __shared__ int base[2];  // picks and ties of the chunks before this one
  const int c = blockIdx.x, r = blockIdx.y, tid = threadIdx.x;
  const std::int64_t n = mc_row_n(p, r);
  std::int32_t* out = p.out + std::int64_t{r} * p.k;
  if (n <= p.k) {
    if (c == 0)
      for (int i = tid; i < p.k; i += kMcThreads)
        out[i] = i < n ? i : -1;
    return;
  }
  const std::int64_t begin = std::int64_t{c} * kChunk;
  if (begin >= n) return;
  const McState st = mc_state(p, r, 3, tmp, found_digit, found_above);
  const int need_eq = st.remaining;
  if (tid == 0) {
    int sel = 0, eqb = 0;
    for (int j = 0; j < c; ++j) {
      const int2 cnt = p.counts[std::int64_t{r} * p.chunks + j];
      sel += cnt.x + min(max(need_eq - eqb, 0), cnt.y);
      eqb += cnt.y;
    }
    base[0] = sel;
    base[1] = eqb;
  }
  __syncthreads();
  const float* x = p.logits + std::int64_t{r} * p.stride;
  const std::int64_t first = begin + std::int64_t{tid} * kMcItems;
  unsigned keys[kMcItems];
  int eq = 0;
#pragma unroll
  for (int j = 0; j < kMcItems; ++j) {
    keys[j] = first + j < n ? order_key(x[first + j]) : 0u;
    eq += (first + j < n && keys[j] == st.prefix) ? 1 : 0;
  }
  int eq_before;
  McScan(tmp).ExclusiveSum(eq, eq_before);
  __syncthreads();
  int rank = base[1] + eq_before;
  int sel = 0;
  bool take[kMcItems];
#pragma unroll
  for (int j = 0; j < kMcItems; ++j) {
    const bool valid = first + j < n;
    bool t = valid && keys[j] > st.prefix;
    if (valid && keys[j] == st.prefix) {
      t = rank < need_eq;
      ++rank;
    }
    take[j] = t;
    sel += t ? 1 : 0;
  }
  int sel_before;
  McScan(tmp).ExclusiveSum(sel, sel_before);
  int o = base[0] + sel_before;
#pragma unroll
  for (int j = 0; j < kMcItems; ++j)
    if (take[j]) out[o++] = static_cast<std::int32_t>(first + j);
}

struct ExpandParams {
  const std::int32_t* blocks;
  int k;
  Rows rows;
  int ratio;
  std::int32_t* tokens;
  int width;
};

// grid: rows; block: 256. Chosen blocks are a prefix of the row's list (padding at the end).
__global__ void expand_kernel(const __grid_constant__ ExpandParams p) {
  const int r = blockIdx.x;
  const std::int32_t* b = p.blocks + std::int64_t{r} * p.k;
  int count = 0;
  for (int i0 = 0; i0 < p.k; i0 += blockDim.x) {
    const int i = i0 + threadIdx.x;
    count += __syncthreads_count(i < p.k && b[i] >= 0);
  }
  const std::int64_t pos = p.rows.pos[r];
  const std::int64_t tail_begin = (pos + 1) / p.ratio * p.ratio;
  const int n_block_tokens = count * p.ratio;
  const int n_tokens = n_block_tokens + static_cast<int>(pos + 1 - tail_begin);
  std::int32_t* t = p.tokens + std::int64_t{r} * p.width;
  for (int i = threadIdx.x; i < p.width; i += blockDim.x) {
    std::int32_t v = -1;
    if (i < n_block_tokens)
      v = b[i / p.ratio] * p.ratio + i % p.ratio;
    else if (i < n_tokens)
      v = static_cast<std::int32_t>(tail_begin + (i - n_block_tokens));
    t[i] = v;
  }
}

}  // namespace

void topk(const float* logits, std::int64_t logit_stride, const std::int32_t* n_valid, Rows rows,
          int ratio, int k, std::int32_t* out, cudaStream_t s) {
  detail::require(k >= 1, "k", k);
  detail::require(ratio >= 1, "ratio", ratio);
  if (rows.count == 0) return;
  if (rows.count <= detail::kTopkClusterMaxRows) {
    constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max();
    detail::launch_topk_cluster(logits, logit_stride, n_valid, rows, ratio, k, out, kUnbounded,
                                detail::topk_cluster_size(rows.count, kUnbounded), s);
    return;
  }
  topk_kernel<<<rows.count, kThreads, 0, s>>>({logits, logit_stride, n_valid, rows, ratio, k, out});
  KVT_CUDA_CHECK(cudaGetLastError());
}

std::int64_t topk_workspace_bytes(int rows, std::int64_t max_n) {
  const std::int64_t chunks = (std::max<std::int64_t>(max_n, 1) + kChunk - 1) / kChunk;
  return std::int64_t{rows} * (3 * kBins * 4 + chunks * 8);
}

void topk(const float* logits, std::int64_t logit_stride, const std::int32_t* n_valid, Rows rows,
          int ratio, int k, std::int32_t* out, void* work, std::int64_t max_n, cudaStream_t s) {
  detail::require(k >= 1, "k", k);
  detail::require(ratio >= 1, "ratio", ratio);
  detail::require(max_n >= 0, "max_n", max_n);
  if (rows.count == 0) return;
  detail::require(rows.count <= 65535, "rows", rows.count);
  if (rows.count <= detail::kTopkClusterMaxRows) {
    const int cluster = detail::topk_cluster_size(rows.count, max_n);
    if (max_n <= detail::kTopkClusterMaxCtaKeys * cluster) {
      detail::launch_topk_cluster(logits, logit_stride, n_valid, rows, ratio, k, out, max_n,
                                  cluster, s);
      return;
    }
  }
  const std::int64_t chunks = (std::max<std::int64_t>(max_n, 1) + kChunk - 1) / kChunk;
  detail::require(chunks <= 65535, "max_n", max_n);
  int* hist = static_cast<int*>(work);
  int2* counts = reinterpret_cast<int2*>(hist + std::int64_t{rows.count} * 3 * kBins);
  KVT_CUDA_CHECK(cudaMemsetAsync(hist, 0, std::size_t(rows.count) * 3 * kBins * sizeof(int), s));
  const McParams p{logits, logit_stride, n_valid, rows,   ratio,
                   k,      out,          hist,    counts, static_cast<int>(chunks),
                   max_n};
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(rows.count));
  topk_hist_kernel<0><<<grid, kMcThreads, 0, s>>>(p);
  topk_hist_kernel<1><<<grid, kMcThreads, 0, s>>>(p);
  topk_hist_kernel<2><<<grid, kMcThreads, 0, s>>>(p);
  topk_count_kernel<<<grid, kMcThreads, 0, s>>>(p);
  topk_write_kernel<<<grid, kMcThreads, 0, s>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void expand(const std::int32_t* blocks, int k, Rows rows, int ratio, std::int32_t* tokens,
            int width, cudaStream_t s) {
  detail::require(width >= k * ratio + ratio - 1, "expand width", width);
  if (rows.count == 0) return;
  expand_kernel<<<rows.count, 256, 0, s>>>({blocks, k, rows, ratio, tokens, width});
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::qsa
