#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::validation {

// One forward as one side saw it: its time and the residency counters (summed over layers).
struct ForwardResult {
  std::int64_t forward = 0;
  double us = 0;  // GPU: gpu_us; simulator: qsa_us
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t evictions = 0;
  bool decode = false;  // GPU side only: every token of the forward is a decode token
};

// One side's run of a trace: what `kvtier run --trace ... --json` or `kvtier sim --forward
// trace-replay --per-forward --json` printed (docs/validation.md, "Compare").
struct ForwardResults {
  std::string file;        // where it was read from, for messages
  std::string trace;       // "trace"
  std::string placement;   // "placement"
  std::string dtype;       // GPU "kv_dtype", simulator "dtype"
  std::int64_t slots = 0;  // GPU "pool_pages", simulator "slots" (mirror only)
  std::vector<ForwardResult> forwards;
};

// The GPU replay's JSON: {"trace", "placement", "kv_dtype", "pool_pages", "steps": [{"forward",
// "tokens", "decode_tokens", "gpu_us", "hits", "misses", "evictions", ...}]}. Throws
// ConfigError naming the file, the step and the field at fault; gpu_us must be > 0.
ForwardResults read_gpu_run(const std::string& json_text, const std::string& file);

// The simulator's JSON: {"trace", "placement", "dtype", "slots", "per_forward": [{"forward",
// "qsa_us", "hits", "misses", "evictions"}]}. Throws ConfigError likewise (without
// "per_forward", from a sim run without --per-forward, it names the option).
ForwardResults read_sim_forwards(const std::string& json_text, const std::string& file);

}  // namespace kvtier::validation
