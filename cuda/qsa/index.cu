// Index scoring: logits[r][b] = sum_h relu(q_h . k_b) / sqrt(128). A CTA scores a tile of 64
// rows x 64 blocks. When the tile's rows belong to one request (prefill), the 4 head products
// run on tensor cores (WMMA bf16 16x16x16, fp32 accumulate) and relu + sum over heads is applied
// to the accumulator fragments; otherwise (decode batches mixing requests) each thread scores
// (row, block) pairs on the CUDA cores.
#include <mma.h>

#include "cuda/qsa/qsa_common.cuh"

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

__global__ void __launch_bounds__(kThreads) index_kernel(const __grid_constant__ IndexParams p) {
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
      const std::uint16_t* k =
          p.slab + (std::int64_t{p.rows.req[r]} * p.slab_stride + b) * kIndexDim;
      float score = 0.0f;
      for (int h = 0; h < p.heads; ++h) {
        const std::uint16_t* q = p.iq + (std::int64_t{r} * p.heads + h) * kIndexDim;
        float dot = 0.0f;
        for (int d = 0; d < kIndexDim; ++d)
          dot += detail::bf16_to_float(q[d]) * detail::bf16_to_float(k[d]);
        score += fmaxf(dot, 0.0f);
      }
      p.logits[std::int64_t{r} * p.logit_stride + b] = score * inv_sqrt;
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

}  // namespace

void index_scores(const std::uint16_t* iq, int heads, Rows rows, const std::uint16_t* slab,
                  std::int64_t slab_stride, float* logits, std::int64_t logit_stride,
                  std::int64_t max_blocks, cudaStream_t s) {
  detail::require(heads >= 1 && heads <= 16, "index heads", heads);
  detail::require(max_blocks <= logit_stride, "max_blocks (> logit_stride)", max_blocks);
  detail::require((rows.count + kTileRows - 1) / kTileRows <= 65535, "rows", rows.count);
  if (rows.count == 0 || max_blocks <= 0) return;
  const dim3 grid(static_cast<unsigned>((max_blocks + kTileBlocks - 1) / kTileBlocks),
                  static_cast<unsigned>((rows.count + kTileRows - 1) / kTileRows));
  index_kernel<<<grid, kThreads, 0, s>>>(
      {iq, heads, rows, slab, slab_stride, logits, logit_stride});
  detail::check_launch("index_scores");
}

}  // namespace kvtier::qsa
