#pragma once
// GPU time per call of calls replayed as one CUDA graph, for the QSA benchmarks (bench_qsa,
// bench_qsa_decode). The events are recorded on the graph's own stream around each replay, so
// the figure holds the GPU's time from the first call's start to the last call's end: neither
// the host's launch of the graph nor its wait for the end.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "tests/qsa/qsa_gpu_runner.hpp"

namespace kvtier::qsa::bench {

// enqueue(i, s) enqueues call i on stream s; `calls` of them are captured into one graph,
// replayed once to warm up and then `replays` times; returns the median replay / calls.
inline double graph_us_per_call(const std::function<void(int, cudaStream_t)>& enqueue, int calls,
                                int replays) {
  cudaStream_t s;
  QSA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  QSA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i)
    enqueue(i, s);
  QSA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  QSA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  QSA_CHECK(cudaEventCreate(&a));
  QSA_CHECK(cudaEventCreate(&b));
  QSA_CHECK(cudaGraphLaunch(exec, s));
  QSA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int r = 0; r < replays; ++r) {
    QSA_CHECK(cudaEventRecord(a, s));
    QSA_CHECK(cudaGraphLaunch(exec, s));
    QSA_CHECK(cudaEventRecord(b, s));
    QSA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    QSA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3 / calls);
  }
  QSA_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace kvtier::qsa::bench
