#pragma once
// The shape of a session before anything is allocated (plain C++, tested on the CPU): the
// requests each micro-batch holds, the configuration of its runner, and what memory_budget
// prices for it.
#include <cstdint>
#include <optional>
#include <vector>

#include "cuda/runner/qsa_runner.hpp"
#include "cuda/runner/session.hpp"
#include "model/cost_model.hpp"
#include "model/geometry.hpp"
#include "model/memory_budget.hpp"
#include "model/micro_batch_choice.hpp"

namespace kvtier::runner {

// The most requests one session runs: a forward's rows, page tables and selection buffers are
// sized per request, and far more than the largest batches (64) is a typo, not a plan.
inline constexpr int kMaxSessionRequests = 4096;
// The most prompt tokens of a session's random prompts together (4 GiB of token ids).
inline constexpr std::int64_t kMaxSessionPromptTokens = std::int64_t{1} << 30;

// Micro-batch k of a session: requests [first, first + requests), with a runner of its own.
struct MicroBatch {
  int first = 0;
  int requests = 0;
  // The session's configuration with max_requests, max_rows, max_context and decode_splits
  // set for this micro-batch.
  RunnerConfig config;
};

struct SessionPlan {
  int rows_per_request = 0;  // prefill rows of a request per forward: min(chunk, longest prompt)
  std::vector<MicroBatch> batches;
};

// Micro-batch k of K holds requests [k n / K, (k + 1) n / K): sizes differ by one at most.
// Requires 1 <= K <= n.
std::vector<MicroBatch> split_requests(int requests, int micro_batches);

// Decode splits of a micro-batch of `requests` on placement host when none were asked: enough
// CTAs for half the SMs, at least one. An attention over the link keeps its CTAs waiting; on
// half the SMs it leaves the other half to the other micro-batches' work (index, top-k,
// projections) in the meantime.
int half_sm_decode_splits(int sms, int requests, int kv_heads);

// A mirror session's groups in K = 1, 2 and 4 micro-batches, as far as its requests go: each
// group's rows (its requests) and pool, as plan_session builds them (`--pool-pages max`: each
// its share of B), for choose_mirror_micro_batches. A K that plan_session refuses (a pool that
// would drop selected pages, a budget too small) is left out; when it refuses one batch, the
// result is empty (K = 1 is the estimates' base, and the session cannot run as asked). With
// a pool given by count (not `--pool-pages max`) only K = 1: each group would take that pool.
std::vector<std::vector<MirrorGroup>> mirror_micro_batch_candidates(const SessionOptions& o,
                                                                    const Geometry& g);

// `--micro-batches auto`: sets o.micro_batches to the count choose_micro_batches (host) or
// choose_mirror_micro_batches (mirror, over mirror_micro_batch_candidates) picks on `cost`
// for the session's requests at their longest context, and returns that choice with its
// estimates. Where groups cannot run -- a placement other than host and mirror, fewer than
// two requests or decode steps (the first decode forward is a shape's capture), the needle
// protocol, a recorded trace, profiled phases, or a mirror whose one batch plan_session
// refuses -- it sets one batch and returns nullopt. Requires o.prompts.
std::optional<MicroBatchChoice> choose_session_micro_batches(SessionOptions& o, const Geometry& g,
                                                             const CostModel& cost);

// The blocks of a mirror micro-batch's residency step before the attention when none were
// asked (RunnerConfig::step_blocks): enough to keep the link busy with the miss copy (each
// block holds 1,024 threads' loads in flight), few beside the others' work.
inline constexpr int kMicroBatchStepBlocks = 16;

// Throws ConfigError when a request's context -- fill_depth + its prompt + decode - 1
// positions (the last decoded token is not stored) -- is beyond the geometry's largest
// (rope_max_positions, or x yarn_factor with YaRN). Cheap: run it before building prompts.
void check_context(const Geometry& g, bool yarn, std::int64_t fill_depth,
                   std::int64_t longest_prompt, int decode);

// Throws ConfigError when random prompts of these lengths (each within a context already)
// would hold more than kMaxSessionPromptTokens tokens together, before any is built.
void check_prompt_tokens(const std::vector<std::int64_t>& lengths);

// The distinct row counts of the prefill forwards QsaRunner::generate runs for prompts of these
// lengths (each forward takes up to `chunk` tokens of every request that has tokens left),
// ascending: the shapes the session warms before it times the prefill. Requires chunk >= 1.
std::vector<int> prefill_forward_rows(const std::vector<std::int64_t>& prompt_lengths, int chunk);

// Throws ConfigError for no prompt, micro-batches outside 1..requests, chunk or decode below
// 1, a context beyond the geometry's (check_context), the needle protocol or a recorded trace
// with more than one micro-batch, and, on placement mirror without allow_drops, a pool below
// the smallest that drops no selected page (memory_budget's no_drop_slots, named in the
// message).
// Throws ConfigError for what the options cannot run, and CapacityError when the KV tier's
// priced device memory (kv_device_need) is over o.device_kv_bytes, saying the smallest budget
// that fits: before anything is allocated.
SessionPlan plan_session(const SessionOptions& o, const Geometry& g, int sms);

// The device memory memory_budget prices for the KV tier of every micro-batch together.
std::int64_t kv_device_need(const Geometry& g, const SessionPlan& plan);

// Throws CapacityError, saying the need, when the pinned host banks of every micro-batch
// together (memory_budget's host bytes) are more than `available_bytes` (the system's
// MemAvailable; below 0: not known, not checked). Before any bank is mapped.
void check_host_memory(const Geometry& g, const SessionPlan& plan, std::int64_t available_bytes);

// What memory_budget prices for a micro-batch's runner, against the device memory free now
// and the host memory available.
BudgetRequest budget_request(const Geometry& g, const MicroBatch& b, int rows_per_request,
                             std::int64_t free_device_bytes, std::int64_t host_capacity_bytes);

}  // namespace kvtier::runner
