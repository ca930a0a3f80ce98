// store: K/V rows into their pages (bf16 or fp8 + scales), with an optional write-through
// mirror. compress: close groups of 4 raw index keys into the slab, and keep the ring.
#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::qsa {

namespace {

struct StoreKvParams {
  const std::uint16_t* k;
  const std::uint16_t* v;
  Rows rows;
  KvBanks dst[2];
  PageTable table[2];
  int targets;
};

// grid: rows; block: 2 * kv_heads warps, warp w stores K (w even) or V of head w / 2. A lane
// holds 8 of the 256 dims. fp8: the warp's amax gives the scale (lane 0 writes it).
__global__ void store_kernel(const __grid_constant__ StoreKvParams p) {
  const int r = blockIdx.x, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kv_heads = p.dst[0].kv_heads;
  if (w >= 2 * kv_heads) return;
  const bool is_v = w % 2 == 1;
  const int h = w / 2;
  const std::uint16_t* src = (is_v ? p.v : p.k) + (std::int64_t{r} * kv_heads + h) * kHeadDim;
  const uint4 raw = *reinterpret_cast<const uint4*>(src + lane * 8);
  const std::int32_t req = p.rows.req[r];
  const std::int64_t pos = p.rows.pos[r];
  for (int t = 0; t < p.targets; ++t) {
    const KvBanks& b = p.dst[t];
    const std::int32_t page = p.table[t].pages[req * p.table[t].stride + pos / b.page_size];
    if (page < 0) continue;  // never written: the dummy page stays zero
    const std::int64_t token = std::int64_t{page} * b.page_size + pos % b.page_size;
    const std::int64_t elem = (token * kv_heads + h) * kHeadDim + lane * 8;
    void* codes = is_v ? b.v : b.k;
    if (!b.fp8) {
      *reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(codes) + elem) = raw;
      continue;
    }
    const std::uint16_t* x16 = reinterpret_cast<const std::uint16_t*>(&raw);
    float x[8];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      x[j] = detail::bf16_to_float(x16[j]);
      amax = fmaxf(amax, fabsf(x[j]));
    }
    amax = detail::warp_max(amax);
    const float scale = fmaxf(amax / kFp8Max, kFp8ScaleFloor);
    unsigned char c[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      c[j] = __nv_fp8_e4m3(x[j] / scale).__x;
    *reinterpret_cast<uint2*>(static_cast<std::uint8_t*>(codes) + elem) =
        *reinterpret_cast<const uint2*>(c);
    if (lane == 0) (is_v ? b.v_scale : b.k_scale)[token * kv_heads + h] = scale;
  }
}

struct CompressParams {
  const std::uint16_t* raw;
  Rows rows;
  CompressRequests fwd;
  const float* weight;
  float eps;
  Rope rope;
  float* ring;
  std::uint16_t* slab;
  std::int64_t slab_stride;
};

constexpr int kRatio = 4;

// grid: rows; block: 128 threads, one dim each. Only rows with pos % 4 == 3 work.
__global__ void compress_kernel(const __grid_constant__ CompressParams p) {
  __shared__ float buf[kIndexDim];
  __shared__ float warp_ss[kIndexDim / 32];
  const int r = blockIdx.x, d = threadIdx.x;
  const std::int64_t pos = p.rows.pos[r];
  if (pos % kRatio != kRatio - 1) return;
  const std::int32_t req = p.rows.req[r];
  const std::int32_t row0 = p.fwd.row_begin[req];
  const std::int32_t pos0 = p.fwd.pos_begin[req];
  float sum = 0.0f;
  for (int j = 0; j < kRatio; ++j) {
    const std::int64_t m = pos - (kRatio - 1) + j;
    sum += m >= pos0 ? detail::bf16_to_float(p.raw[(row0 + (m - pos0)) * kIndexDim + d])
                     : p.ring[(std::int64_t{req} * kRatio + m % kRatio) * kIndexDim + d];
  }
  const float mean = sum * (1.0f / kRatio);
  const float ss = detail::warp_sum(mean * mean);
  if (d % 32 == 0) warp_ss[d / 32] = ss;
  __syncthreads();
  const float total = warp_ss[0] + warp_ss[1] + warp_ss[2] + warp_ss[3];
  const float y = mean * rsqrtf(total / kIndexDim + p.eps) * (p.weight[d] + 1.0f);
  buf[d] = y;
  __syncthreads();
  const int half = p.rope.rope_dims / 2;
  float out = y;
  if (d < 2 * half) {
    const int i = d < half ? d : d - half;
    float c, s;
    detail::rope_cs(p.rope, i, pos - (kRatio - 1), c, s);
    out = d < half ? buf[i] * c - buf[i + half] * s : buf[i + half] * c + buf[i] * s;
  }
  p.slab[(std::int64_t{req} * p.slab_stride + pos / kRatio) * kIndexDim + d] =
      detail::float_to_bf16(out);
}

// grid: rows; block: 128. A row whose group stays open after this forward keeps its raw key.
__global__ void ring_kernel(const __grid_constant__ CompressParams p) {
  const int r = blockIdx.x, d = threadIdx.x;
  const std::int64_t pos = p.rows.pos[r];
  const std::int32_t req = p.rows.req[r];
  const std::int64_t last = p.fwd.pos_begin[req] + p.fwd.row_count[req] - 1;
  if ((pos / kRatio) * kRatio + kRatio - 1 <= last) return;  // closed in this forward
  p.ring[(std::int64_t{req} * kRatio + pos % kRatio) * kIndexDim + d] =
      detail::bf16_to_float(p.raw[std::int64_t{r} * kIndexDim + d]);
}

}  // namespace

void store_kv(const std::uint16_t* k, const std::uint16_t* v, Rows rows, const KvBanks& dst,
              const PageTable& dst_table, const KvBanks& mirror, const PageTable& mirror_table,
              cudaStream_t s) {
  detail::require(dst.kv_heads >= 1 && dst.kv_heads <= 16, "kv_heads", dst.kv_heads);
  detail::require(dst.page_size >= 1, "page_size", dst.page_size);
  const bool with_mirror = mirror.k != nullptr;
  if (with_mirror) {
    detail::require(mirror.kv_heads == dst.kv_heads, "mirror kv_heads", mirror.kv_heads);
    detail::require(mirror.fp8 == dst.fp8, "mirror fp8", mirror.fp8);
  }
  if (rows.count == 0) return;
  StoreKvParams p{k, v, rows, {dst, mirror}, {dst_table, mirror_table}, with_mirror ? 2 : 1};
  store_kernel<<<rows.count, 2 * dst.kv_heads * 32, 0, s>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void compress(const std::uint16_t* raw_keys, Rows rows, const CompressRequests& fwd,
              const float* norm_weight, float eps, const Rope& rope, float* ring,
              std::uint16_t* slab, std::int64_t slab_stride, cudaStream_t s) {
  detail::require(rope.rope_dims <= kIndexDim, "rope_dims", rope.rope_dims);
  if (rows.count == 0) return;
  CompressParams p{raw_keys, rows, fwd, norm_weight, eps, rope, ring, slab, slab_stride};
  compress_kernel<<<rows.count, kIndexDim, 0, s>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
  ring_kernel<<<rows.count, kIndexDim, 0, s>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::qsa
