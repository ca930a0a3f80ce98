#pragma once
// The QSA model runner (issue 7): a fixed batch of requests through the QSA layers of a
// geometry, with the K/V pages in any placement (device, mirror, host; bf16 or fp8). Per
// forward and QSA layer: zero-centred RMSNorm, Q/K/V, indexer and gate projections (cuBLAS,
// bf16 in, fp32 accumulate), the QSA layer through cuda/qsa (RoPE, index queries, compress,
// index, top-k, expand, store, attend), sigmoid gate, output projection added to the fp32
// residual stream; the non-QSA layers are skipped or, optionally, stood in by a dense gated
// MLP (clearly not the model: it exists to put real GPU work between QSA layers).
// Embedding before, final norm, LM head and greedy argmax after, per request.
//
// Placements and residency: request page tables come from frontend::FrontEnd, exactly as the
// simulator builds them from a trace, and every forward is also described as a trace
// forward (one row per request: position, count, and per QSA layer the union of the
// selections of the request's rows). Mirror runs the core's ensure on that description
// (compaction on the device, the same select width and step stamps as sim/replay.cpp), so a
// trace recorded here (`set_recorder`) replays in the simulator with the same decisions.
// Decode rows (forwards of one row per request) read through the pool (mirror), in place
// from the host bank (host) or from device memory. Prefill forwards on host and mirror read
// the host bank in place, or, when a request's rows would read more than it holds
// (rows x select width > cached tokens), through device staging windows whose passes fold by
// log-sum-exp (docs/runner.md, Placements).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/host_bank.hpp"
#include "cuda/runner/runner_stats.hpp"
#include "cuda/weights/safetensors.hpp"
#include "model/geometry.hpp"
#include "model/kv_dtype.hpp"
#include "model/mirror_policy.hpp"
#include "model/placement.hpp"
#include "traces/trace_io.hpp"

namespace kvtier::runner {

struct RunnerConfig {
  int max_rows = 512;               // query rows of one forward, all requests together
  int max_requests = 1;             // requests of the batch (ids 0 .. max_requests - 1)
  std::int64_t max_context = 4096;  // positions per request
  bool yarn = false;
  int splits = 0;  // attend splits; 0 = the kernels' default for the rows
  // Attend splits of decode forwards (one row per request) when > 0, instead of `splits`.
  int decode_splits = 0;
  float norm_eps = 1e-6f;
  Placement placement = Placement::device;
  KvDtype dtype = KvDtype::bf16;
  std::int64_t pool_pages = 0;  // mirror: GPU slots per QSA layer
  // Mirror decode, bf16: run the ensure and the miss copy before the attention (which then
  // reads every page from the pool) instead of beside it, the attention reading the pages it
  // misses from the host bank in place. The same bytes and decisions either way.
  bool copy_first = false;
  // Mirror: lru, or prefetch (PrefetchNextLayer: each QSA layer's query ensured into the next
  // layer's pool on the stream beside, from the end of its residency step until the next
  // layer's step; the step runs before the attention, as with copy_first).
  MirrorPolicy policy = MirrorPolicy::lru;
  std::int64_t host_pages = 0;  // logical pages; 0: max_requests x the pages of max_context
  std::int64_t staging_window_tokens = 131072;  // host / mirror prefill
  int stand_in_width = 0;  // width of the stand-in gated MLP of every non-QSA layer; 0: off
  // Decode forwards (one row per request) replay a CUDA graph of the whole forward, captured
  // per shape on its second occurrence (not while capturing, probing or recording).
  bool graphs = true;
  // Time the phases of every forward with CUDA events (stats().phases); every forward then
  // runs eagerly (no graphs).
  bool profile_phases = false;
  // Host decode: the attention's reads of the host bank run on a stream of the lowest priority
  // and the rest of the forward on one of the highest (graphs keep both: they are instantiated
  // with per-node priorities), so that beside other micro-batches' forwards their index, top-k
  // and projections take free SMs ahead of the reads' pending CTAs while the link stays busy.
  // The session sets it for host micro-batches (on the H200 0.5 - 2 % off a step of 2 - 8
  // groups; with one batch nothing runs beside the reads and the fork costs 0.7 %).
  bool reads_yield = false;
  // Mirror: the blocks of the residency step run before the attention (the ensure and the miss
  // copy); 0: one per SM. The session gives micro-batches kMicroBatchStepBlocks, so that one
  // group's miss copy keeps the link busy on a few SMs while the others' work takes the rest.
  int step_blocks = 0;
};

// Query rows of one request in one forward.
struct RequestRows {
  int request = 0;
  std::vector<std::int32_t> tokens;
};

class QsaRunner {
 public:
  // Uploads the weights (checked against the geometry) and allocates every buffer and the
  // placement's pages. Throws ConfigError for a geometry the compiled kernels do not
  // support (head_dim 256, index dim 128, GQA group 12, index_kv_heads 1) or a bad
  // configuration, CapacityError when memory runs out (saying what was asked), WeightsError
  // for a bad file.
  QsaRunner(const weights::SafetensorsFile& file, const Geometry& g, std::int64_t vocab,
            const RunnerConfig& c, const cuda::ProgressFn& progress = {});
  ~QsaRunner();
  QsaRunner(const QsaRunner&) = delete;
  QsaRunner& operator=(const QsaRunner&) = delete;

  // Declares a request's prompt length before its first forward (rows inside the prompt are
  // prefill rows of the trace, later ones decode rows). A request used without it is opened
  // with a prompt of 0 tokens.
  void open(int request, std::int64_t prompt_tokens);
  // One forward: each request's tokens at its next positions (at most max_rows rows in all,
  // each request at most once). Returns the greedy next token after each request's last row,
  // in the order given.
  std::vector<std::int32_t> step(const std::vector<RequestRows>& rows);
  // step() in two halves, so that several runners can each have a forward in flight on their
  // own stream at once (micro-batches whose link reads overlap each other's GPU work):
  // launch_step checks and queues the forward and returns without waiting for the GPU;
  // finish_step waits for it and returns what step() would. At most one forward in flight.
  void launch_step(const std::vector<RequestRows>& rows);
  std::vector<std::int32_t> finish_step();
  // Whether the forward finish_step last returned was a steady decode forward (a shape seen
  // before that captured no graph: RunnerStats::decode_steady_ms).
  bool last_step_steady() const { return last_steady_; }
  // Request 0 only (tests).
  std::int32_t forward(const std::vector<std::int32_t>& tokens);
  // Prefill every prompt in chunks of `chunk` rows per request per forward, then `decode`
  // greedy steps of one row per request; returns each request's decoded tokens.
  // `on_forward` (optional) sees the prompt tokens done and in total after each prefill
  // forward.
  std::vector<std::vector<std::int32_t>> generate(
      const std::vector<std::vector<std::int32_t>>& prompts, int chunk, int decode,
      const std::function<void(std::int64_t, std::int64_t)>& on_forward = {});
  std::vector<std::int32_t> generate(const std::vector<std::int32_t>& prompt, int chunk,
                                     int decode);
  // Writes deterministic K/V and index-key (slab and ring) rows for positions [0, depth) of
  // every request directly, as if prefilled (no projections, no trace record): decode cost at
  // depth without the prefill. Only before any forward.
  void fill(std::int64_t depth);
  // Calls once, on zeroed scratch rows, every cuBLAS projection a forward of each of these row
  // counts makes (the grouped six, the output projection, the stand-in MLP's; and the LM head of
  // every request), then waits. cuBLAS's first call of a process and its first call at each new
  // shape set up and load kernels (67 - 116 ms, then 2 - 4 ms a shape:
  // bench/results/projections-h200-2026-12-01.md): without this a prefill pays that inside its
  // first forwards, once per process, which no planner prices as part of a prefill. Between
  // forwards; touches only buffers every forward writes before it reads them.
  void warm_up(const std::vector<int>& forward_rows);
  // Ends every open request: pages released (mirror pool), RequestEnd recorded.
  void close();

  // Every forward from now on is written as a trace record (RequestBegin at a request's
  // first forward, Forward, RequestEnd at close()); downloads the selections (synchronises
  // once per QSA layer).
  void set_recorder(traces::TraceWriter* w);
  traces::TraceHeader trace_header(const std::string& producer) const;

  std::int64_t position(int request = 0) const;
  const RunnerStats& stats() const { return stats_; }
  // Mirror: where decode's attention reads the pages its ensure misses (cuda::mirror_reads_name);
  // empty for the other placements.
  std::string mirror_reads() const;
  void reset_stats() { stats_ = {}; }
  std::int64_t kv_device_bytes() const;     // pages, pool and staging window
  std::int64_t kv_host_bytes() const;       // host bank
  double host_bank_s() const;               // seconds to make the host bank ready (0: none)
  std::int64_t other_device_bytes() const;  // weights, activations, workspaces

  // Tests: when on, every forward appends each QSA layer's output hidden states (fp32
  // [rows][hidden], residual added) to captured()[layer index], and the last request's last
  // row's logits are kept in last_logits().
  void set_capture(bool on) { capture_ = on; }
  const std::vector<std::vector<float>>& captured() const { return captured_; }
  const std::vector<float>& last_logits() const { return last_logits_; }
  // Tests: the V row (fp32 [kv_heads][head_dim], as projected, before storage) of request 0
  // at `position` per QSA layer, and the attention output (fp32 [q_heads][head_dim]) of the
  // last row of each forward per QSA layer.
  void set_probe(std::int64_t position);
  const std::vector<std::vector<float>>& probe_values() const { return probe_v_; }
  const std::vector<std::vector<float>>& last_attention() const { return last_attn_; }

 private:
  struct Impl;
  struct PendingStep;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<PendingStep> pending_;
  RunnerStats stats_;
  bool last_steady_ = false;
  bool capture_ = false;
  std::vector<std::vector<float>> captured_;
  std::vector<float> last_logits_;
  std::int64_t probe_pos_ = -1;
  std::vector<std::vector<float>> probe_v_;
  std::vector<std::vector<float>> last_attn_;
};

}  // namespace kvtier::runner
