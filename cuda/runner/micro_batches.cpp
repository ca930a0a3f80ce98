#include "cuda/runner/micro_batches.hpp"

namespace kvtier::runner {

RunnerStats overlapped_run_stats(const RunnerStats& overlapped, const RunnerStats& before,
                                 const OverlappedTime& time) {
  RunnerStats s = overlapped;
  s += before;
  s.decode_tokens = overlapped.decode_tokens;
  s.decode_ms = time.ms;
  s.decode_gpu_ms = time.ms;
  s.graph_forwards = overlapped.graph_forwards;
  s.decode_steady_ms = time.steady_ms;
  s.decode_steady_forwards = time.steady_steps;
  return s;
}

}  // namespace kvtier::runner
