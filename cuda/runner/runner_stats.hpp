#pragma once
// What a QsaRunner counts (QsaRunner::stats): forwards, tokens, times, residency and K/V
// traffic. Plain C++, so that the figures of several runners combine on the CPU.
#include <cstdint>
#include <map>
#include <string>

namespace kvtier::runner {

// Counters since construction (or reset_stats). Byte counts are the K/V traffic of the
// placement: misses copied to the pool, pages staged for prefill, tokens read in place over
// the link, and tokens written through to the host bank.
struct RunnerStats {
  std::int64_t forwards = 0;
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_tokens = 0;
  double prefill_ms = 0;  // wall time of prefill forwards (each ends with a synchronise)
  double decode_ms = 0;
  std::int64_t hits = 0;  // mirror ensure, summed over QSA layers
  std::int64_t misses = 0;
  std::int64_t evictions = 0;
  std::int64_t drops = 0;  // pages past the select width (mirror)
  std::int64_t miss_copy_bytes = 0;
  std::int64_t prefetched = 0;  // mirror, prefetch policy: pages copied ahead, all layers
  std::int64_t prefetch_copy_bytes = 0;
  std::int64_t staged_bytes = 0;
  std::int64_t staged_windows = 0;
  std::int64_t in_place_bytes = 0;
  std::int64_t write_through_bytes = 0;
  std::int64_t filled_tokens = 0;      // positions written by fill() instead of prefill
  std::int64_t graph_forwards = 0;     // decode forwards replayed from a CUDA graph
  std::int64_t in_place_forwards = 0;  // mirror decode forwards that read misses in place
  double decode_gpu_ms = 0;            // CUDA events around the decode forwards' GPU work
  // The decode forwards of a shape seen before that did not capture its graph: what the
  // planner prices. The first forward of a shape loads its kernels (lazy module loading), and
  // the second captures and instantiates its graph; a short run spreads both over its steps.
  double decode_steady_ms = 0;
  std::int64_t decode_steady_forwards = 0;
  std::int64_t decode_steady_h2d_bytes = 0;  // their link bytes (copies, in-place reads)
  // Host -> device over the link: miss copies, prefetches, staged windows and in-place reads.
  std::int64_t h2d_bytes() const {
    return miss_copy_bytes + prefetch_copy_bytes + staged_bytes + in_place_bytes;
  }
  // With profile_phases: GPU milliseconds per phase, decode and prefill forwards apart
  // ("decode/attend", "prefill/index", ...), summed over layers and forwards.
  std::map<std::string, double> phases;
};

// Sums b into a (every counter, the phases by name): the figures of several runners as one.
RunnerStats& operator+=(RunnerStats& a, const RunnerStats& b);

}  // namespace kvtier::runner
