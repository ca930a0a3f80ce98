// RoPE (partial NeoX, optional YaRN) and the index-query norm + RoPE.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::qsa {

Rope make_rope(int rope_dims, double theta, bool yarn, double yarn_factor,
               double yarn_original_max) {
  detail::require(rope_dims > 0 && rope_dims % 2 == 0 && rope_dims / 2 <= kMaxRopeHalf, "rope_dims",
                  rope_dims);
  Rope r;
  r.rope_dims = rope_dims;
  const int half = rope_dims / 2;
  for (int i = 0; i < half; ++i)
    r.inv_freq[i] = std::pow(theta, -2.0 * i / rope_dims);
  if (!yarn) return r;
  const double dim = rope_dims;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(yarn_original_max / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(32.0)), 0.0);
  double high = std::min(std::ceil(correction_dim(1.0)), dim - 1.0);
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    r.inv_freq[i] =
        r.inv_freq[i] / yarn_factor * (1.0 - extrapolation) + r.inv_freq[i] * extrapolation;
  }
  r.attention_factor = 0.1 * std::log(yarn_factor) + 1.0;
  return r;
}

namespace {

struct RopeParams {
  std::uint16_t* x;
  int heads, head_dim;
  Rows rows;
  Rope rope;
};

// grid: rows; block: heads x (rope_dims / 2) threads, one rotated pair each.
__global__ void rope_kernel(const __grid_constant__ RopeParams p) {
  const int r = blockIdx.x;
  const int half = p.rope.rope_dims / 2;
  const std::int64_t pos = p.rows.pos[r];
  for (int t = threadIdx.x; t < p.heads * half; t += blockDim.x) {
    const int h = t / half, i = t % half;
    std::uint16_t* v = p.x + (std::int64_t{r} * p.heads + h) * p.head_dim;
    float c, s;
    detail::rope_cs(p.rope, i, pos, c, s);
    const float x1 = detail::bf16_to_float(v[i]);
    const float x2 = detail::bf16_to_float(v[i + half]);
    v[i] = detail::float_to_bf16(x1 * c - x2 * s);
    v[i + half] = detail::float_to_bf16(x2 * c + x1 * s);
  }
}

struct IndexQueryParams {
  const std::uint16_t* raw;
  const float* weight;
  int heads;
  float eps;
  Rows rows;
  Rope rope;
  std::uint16_t* out;
};

// grid: rows; block: heads warps, one head each; lane holds 4 of the 128 dims.
__global__ void index_query_kernel(const __grid_constant__ IndexQueryParams p) {
  __shared__ float buf[32][kIndexDim];
  const int r = blockIdx.x, h = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (h >= p.heads) return;
  const std::int64_t base = (std::int64_t{r} * p.heads + h) * kIndexDim;
  float x[4];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    x[j] = detail::bf16_to_float(p.raw[base + lane * 4 + j]);
    ss += x[j] * x[j];
  }
  const float inv = rsqrtf(detail::warp_sum(ss) / kIndexDim + p.eps);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    buf[h][lane * 4 + j] = x[j] * inv * (p.weight[lane * 4 + j] + 1.0f);
  __syncwarp();
  const int half = p.rope.rope_dims / 2;
  const std::int64_t pos = p.rows.pos[r];
  float y[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int d = lane * 4 + j;
    y[j] = buf[h][d];
    if (d < 2 * half) {
      const int i = d < half ? d : d - half;
      float c, s;
      detail::rope_cs(p.rope, i, pos, c, s);
      y[j] = d < half ? buf[h][i] * c - buf[h][i + half] * s : buf[h][i + half] * c + buf[h][i] * s;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
    p.out[base + lane * 4 + j] = detail::float_to_bf16(y[j]);
}

}  // namespace

void rope_inplace(std::uint16_t* x, int heads, int head_dim, Rows rows, const Rope& rope,
                  cudaStream_t s) {
  detail::require(rope.rope_dims <= head_dim, "rope_dims", rope.rope_dims);
  if (rows.count == 0 || heads == 0) return;
  const int threads = std::min(1024, ((heads * rope.rope_dims / 2 + 31) / 32) * 32);
  rope_kernel<<<rows.count, threads, 0, s>>>({x, heads, head_dim, rows, rope});
  KVT_CUDA_CHECK(cudaGetLastError());
}

void index_queries(const std::uint16_t* raw, const float* norm_weight, int heads, float eps,
                   Rows rows, const Rope& rope, std::uint16_t* out, cudaStream_t s) {
  detail::require(heads >= 1 && heads <= 32, "index heads", heads);
  detail::require(rope.rope_dims <= kIndexDim, "rope_dims", rope.rope_dims);
  if (rows.count == 0) return;
  index_query_kernel<<<rows.count, heads * 32, 0, s>>>(
      {raw, norm_weight, heads, eps, rows, rope, out});
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::qsa
