#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace kvtier::cuda {

// A failed CUDA runtime call: what was called, where, and the runtime's own message.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const char* call, const char* file, int line)
      : std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(code) + " (" +
                           cudaGetErrorString(code) + ") in " + call + " at " + file + ":" +
                           std::to_string(line)),
        code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// The one error-check macro: throws CudaError naming the call, file and line. It never
// synchronises; callers synchronise where a result must be read.
#define KVT_CUDA_CHECK(call)                                                \
  do {                                                                      \
    const cudaError_t kvt_err_ = (call);                                    \
    if (kvt_err_ != cudaSuccess)                                            \
      throw ::kvtier::cuda::CudaError(kvt_err_, #call, __FILE__, __LINE__); \
  } while (0)

// Owning device allocation of `count` elements of T (cudaMalloc; plain device memory).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (count > 0) KVT_CUDA_CHECK(cudaMalloc(&ptr_, count * sizeof(T)));
  }
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceArray(DeviceArray&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      if (ptr_ != nullptr) cudaFree(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace kvtier::cuda
