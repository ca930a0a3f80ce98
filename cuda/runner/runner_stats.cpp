#include "cuda/runner/runner_stats.hpp"

namespace kvtier::runner {

RunnerStats& operator+=(RunnerStats& a, const RunnerStats& b) {
  a.forwards += b.forwards;
  a.prefill_tokens += b.prefill_tokens;
  a.decode_tokens += b.decode_tokens;
  a.prefill_ms += b.prefill_ms;
  a.decode_ms += b.decode_ms;
  a.hits += b.hits;
  a.misses += b.misses;
  a.evictions += b.evictions;
  a.drops += b.drops;
  a.miss_copy_bytes += b.miss_copy_bytes;
  a.prefetched += b.prefetched;
  a.in_place_forwards += b.in_place_forwards;
  a.prefetch_copy_bytes += b.prefetch_copy_bytes;
  a.staged_bytes += b.staged_bytes;
  a.staged_windows += b.staged_windows;
  a.in_place_bytes += b.in_place_bytes;
  a.write_through_bytes += b.write_through_bytes;
  a.filled_tokens += b.filled_tokens;
  a.graph_forwards += b.graph_forwards;
  a.decode_gpu_ms += b.decode_gpu_ms;
  a.decode_steady_ms += b.decode_steady_ms;
  a.decode_steady_forwards += b.decode_steady_forwards;
  a.decode_steady_h2d_bytes += b.decode_steady_h2d_bytes;
  for (const auto& [name, ms] : b.phases)
    a.phases[name] += ms;
  return a;
}

}  // namespace kvtier::runner
