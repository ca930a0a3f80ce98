#pragma once
// Growing device arrays and asynchronous uploads of host vectors into them, for host-staged
// per-forward data (the trace replay).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "cuda/cuda_check.hpp"

namespace kvtier::cuda {

// Makes `a` hold at least n elements (twice n when it has to grow, so that growing forwards do
// not reallocate every time); contents are not kept.
template <class T>
void fit(DeviceArray<T>& a, std::size_t n) {
  if (a.size() < n || a.get() == nullptr) a = DeviceArray<T>(std::max<std::size_t>(n, 1) * 2);
}

// Copies v into d on stream s (d grown as needed). v must stay alive until s reaches the copy.
template <class T>
void upload(DeviceArray<T>& d, const std::vector<T>& v, cudaStream_t s) {
  fit(d, v.size());
  if (!v.empty())
    KVT_CUDA_CHECK(
        cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

}  // namespace kvtier::cuda
