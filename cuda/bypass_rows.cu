// Mirror rows that bypass the pool read their pages from the host bank in place
// (kernels.hpp, launch_read_rows_in_place).
#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"
#include "model/translate.hpp"

namespace kvtier::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void read_rows_in_place_kernel(const __grid_constant__ InPlaceRowsParams p) {
  const std::int64_t per_layer = std::int64_t{p.rows} * p.stride;
  const std::int64_t total = per_layer * p.layers;
  for (std::int64_t v = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < total;
       v += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t e = v % per_layer;
    const auto r = static_cast<int>(e / p.stride);
    if (e % p.stride >= p.entries[r]) continue;
    const PageId page = p.logical[e];
    p.tables[v] = page >= 0 ? in_place_ref(page) : kNoSlot;
  }
}

}  // namespace

void launch_read_rows_in_place(const InPlaceRowsParams& p, cudaStream_t stream) {
  const std::int64_t total = std::int64_t{p.rows} * p.stride * p.layers;
  if (total <= 0) return;
  const std::int64_t blocks = (total + kThreads - 1) / kThreads;
  read_rows_in_place_kernel<<<static_cast<int>(blocks < 1024 ? blocks : 1024), kThreads, 0,
                              stream>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::cuda
