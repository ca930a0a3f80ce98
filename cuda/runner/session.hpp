#pragma once
// A run of the QSA model from prompts to tokens (`kvtier run --weights`, docs/runner.md): the
// requests split into micro-batches (session_plan.hpp), each with a runner of its own that
// memory_budget prices against what is free before it is built; optionally a trace recorded
// or a depth filled; then one of three ways through the requests: the needle protocol
// (needle_protocol.hpp), one batch's prefill and greedy decode (QsaRunner::generate), or
// micro-batches prefilled one at a time and decoded with all their forwards in flight
// (micro_batches.hpp). Plain options in, plain results out; progress goes to a callback, so
// the caller draws the bars and prints the figures.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/runner/qsa_runner.hpp"
#include "cuda/runner/runner_stats.hpp"
#include "cuda/weights/safetensors.hpp"
#include "model/geometry.hpp"

namespace kvtier::runner {

struct SessionOptions {
  // What every micro-batch's runner shares: placement, dtype, YaRN, pool and host pages,
  // staging window, stand-in width, graphs, copy_first, profile_phases, and decode_splits as
  // asked (0: the kernels' default; with micro-batches on placement host, see
  // session_plan.hpp). The session sets max_requests, max_rows and max_context per
  // micro-batch.
  RunnerConfig runner;
  std::vector<std::vector<std::int32_t>> prompts;  // one request each
  int chunk = 2048;             // prefill rows per request per forward (at most the longest prompt)
  int decode = 16;              // greedy tokens per request; the first is the one after the prompt
  std::int64_t fill_depth = 0;  // > 0: positions written directly first (QsaRunner::fill)
  int micro_batches = 1;
  // Mirror: the blocks of the residency step before the attention (RunnerConfig::step_blocks);
  // -1: the session's choice (kMicroBatchStepBlocks with micro-batches, else one per SM).
  int step_blocks = -1;
  // Mirror: run with a pool below the smallest that drops no selected page (memory_budget's
  // no_drop_slots). Dropped pages change the model's output, so plan_session refuses such a
  // pool unless this is set (an experiment).
  bool allow_drops = false;
  // >= 0: the needle protocol at this position, for one request whose prompt ends with the
  // query token (weights::needle_prompt).
  std::int64_t needle_at = -1;
  // B (--device-kv-gib): the device memory the KV tier may take over every micro-batch, as
  // memory_budget prices it (pages, pool, staging window, fold accumulator, selection and table
  // buffers); the weights and activations are apart. 0: whatever is free on the GPU.
  std::int64_t device_kv_bytes = 0;
  // Mirror (`--pool-pages max`): each micro-batch's pool is the largest that fits its share of
  // device_kv_bytes (split by requests), runner.pool_pages is then ignored.
  bool pool_fits_budget = false;
  // Before the prefill: every cuBLAS shape of its forwards called once (QsaRunner::warm_up), so
  // that the prefill's time holds no first-call set-up of the library (off: the first forwards
  // pay it, as a process's very first prefill does).
  bool warm_up = true;
  std::string record_path;  // non-empty: the selections as a trace (format by extension)
  std::string producer = "kvtier run --weights";  // the recorded trace's header
};

enum class SessionPhase { host_bank, prefill };

// The long phases, one after another: every micro-batch's pinned host bank as it is
// allocated (bytes), then the prompt tokens prefilled over all requests. `update` sees
// (done, total); `finish` ends the phase. Either may be empty.
struct SessionProgress {
  std::function<void(SessionPhase, std::uint64_t done, std::uint64_t total)> update;
  std::function<void(SessionPhase)> finish;
};

struct SessionResult {
  std::vector<std::vector<std::int32_t>> tokens;  // each request's decoded tokens
  // Every runner's counters summed. With micro-batches the decode figures (tokens, wall and
  // GPU milliseconds, graph forwards) are the overlapped steps' after the first, timed by
  // their wall time: the runners' own decode times overlap each other.
  RunnerStats stats;
  int requests = 0;
  int decode_splits = 0;                 // the last micro-batch's runner's
  int step_blocks = 0;                   // likewise (mirror; 0: one per SM)
  std::vector<double> needle_cosines;    // per QSA layer (needle protocol)
  std::int64_t kv_device_bytes = 0;      // pages, pools and staging windows of every runner
  std::int64_t kv_host_bytes = 0;        // pinned host banks
  std::int64_t other_device_bytes = 0;   // weights, activations, workspaces
  std::int64_t budget_device_bytes = 0;  // memory_budget's figures, summed over micro-batches
  std::int64_t budget_host_bytes = 0;
  double setup_s = 0;                    // building the runners (weights, host banks)
  double host_bank_s = 0;                // of setup_s: mapping, touching and pinning the host banks
  double fill_s = 0;                     // --fill-depth: writing the positions (QsaRunner::fill)
  double warm_up_s = 0;                  // SessionOptions::warm_up: the projections' first calls
  std::vector<std::int64_t> pool_slots;  // mirror: each micro-batch's pool (0 otherwise)
  std::string mirror_reads;              // QsaRunner::mirror_reads
};

// Throws ConfigError for options the runner cannot take (and CapacityError when the pages
// do not fit, saying the minimum) before anything is allocated, WeightsError for a bad file.
SessionResult run_session(const weights::SafetensorsFile& file, const Geometry& g,
                          std::int64_t vocab, const SessionOptions& options,
                          const SessionProgress& progress = {});

}  // namespace kvtier::runner
