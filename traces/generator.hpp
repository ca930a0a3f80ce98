#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "traces/trace_record.hpp"

namespace kvtier::traces {

// What a synthetic trace looks like. Workload fields say which requests run; behaviour
// fields say how each (request, QSA layer)'s selection of blocks evolves from one step to the
// next (docs/trace-format.md, "The generator", explains the model and its calibration).
struct GenParams {
  std::uint64_t seed = 1;
  // --- workload
  int requests = 1;
  int concurrent = 1;               // requests in flight at once (rows per decode forward)
  std::int64_t prompt_min = 32768;  // prompt tokens, log-uniform in [min, max]
  std::int64_t prompt_max = 32768;
  std::int64_t decode_min = 1000;  // decode tokens, uniform in [min, max]
  std::int64_t decode_max = 1000;
  std::int64_t prefill_chunk = 2048;  // tokens per prefill row (chunked prefill)
  int prefill_samples = 8;            // tokens of a chunk whose selections are simulated and united
  // Requests after the first share this many prompt tokens (rounded down to whole pages)
  // with request 1 through the prefix cache; their prefill starts after the shared pages.
  std::int64_t shared_prefix = 0;
  // Every request begins at this depth: its first fill_depth tokens are in the KV cache
  // already (written directly, as `kvtier run --fill-depth` writes them), and only its prompt
  // after them is prefilled. The request's context is fill_depth + prompt + decode tokens.
  // Not with shared_prefix.
  std::int64_t fill_depth = 0;
  // --- selection behaviour
  // (defaults: the "dsv4-flash" preset)
  double step_overlap = 0.705;   // chance a body block stays selected at the next step
  double recent_frac = 0.375;    // replacement drawn from blocks dropped in the last steps
  int recent_window = 28;        // ... of the last this many steps
  double layer_coupling = 0.45;  // replacement drawn from the previous layer's selection
  double layer_follow = 0;       // extra drop chance of a block the previous layer dropped
  int sinks_always = 6;          // blocks 0 .. sinks_always-1 are always selected
  int sinks_likely = 12;         // blocks sinks_always .. sinks_likely-1 with sinks_likely_p
  double sinks_likely_p = 0.99;
  double newest_p = 0.71;  // the newest complete block
  double zipf_s = 0.3;     // popularity skew (power law over a random ranking)

  // Throws ConfigError naming the first field out of range.
  void validate() const;
};

// Presets named after the behaviour they reproduce (the docs cite the measurements):
//  "dsv4-flash"      DeepSeek-V4-Flash-like: LRU per request+layer at 2x/4x/8x top-k
//                    ~79/88/92.5 % hits on 11k-118k prompts, adjacent-layer overlap ~0.35,
//                    sinks, newest block ~71 % (step overlap ~0.75: the 2x LRU hit rate
//                    bounds it from above);
//  "sparse-trained"  models trained with sparse attention: step overlap ~0.85;
//  "dense-topk"      dense model with a post-hoc top-k (ShadowKV): step overlap ~0.6;
//  "shared-indexer"  layers that share an indexer: adjacent-layer overlap ~0.85.
// Throws ConfigError for an unknown name (listing the known ones).
GenParams gen_preset(const std::string& name);
std::vector<std::string> gen_preset_names();

// Produces the records of a synthetic trace one at a time, deterministically from the
// seed (same parameters and seed: identical records on any platform).
class TraceGenerator {
 public:
  // Throws ConfigError, before anything is allocated, for a bad geometry or parameters and
  // for a request that could outgrow the geometry's largest context (prompt_max + decode_max
  // beyond rope_max_positions x yarn_factor). `threads` > 1 build the requests' selections
  // side by side (0: every core) and the next forwards while the caller takes these; the
  // records do not depend on it.
  TraceGenerator(const Geometry& g, const GenParams& p, int threads = 1);
  ~TraceGenerator();
  bool next(Record& out);
  // Forwards produced so far (for progress bars).
  std::uint64_t forwards_done() const { return forwards_.load(); }

 private:
  struct Request;
  struct Ahead;  // the thread that builds the next forwards
  // The next records into `out` (pending_, or a batch of the thread ahead): requests that
  // begin, a window of forwards, requests that end. False when every request is done.
  bool produce(std::deque<Record>& out);
  void start_requests(std::deque<Record>& out);
  void build_window(std::deque<Record>& out);

  Geometry g_;
  GenParams p_;
  std::uint64_t sched_state_;
  int threads_;
  int next_id_ = 1;
  std::vector<std::unique_ptr<Request>> active_;
  std::deque<Record> pending_;  // records next() hands out next
  std::atomic<std::uint64_t> forwards_{0};
  std::unique_ptr<Ahead> ahead_;
};

}  // namespace kvtier::traces
