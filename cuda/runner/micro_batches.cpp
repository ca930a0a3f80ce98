#include "cuda/runner/micro_batches.hpp"

namespace kvtier::runner {

RunnerStats overlapped_run_stats(const RunnerStats& overlapped, const RunnerStats& before,
                                 double overlapped_ms) {
  RunnerStats s = overlapped;
  s += before;
  s.decode_tokens = overlapped.decode_tokens;
  s.decode_ms = overlapped_ms;
  s.decode_gpu_ms = overlapped_ms;
  s.graph_forwards = overlapped.graph_forwards;
  // one runner's forward times say nothing of the overlapped steps
  s.decode_steady_ms = 0;
  s.decode_steady_forwards = 0;
  return s;
}

}  // namespace kvtier::runner
