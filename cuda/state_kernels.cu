// Small state kernels of the residency engine: translate, flush, release, the step counter
// and per-step counters. All element-wise over the core's plain arrays.
#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"
#include "model/translate.hpp"
#include "model/victims_scan.hpp"

namespace kvtier::cuda {
namespace {

__global__ void translate_kernel(const __grid_constant__ TranslateParams p) {
  int missing = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x)
    missing +=
        translate_pages(p.logical + i, 1, p.slot_of_page, p.num_pages, p.dummy, p.physical + i);
  if (missing) atomicAdd(p.missing, missing);
}

__global__ void locate_kernel(const __grid_constant__ LocateParams p) {
  int in_place = 0;
  const std::int64_t total = std::int64_t{p.n} * p.layers;
  for (std::int64_t v = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; v < total;
       v += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t l = v / p.n, i = v - l * p.n;
    in_place += locate_pages(p.logical + i, 1, p.slot_of_page[l], p.num_pages, p.physical + v);
  }
  if (in_place && p.in_place != nullptr) atomicAdd(p.in_place, in_place);
}

__global__ void flush_kernel(ResidencyView st) {
  for (SlotId s = blockIdx.x * blockDim.x + threadIdx.x; s < st.num_slots;
       s += gridDim.x * blockDim.x) {
    const PageId pg = st.page_of_slot[s];
    if (pg != kNoPage) st.slot_of_page[pg] = kNoSlot;
    st.page_of_slot[s] = kNoPage;
    st.last_use[s] = kFreeSlotStep;
  }
}

}  // namespace

void launch_translate(const TranslateParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  const int blocks = (p.n + 255) / 256 < 264 ? (p.n + 255) / 256 : 264;
  translate_kernel<<<blocks, 256, 0, stream>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void launch_locate(const LocateParams& p, cudaStream_t stream) {
  const std::int64_t total = std::int64_t{p.n} * p.layers;
  if (total <= 0) return;
  const int blocks = static_cast<int>((total + 255) / 256 < 528 ? (total + 255) / 256 : 528);
  locate_kernel<<<blocks, 256, 0, stream>>>(p);
  KVT_CUDA_CHECK(cudaGetLastError());
}

void launch_flush(ResidencyView st, cudaStream_t stream) {
  const int blocks = (st.num_slots + 255) / 256 < 528 ? (st.num_slots + 255) / 256 : 528;
  flush_kernel<<<blocks, 256, 0, stream>>>(st);
  KVT_CUDA_CHECK(cudaGetLastError());
}
}  // namespace kvtier::cuda

namespace kvtier::cuda {
namespace {
__global__ void set_step_kernel(std::int64_t* step, std::int64_t value) {
  *step = value;
}
__global__ void advance_step_kernel(std::int64_t* step) {
  ++*step;
}
}  // namespace

void launch_set_step(std::int64_t* step, std::int64_t value, cudaStream_t stream) {
  set_step_kernel<<<1, 1, 0, stream>>>(step, value);
  KVT_CUDA_CHECK(cudaGetLastError());
}
void launch_advance_step(std::int64_t* step, cudaStream_t stream) {
  advance_step_kernel<<<1, 1, 0, stream>>>(step);
  KVT_CUDA_CHECK(cudaGetLastError());
}
}  // namespace kvtier::cuda

namespace kvtier::cuda {
namespace {
__global__ void release_kernel(ResidencyView st, const PageId* pages, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    ScanVictims v;
    release_page(st, pages[i], v);
  }
}
}  // namespace

void launch_release(ResidencyView st, const PageId* pages, int n, cudaStream_t stream) {
  if (n <= 0) return;
  const int blocks = (n + 255) / 256 < 264 ? (n + 255) / 256 : 264;
  release_kernel<<<blocks, 256, 0, stream>>>(st, pages, n);
  KVT_CUDA_CHECK(cudaGetLastError());
}
}  // namespace kvtier::cuda
