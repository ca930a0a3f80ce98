// top-k: exact radix select of the k largest fp32 logits per row, ties to the lower block id,
// written ascending; expand: chosen blocks -> token positions plus the causal tail.
#include <cub/block/block_scan.cuh>

#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::qsa {

namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 2048;  // 11-bit digits: passes of 11, 11 and 10 bits
constexpr int kItems = 16;   // contiguous items per thread in the ordered final pass

// Order-preserving map fp32 -> uint32 (larger float, larger key); NaN counts as -inf.
__device__ __forceinline__ unsigned order_key(float f) {
  if (f != f) f = -__int_as_float(0x7f800000);
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

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
  topk_kernel<<<rows.count, kThreads, 0, s>>>({logits, logit_stride, n_valid, rows, ratio, k, out});
  detail::check_launch("topk");
}

void expand(const std::int32_t* blocks, int k, Rows rows, int ratio, std::int32_t* tokens,
            int width, cudaStream_t s) {
  detail::require(width >= k * ratio + ratio - 1, "expand width", width);
  if (rows.count == 0) return;
  expand_kernel<<<rows.count, 256, 0, s>>>({blocks, k, rows, ratio, tokens, width});
  detail::check_launch("expand");
}

}  // namespace kvtier::qsa
