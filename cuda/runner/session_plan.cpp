#include "cuda/runner/session_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/device_budget.hpp"
#include "model/page_space.hpp"

namespace kvtier::runner {
namespace {}  // namespace

std::vector<MicroBatch> split_requests(int requests, int micro_batches) {
  if (micro_batches < 1 || micro_batches > requests)
    throw ConfigError("runner: 1.." + std::to_string(requests) + " micro-batches for " +
                      std::to_string(requests) + " requests, got " + std::to_string(micro_batches));
  std::vector<MicroBatch> out(static_cast<std::size_t>(micro_batches));
  for (int k = 0; k < micro_batches; ++k) {
    MicroBatch& b = out[static_cast<std::size_t>(k)];
    b.first = k * requests / micro_batches;
    b.requests = (k + 1) * requests / micro_batches - b.first;
  }
  return out;
}

int half_sm_decode_splits(int sms, int requests, int kv_heads) {
  return std::max(1, sms / 2 / (requests * kv_heads));
}

void check_context(const Geometry& g, bool yarn, std::int64_t fill_depth,
                   std::int64_t longest_prompt, int decode) {
  const std::int64_t max = g.max_context(yarn);
  // Compared piece by piece, so that no sum overflows.
  if (fill_depth < 0 || longest_prompt < 1 || decode < 1 || longest_prompt > max ||
      fill_depth > max - longest_prompt || decode - 1 > max - longest_prompt - fill_depth) {
    throw ConfigError("runner: a context of --fill-depth " + std::to_string(fill_depth) +
                      " + a prompt (--prompt-tokens, --prompt) of " +
                      std::to_string(longest_prompt) + " + --decode " + std::to_string(decode) +
                      " - 1 positions is beyond the geometry's largest, " + std::to_string(max) +
                      (yarn ? " (rope_max_positions x yarn_factor)"
                            : " (rope_max_positions; --yarn reaches " +
                                  std::to_string(g.max_context(true)) + ")"));
  }
}

void check_prompt_tokens(const std::vector<std::int64_t>& lengths) {
  std::int64_t total = 0;
  for (std::int64_t n : lengths) {
    if (n < 0 || n > kMaxSessionPromptTokens - total)
      throw ConfigError("--prompt-tokens: more than " + std::to_string(kMaxSessionPromptTokens) +
                        " prompt tokens in all (" + std::to_string(lengths.size()) +
                        " requests); --fill-depth D reaches a depth without a prompt");
    total += n;
  }
}

namespace {

// Placement mirror: a micro-batch's pool must hold every page its rows' selections can touch
// (memory_budget's no_drop_slots, from select_width), else selected pages are dropped and the
// attention runs on truncated selections.
void check_no_drops(const Geometry& g, const MicroBatch& b, int rows_per_request) {
  const BudgetRequest br = budget_request(g, b, rows_per_request, 0, 0);
  const MemoryBudget need = memory_budget(br);
  if (b.config.pool_pages >= need.no_drop_slots) return;
  throw ConfigError("runner: --pool-pages " + std::to_string(b.config.pool_pages) +
                    " drops selected pages: " + std::to_string(br.batch_rows) +
                    " requests at a context of " + std::to_string(br.context_tokens) +
                    " select up to " + std::to_string(g.max_pages_per_row(br.context_tokens)) +
                    " pages each per layer, and a forward writes up to " +
                    std::to_string(br.write_pages) + "; the smallest pool that drops nothing is " +
                    std::to_string(need.no_drop_slots) + " slots (--pool-pages " +
                    std::to_string(need.no_drop_slots) +
                    "), or --allow-drops to run the experiment on truncated selections");
}

// `--pool-pages max`: the largest pool that fits the micro-batch's share of B, the share in
// proportion to its requests (the last micro-batch takes what rounding leaves). Unless drops
// are allowed, a share whose largest pool drops selected pages is refused with the B at which
// the pool drops nothing.
std::int64_t budget_pool(const Geometry& g, const SessionOptions& o, const MicroBatch& b,
                         int rows_per_request) {
  if (o.device_kv_bytes <= 0)
    throw ConfigError("--pool-pages max: the largest pool within --device-kv-gib B needs B");
  const auto n = static_cast<std::int64_t>(o.prompts.size());
  const std::int64_t per_request = o.device_kv_bytes / n;
  const bool last = b.first + b.requests == n;
  const std::int64_t share = per_request * b.requests + (last ? o.device_kv_bytes % n : 0);
  BudgetRequest br = budget_request(g, b, rows_per_request, 0, 0);
  const std::int64_t slots = largest_pool_slots(br, share);
  const std::int64_t no_drop = mirror_select_width(br, kMaxPages).no_drop_slots;
  if (slots >= no_drop || (o.allow_drops && slots > 0)) return slots;
  br.pool_slots = no_drop;
  // the budget whose share for this micro-batch holds the pool that drops nothing
  const std::int64_t need = memory_budget(br).device_bytes;
  const std::int64_t b_need = (need * n + b.requests - 1) / b.requests;
  throw CapacityError(
      "--pool-pages max: --device-kv-gib " + gib_text(o.device_kv_bytes) + " leaves " +
      std::to_string(slots) + " pool slots for " + std::to_string(b.requests) +
      " requests at a context of " + std::to_string(b.config.max_context) +
      "; the smallest pool that drops "
      "nothing is " +
      std::to_string(no_drop) + " slots: --device-kv-gib " + budget_option_value(b_need) +
      " (or --allow-drops for the experiment on truncated selections)");
}

}  // namespace

std::vector<std::vector<MirrorGroup>> mirror_micro_batch_candidates(const SessionOptions& o,
                                                                    const Geometry& g) {
  std::vector<std::vector<MirrorGroup>> out;
  const auto requests = static_cast<int>(o.prompts.size());
  for (const int k : {1, 2, 4}) {
    // A pool given by count is every group's: more groups would multiply the device memory
    // asked for, which a choice left to kvtier must not do. `--pool-pages max` splits B.
    if (k > requests || (k > 1 && !o.pool_fits_budget)) break;
    SessionOptions ok = o;
    ok.micro_batches = k;
    SessionPlan plan;
    try {
      plan = plan_session(ok, g, 1);
    } catch (const ConfigError&) {
      if (k == 1) return {};  // no base to estimate against: plan_session says why, later
      continue;
    } catch (const CapacityError&) {
      if (k == 1) return {};
      continue;
    }
    std::vector<MirrorGroup> groups;
    for (const MicroBatch& b : plan.batches)
      groups.push_back({b.requests, b.config.pool_pages});
    out.push_back(std::move(groups));
  }
  return out;
}

std::optional<MicroBatchChoice> choose_session_micro_batches(SessionOptions& o, const Geometry& g,
                                                             const CostModel& cost) {
  o.micro_batches = 1;
  const int requests = static_cast<int>(o.prompts.size());
  const Placement p = o.runner.placement;
  if ((p != Placement::host && p != Placement::mirror) || o.decode < 2 || requests < 2 ||
      o.needle_at >= 0 || !o.record_path.empty() || o.runner.profile_phases)
    return std::nullopt;
  std::size_t longest = 0;
  for (const auto& pr : o.prompts)
    longest = std::max(longest, pr.size());
  const std::int64_t context = o.fill_depth + static_cast<std::int64_t>(longest);
  MicroBatchChoice c;
  if (p == Placement::host) {
    c = choose_micro_batches(cost, g, o.runner.dtype, requests, context);
  } else {
    const auto candidates = mirror_micro_batch_candidates(o, g);
    if (candidates.empty()) return std::nullopt;  // one batch refused: plan_session says why
    c = choose_mirror_micro_batches(cost, g, o.runner.dtype, context, candidates);
  }
  o.micro_batches = c.micro_batches;
  return c;
}

std::vector<int> prefill_forward_rows(const std::vector<std::int64_t>& prompt_lengths, int chunk) {
  // Forward k takes min(chunk, len - k chunk) tokens of every request with len > k chunk, so its
  // rows change only at the forward where some request ends, (len - 1) / chunk; between two
  // such forwards every open request takes a full chunk.
  std::vector<std::int64_t> lengths;
  for (const std::int64_t n : prompt_lengths)
    if (n > 0) lengths.push_back(n);
  std::sort(lengths.begin(), lengths.end());
  std::vector<int> rows;
  std::int64_t prev = -1;  // the last forward priced so far
  for (std::size_t i = 0; i < lengths.size();) {
    const std::int64_t end = (lengths[i] - 1) / chunk;
    const auto open = static_cast<std::int64_t>(lengths.size() - i);
    if (end - prev > 1) rows.push_back(static_cast<int>(open * chunk));
    std::int64_t r = 0;
    for (std::size_t j = i; j < lengths.size(); ++j)
      r += std::min<std::int64_t>(chunk, lengths[j] - end * chunk);
    rows.push_back(static_cast<int>(r));
    prev = end;
    while (i < lengths.size() && (lengths[i] - 1) / chunk == end)
      ++i;
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

SessionPlan plan_session(const SessionOptions& o, const Geometry& g, int sms) {
  if (o.prompts.empty()) throw ConfigError("runner: a session needs at least one prompt");
  if (o.prompts.size() > static_cast<std::size_t>(kMaxSessionRequests))
    throw ConfigError("runner: " + std::to_string(o.prompts.size()) + " requests; a session runs " +
                      "at most " + std::to_string(kMaxSessionRequests));
  if (o.chunk < 1) throw ConfigError("runner: the prefill chunk must be positive");
  if (o.decode < 1)
    throw ConfigError("runner: at least one decode step (the token after the prompt)");
  if (o.micro_batches > 1 && (o.needle_at >= 0 || !o.record_path.empty()))
    throw ConfigError("runner: the needle protocol and recording take one micro-batch");
  if (o.needle_at >= 0 && o.prompts.size() != 1)
    throw ConfigError("runner: the needle protocol takes one request");
  std::int64_t longest = 0;
  for (const auto& p : o.prompts)
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(p.size()));
  check_context(g, o.runner.yarn, o.fill_depth, longest, o.decode);
  SessionPlan plan;
  plan.rows_per_request = static_cast<int>(std::min<std::int64_t>(o.chunk, longest));
  plan.batches = split_requests(static_cast<int>(o.prompts.size()), o.micro_batches);
  for (MicroBatch& b : plan.batches) {
    RunnerConfig& c = b.config;
    c = o.runner;
    c.max_context = o.fill_depth + longest + o.decode - 1;  // the last decoded token is not stored
    c.max_requests = b.requests;
    c.max_rows = plan.rows_per_request * b.requests;
    if (o.micro_batches > 1 && c.placement == Placement::host) {
      if (o.runner.decode_splits == 0)
        c.decode_splits = half_sm_decode_splits(sms, b.requests, g.kv_heads);
      c.reads_yield = true;
    }
    if (c.placement == Placement::mirror)
      c.step_blocks = o.step_blocks >= 0    ? o.step_blocks
                      : o.micro_batches > 1 ? kMicroBatchStepBlocks
                                            : 0;
    if (c.placement == Placement::mirror && o.pool_fits_budget)
      c.pool_pages = budget_pool(g, o, b, plan.rows_per_request);
    if (c.placement == Placement::mirror && !o.allow_drops)
      check_no_drops(g, b, plan.rows_per_request);
  }
  if (o.device_kv_bytes > 0) {
    const std::int64_t need = kv_device_need(g, plan);
    if (need > o.device_kv_bytes) {
      throw CapacityError("run: the KV tier needs " + gib_text(need) +
                          " of device memory (pages, pool, staging window, fold accumulator, "
                          "selection and table buffers" +
                          (plan.batches.size() > 1 ? ", over every micro-batch" : "") +
                          "); --device-kv-gib gives " + gib_text(o.device_kv_bytes) +
                          ": the smallest budget that fits this run is --device-kv-gib " +
                          budget_option_value(need));
    }
  }
  return plan;
}

std::int64_t kv_device_need(const Geometry& g, const SessionPlan& plan) {
  std::int64_t need = 0;
  for (const MicroBatch& b : plan.batches)
    need += memory_budget(budget_request(g, b, plan.rows_per_request, 0, 0)).device_bytes;
  return need;
}

void check_host_memory(const Geometry& g, const SessionPlan& plan, std::int64_t available_bytes) {
  if (available_bytes < 0) return;
  std::int64_t need = 0;
  for (const MicroBatch& b : plan.batches)
    need += memory_budget(budget_request(g, b, plan.rows_per_request, 0, 0)).host_bytes;
  if (need <= available_bytes) return;
  throw CapacityError(
      "run: the pinned host bank" +
      std::string(plan.batches.size() > 1 ? "s of every micro-batch need " : " needs ") +
      gib_text(need) + ", the system has " + gib_text(available_bytes) +
      " available (MemAvailable): fewer or shorter requests, --kv-dtype fp8, or --host-pages "
      "below the whole contexts");
}

BudgetRequest budget_request(const Geometry& g, const MicroBatch& b, int rows_per_request,
                             std::int64_t free_device_bytes, std::int64_t host_capacity_bytes) {
  const RunnerConfig& c = b.config;
  BudgetRequest br;
  br.geometry = g;
  br.dtype = c.dtype;
  br.placement = c.placement;
  br.host_pages =
      c.host_pages > 0 ? c.host_pages : g.pages_for_context(c.max_context) * c.max_requests;
  br.pool_slots = c.pool_pages;
  br.batch_rows = c.max_requests;
  // A prefill chunk of a request writes the pages its rows span: one more than they fill
  // when the chunk starts inside a page.
  br.write_pages = c.max_requests * static_cast<int>(g.pages_for_context(rows_per_request) + 1);
  // the runner sizes its per-token selection buffers for max_rows query tokens
  br.batch_tokens = c.max_rows;
  br.context_tokens = c.max_context;
  br.staging_window_tokens = c.staging_window_tokens;
  br.device_capacity_bytes = free_device_bytes;
  br.host_capacity_bytes = host_capacity_bytes;
  return br;
}

}  // namespace kvtier::runner
