#pragma once
// Owning handles for CUDA streams, events and executable graphs, so that every path out of a
// function (an exception included) gives them back. Creation failures throw CudaError;
// destruction never throws (a failure there cannot be handled, and a destructor runs during
// unwinding).
#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.hpp"

namespace kvtier::cuda {

template <class Handle, cudaError_t (*Destroy)(Handle)>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(Handle h) : h_(h) {}
  ~CudaHandle() { reset(); }
  CudaHandle(CudaHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  CudaHandle& operator=(CudaHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;

  Handle get() const { return h_; }
  operator Handle() const { return h_; }  // NOLINT: passes straight to the runtime API
  void reset() {
    if (h_ != nullptr) (void)Destroy(std::exchange(h_, nullptr));
  }

 private:
  Handle h_ = nullptr;
};

using Stream = CudaHandle<cudaStream_t, cudaStreamDestroy>;
using Event = CudaHandle<cudaEvent_t, cudaEventDestroy>;
using GraphExec = CudaHandle<cudaGraphExec_t, cudaGraphExecDestroy>;
using Graph = CudaHandle<cudaGraph_t, cudaGraphDestroy>;

// A non-blocking stream (it does not synchronise with the legacy default stream).
inline Stream make_stream() {
  cudaStream_t s = nullptr;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

// An event; `timing` false makes it a cheaper ordering-only event.
inline Event make_event(bool timing = true) {
  cudaEvent_t e = nullptr;
  KVT_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}

// Ends the capture on `s` and instantiates what it recorded.
inline GraphExec end_capture(cudaStream_t s) {
  cudaGraph_t raw = nullptr;
  KVT_CUDA_CHECK(cudaStreamEndCapture(s, &raw));
  const Graph graph(raw);
  cudaGraphExec_t exec = nullptr;
  KVT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  return GraphExec(exec);
}

}  // namespace kvtier::cuda
