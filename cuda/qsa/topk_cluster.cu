// top-k for decode-sized batches: a cluster of CTAs per row with the row's keys in shared
// memory (the entry points in topk_expand.cu choose it).
#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/qsa/qsa_common.cuh"
#include "cuda/qsa/topk_internal.cuh"

namespace kvtier::qsa {

namespace {

namespace cg = cooperative_groups;
using Scan = cub::BlockScan<int, 1024>;
using detail::kTopkClusterMaxCtaKeys;

// ---- Top-k for few rows: a cluster of CTAs per row, the row's keys kept in shared memory ------
// Decode has one to a few rows: one CTA per row (topk_kernel) leaves most of the GPU idle, and
// the multi-CTA chain pays a memset and five launches. Here a row belongs to one cluster of C
// CTAs (C = 1 .. 16, from max_n and the rows: below); CTA c of the cluster owns the slice
// [c seg, (c + 1) seg) of the row. Its logits are read from global memory once (16-byte loads
// where aligned), turned into order keys and kept in dynamic shared memory (the first `cap` keys
// of the slice; a longer slice reads the rest from global memory in every pass). Up to three
// histogram passes of 11 / 11 / 10 bits: each CTA counts its slice into its shared histogram,
// then CTA c sums bins [c B, (c + 1) B) of the C histograms through distributed shared memory
// (integer sums: the same totals whatever the order) and every CTA reads the totals and runs the
// same scan, so all find the same digit; the passes stop once the digit found so far holds
// exactly the keys still needed. The ordered write: each warp counts its picks (keys above the
// threshold prefix, keys equal to it) in a contiguous segment of the slice, the bases of the
// CTAs and warps follow in id order, and each warp writes its picks in id order with ballots.
// Same threshold and tie rule as topk_kernel: identical output. One launch, no workspace.
constexpr int kSmThreads = 1024;
constexpr int kSmWarps = kSmThreads / 32;
// Cluster size C = ceil(max_n / kSmKeysPerCta), at most kSmMaxCluster (or what the device
// co-schedules) and at most kSmLaunchCtas / rows: clusters of 1024-thread CTAs must find C free
// SMs in one GPC, and for 16 rows clusters of 8 or 16 CTAs no longer fit one wave. These
// constants are the fastest measured (bench/results/kernel-choices.md).
constexpr std::int64_t kSmKeysPerCta = 2048;
constexpr int kSmMaxCluster = 16;
constexpr int kSmLaunchCtas = 64;

struct SmParams {
  const float* logits;
  std::int64_t stride;
  const std::int32_t* n_valid;
  Rows rows;
  int ratio, k;
  std::int32_t* out;
  std::int64_t max_n;  // rows clamped to [0, max_n] (as the multi-CTA form does)
  std::int64_t cap;    // keys of its slice a CTA keeps in shared memory (a multiple of 4)
};

// Adds one to hist[bin] when `in`: one shared atomic per key, measured faster than aggregating
// a warp's keys per bin first (bench/results/kernel-choices.md).
__device__ __forceinline__ void hist_add(int* hist, bool in, unsigned bin) {
  if (in) atomicAdd(&hist[bin], 1);
}

// grid: rows x C CTAs in clusters of C (launched with the cluster dimension, C >= 1).
__global__ void __launch_bounds__(kSmThreads) topk_smem_kernel(const __grid_constant__ SmParams p) {
  extern __shared__ __align__(16) unsigned keys_s[];  // [cap] keys of the slice's first keys
  __shared__ int hist[kBins];                         // this CTA's counts
  __shared__ int tot[kBins];  // the cluster's counts of this CTA's bins (C > 1)
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ unsigned s_digit;
  __shared__ int s_above, s_count;
  __shared__ int warp_gt[kSmWarps], warp_eq[kSmWarps];
  __shared__ int cta_tot[2];  // this CTA's picks above the prefix and keys equal to it
  __shared__ int s_base[2];   // picks and ties of the CTAs before this one
  cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int r = static_cast<int>(blockIdx.x) / C;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  std::int64_t n =
      p.n_valid ? std::int64_t{p.n_valid[r]} : (std::int64_t{p.rows.pos[r]} + 1) / p.ratio;
  n = min(max(n, std::int64_t{0}), p.max_n);
  std::int32_t* out = p.out + std::int64_t{r} * p.k;
  if (n <= p.k) {  // the same for every CTA of the cluster: all leave, none waits
    if (rank == 0)
      for (int i = tid; i < p.k; i += kSmThreads)
        out[i] = i < n ? i : -1;
    return;
  }
  const std::int64_t seg = ((n + C - 1) / C + 3) / 4 * 4;  // a multiple of 4: aligned slices
  const std::int64_t s0 = min(n, rank * seg), s1 = min(n, s0 + seg), len = s1 - s0;
  const float* x = p.logits + std::int64_t{r} * p.stride + s0;  // the slice; ids are s0 + i
  const std::int64_t cached = min(len, p.cap);
  auto key_at = [&](std::int64_t i) { return i < cached ? keys_s[i] : order_key(x[i]); };
  const int per = (kBins + C - 1) / C;  // bins each CTA totals

  // Pass 0 fused with the load: keys into shared memory, histogram of the top 11 bits.
  for (int i = tid; i < kBins; i += kSmThreads)
    hist[i] = 0;
  __syncthreads();
  std::int64_t scalar_from = 0;
  if ((reinterpret_cast<std::uintptr_t>(x) & 15) == 0) {
    const std::int64_t n4 = cached / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (std::int64_t i0 = 0; i0 < n4; i0 += kSmThreads) {
      const std::int64_t i = i0 + tid;
      const bool valid = i < n4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (valid) v = x4[i];
      const unsigned k0 = order_key(v.x), k1 = order_key(v.y), k2 = order_key(v.z),
                     k3 = order_key(v.w);
      if (valid) reinterpret_cast<uint4*>(keys_s)[i] = make_uint4(k0, k1, k2, k3);
      hist_add(hist, valid, k0 >> 21);
      hist_add(hist, valid, k1 >> 21);
      hist_add(hist, valid, k2 >> 21);
      hist_add(hist, valid, k3 >> 21);
    }
    scalar_from = n4 * 4;
  }
  for (std::int64_t i0 = scalar_from; i0 < len; i0 += kSmThreads) {
    const std::int64_t i = i0 + tid;
    const bool valid = i < len;
    const unsigned key = valid ? order_key(x[i]) : 0u;
    if (valid && i < cached) keys_s[i] = key;
    hist_add(hist, valid, key >> 21);
  }

  unsigned prefix = 0, mask = 0;
  int remaining = p.k;  // keys still to take at and below the current prefix
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : (pass == 1 ? 10 : 0);
    const unsigned digit_mask = pass == 2 ? 0x3ffu : 0x7ffu;
    if (pass > 0) {
      for (int i = tid; i < kBins; i += kSmThreads)
        hist[i] = 0;
      __syncthreads();
      for (std::int64_t i0 = 0; i0 < len; i0 += kSmThreads) {
        const std::int64_t i = i0 + tid;
        const bool valid = i < len;
        const unsigned key = valid ? key_at(i) : 0u;
        const bool in = valid && (key & mask) == prefix;
        hist_add(hist, in, (key >> shift) & digit_mask);
      }
    }
    // Thread t holds bins 2047 - 2t and 2046 - 2t (descending digits), summed over the cluster;
    // the exclusive scan gives the count of keys in higher bins. Exactly one thread finds the
    // digit.
    const int d_hi = kBins - 1 - 2 * tid, d_lo = d_hi - 1;
    int c_hi, c_lo;
    if (C > 1) {
      cluster.sync();  // every CTA's histogram complete
      for (int b = rank * per + tid; b < min(kBins, (rank + 1) * per); b += kSmThreads) {
        int sum = 0;
        for (int q = 0; q < C; ++q)
          sum += cluster.map_shared_rank(hist, q)[b];
        tot[b] = sum;
      }
      cluster.sync();  // every CTA's totals complete; no histogram read any more
      c_hi = cluster.map_shared_rank(tot, d_hi / per)[d_hi];
      c_lo = cluster.map_shared_rank(tot, d_lo / per)[d_lo];
    } else {
      __syncthreads();
      c_hi = hist[d_hi];
      c_lo = hist[d_lo];
    }
    int above;
    Scan(scan_tmp).ExclusiveSum(c_hi + c_lo, above);
    if (above < remaining && above + c_hi >= remaining) {
      s_digit = static_cast<unsigned>(d_hi);
      s_above = above;
      s_count = c_hi;
    } else if (above + c_hi < remaining && above + c_hi + c_lo >= remaining) {
      s_digit = static_cast<unsigned>(d_lo);
      s_above = above + c_hi;
      s_count = c_lo;
    }
    __syncthreads();
    prefix |= s_digit << shift;
    mask |= digit_mask << shift;
    remaining -= s_above;
    const bool all_taken = s_count == remaining;  // every key of the prefix is picked
    // Before the next pass: s_* and the histogram read by every thread of this CTA (the totals
    // of the other CTAs are next written after the next pass's first cluster barrier, which
    // each CTA reaches only after these reads).
    __syncthreads();
    if (all_taken) break;  // the same in every CTA of the cluster
  }
  // Picks: (key & mask) > prefix, and the first `remaining` keys with (key & mask) == prefix.
  const int need_eq = remaining;
  const std::int64_t wseg = (len + kSmWarps - 1) / kSmWarps;
  const std::int64_t w0 = min(len, std::int64_t{warp} * wseg), w1 = min(len, w0 + wseg);
  int gt = 0, eq = 0;
  for (std::int64_t i = w0 + lane; i < w1; i += 32) {
    const unsigned key = key_at(i) & mask;
    gt += key > prefix ? 1 : 0;
    eq += key == prefix ? 1 : 0;
  }
  gt = __reduce_add_sync(0xffffffffu, gt);
  eq = __reduce_add_sync(0xffffffffu, eq);
  if (lane == 0) {
    warp_gt[warp] = gt;
    warp_eq[warp] = eq;
  }
  __syncthreads();
  if (tid == 0) {
    int a = 0, b = 0;
    for (int w = 0; w < kSmWarps; ++w) {
      a += warp_gt[w];
      b += warp_eq[w];
    }
    cta_tot[0] = a;
    cta_tot[1] = b;
  }
  if (C > 1) cluster.sync();  // every CTA's totals visible
  if (tid == 0) {
    int sel = 0, eqb = 0;
    for (int q = 0; q < rank; ++q) {
      const int* t = cluster.map_shared_rank(cta_tot, q);
      sel += t[0] + min(max(need_eq - eqb, 0), t[1]);
      eqb += t[1];
    }
    s_base[0] = sel;
    s_base[1] = eqb;
  }
  if (C > 1)
    cluster.sync();  // s_base visible; no CTA leaves while another still reads its totals
  else
    __syncthreads();
  int sel_base = s_base[0], eq_base = s_base[1];  // picks and ties before this warp's segment
  for (int w = 0; w < warp; ++w) {
    sel_base += warp_gt[w] + min(max(need_eq - eq_base, 0), warp_eq[w]);
    eq_base += warp_eq[w];
  }
  const unsigned lt = (1u << lane) - 1u;
  for (std::int64_t i0 = w0; i0 < w1; i0 += 32) {
    const std::int64_t i = i0 + lane;
    const unsigned key = i < w1 ? key_at(i) & mask : 0u;
    const bool is_eq = i < w1 && key == prefix;
    const unsigned eq_bits = __ballot_sync(0xffffffffu, is_eq);
    const bool take =
        (i < w1 && key > prefix) || (is_eq && eq_base + __popc(eq_bits & lt) < need_eq);
    const unsigned take_bits = __ballot_sync(0xffffffffu, take);
    if (take) out[sel_base + __popc(take_bits & lt)] = static_cast<std::int32_t>(s0 + i);
    sel_base += __popc(take_bits);
    eq_base += __popc(eq_bits);
  }
}

// The one-time device queries below may run while a stream is being captured (the first call
// can be inside a graph capture): relaxed capture mode for this thread meanwhile, so that no
// query counts as an unsafe call of the capture.
class RelaxedCapture {
 public:
  RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

template <class F>
bool smem_attributes(F* f, int bytes) {
  return cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) ==
             cudaSuccess &&
         cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
}

// Keys a CTA of the shared-memory kernel can cache: the opt-in maximum less its static shared
// memory (the kernel's attributes are set once).
std::int64_t smem_key_capacity() {
  static const std::int64_t cap = [] {
    const RelaxedCapture relaxed;
    int dev = 0, optin = 0;
    cudaFuncAttributes attr{};
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
            cudaSuccess ||
        cudaFuncGetAttributes(&attr, topk_smem_kernel) != cudaSuccess)
      return std::int64_t{-1};
    const std::int64_t bytes = optin - static_cast<std::int64_t>(attr.sharedSizeBytes);
    if (bytes < 16 || !smem_attributes(topk_smem_kernel, static_cast<int>(bytes)))
      return std::int64_t{-1};
    return bytes / 16 * 4;
  }();
  if (cap < 0) throw std::runtime_error("qsa topk: shared-memory attributes failed");
  return cap;
}

cudaLaunchConfig_t smem_config(int ctas, int cluster, std::int64_t cap, cudaStream_t s,
                               cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(kSmThreads);
  cfg.dynamicSmemBytes = static_cast<std::size_t>(cap) * 4;
  cfg.stream = s;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// The largest cluster (<= 16) the device co-schedules with slices of kTopkClusterMaxCtaKeys keys
// (asked once).
int smem_max_cluster() {
  static const int most = [] {
    const std::int64_t cap = std::min(smem_key_capacity(), kTopkClusterMaxCtaKeys + 4);
    const RelaxedCapture relaxed;
    for (int c = kSmMaxCluster; c > 1; --c) {
      cudaLaunchAttribute attr[1];
      const cudaLaunchConfig_t cfg = smem_config(c, c, cap, nullptr, attr);
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, topk_smem_kernel, &cfg) == cudaSuccess &&
          clusters >= 1)
        return c;
      (void)cudaGetLastError();  // a refused size: try a smaller one
    }
    return 1;
  }();
  return most;
}

int cluster_size(int rows, std::int64_t max_n) {
  const int most = std::min(smem_max_cluster(), std::max(1, kSmLaunchCtas / rows));
  return static_cast<int>(
      std::clamp<std::int64_t>(max_n / kSmKeysPerCta + (max_n % kSmKeysPerCta != 0), 1, most));
}

void launch(const float* logits, std::int64_t stride, const std::int32_t* n_valid, Rows rows,
            int ratio, int k, std::int32_t* out, std::int64_t max_n, int cluster, cudaStream_t s) {
  const std::int64_t most = smem_key_capacity();  // a multiple of 4
  // A slice holds at most ceil(max_n / cluster) keys rounded up to 4.
  const std::int64_t slice = std::min(most, max_n / cluster) + 4;
  const std::int64_t cap = std::min(most, slice / 4 * 4);
  const SmParams p{logits, stride, n_valid, rows, ratio, k, out, max_n, cap};
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = smem_config(rows.count * cluster, cluster, cap, s, attr);
  KVT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, topk_smem_kernel, p));
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

namespace detail {

int topk_cluster_size(int rows, std::int64_t max_n) {
  return cluster_size(rows, max_n);
}

void launch_topk_cluster(const float* logits, std::int64_t stride, const std::int32_t* n_valid,
                         Rows rows, int ratio, int k, std::int32_t* out, std::int64_t max_n,
                         int cluster, cudaStream_t s) {
  launch(logits, stride, n_valid, rows, ratio, k, out, max_n, cluster, s);
}

}  // namespace detail

}  // namespace kvtier::qsa
