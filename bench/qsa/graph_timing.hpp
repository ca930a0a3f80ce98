#pragma once
// GPU time per call of calls replayed as one CUDA graph, for the QSA benchmarks (bench_qsa,
// bench_qsa_decode). The events are recorded on the graph's own stream around each replay, so
// the figure holds the GPU's time from the first call's start to the last call's end: neither
// the host's launch of the graph nor its wait for the end.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cuda/cuda_check.hpp"

namespace kvtier::qsa::bench {

// enqueue(i, s) enqueues call i on stream s; `calls` of them are captured into one graph,
// replayed once to warm up and then `replays` times; returns the median replay / calls.
inline double graph_us_per_call(const std::function<void(int, cudaStream_t)>& enqueue, int calls,
                                int replays) {
  cudaStream_t s;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  KVT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i)
    enqueue(i, s);
  KVT_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  KVT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  KVT_CUDA_CHECK(cudaEventCreate(&a));
  KVT_CUDA_CHECK(cudaEventCreate(&b));
  KVT_CUDA_CHECK(cudaGraphLaunch(exec, s));
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int r = 0; r < replays; ++r) {
    KVT_CUDA_CHECK(cudaEventRecord(a, s));
    KVT_CUDA_CHECK(cudaGraphLaunch(exec, s));
    KVT_CUDA_CHECK(cudaEventRecord(b, s));
    KVT_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3 / calls);
  }
  KVT_CUDA_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace kvtier::qsa::bench
