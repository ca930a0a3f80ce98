#pragma once
// Shared by the top-k kernels: topk_expand.cu (one CTA per row, the multi-CTA chain, the entry
// points) and topk_cluster.cu (a cluster of CTAs per row for decode-sized batches).
#include <cstdint>

#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::qsa {

namespace {

constexpr int kBins = 2048;  // 11-bit digits: passes of 11, 11 and 10 bits

// Order-preserving map fp32 -> uint32 (larger float, larger key); NaN counts as -inf.
__device__ __forceinline__ unsigned order_key(float f) {
  if (f != f) f = -__int_as_float(0x7f800000);
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

}  // namespace

namespace detail {

// Path choice of the entry points (topk_expand.cu): the shared-memory kernel in clusters for at
// most kTopkClusterMaxRows rows (with a workspace: while a CTA's slice holds at most
// kTopkClusterMaxCtaKeys keys; the multi-CTA chain beyond); more rows, one CTA per row without a
// workspace and the multi-CTA chain with one.
inline constexpr int kTopkClusterMaxRows = 16;
inline constexpr std::int64_t kTopkClusterMaxCtaKeys = 32768;

// Cluster size for `rows` rows of up to max_n keys (max_n unknown: the largest allowed).
int topk_cluster_size(int rows, std::int64_t max_n);
// The top-k of every row by clusters of `cluster` CTAs: one launch, no workspace.
void launch_topk_cluster(const float* logits, std::int64_t stride, const std::int32_t* n_valid,
                         Rows rows, int ratio, int k, std::int32_t* out, std::int64_t max_n,
                         int cluster, cudaStream_t s);

}  // namespace detail

}  // namespace kvtier::qsa
