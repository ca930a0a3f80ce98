#include "cuda/runner/session_plan.hpp"

#include <algorithm>
#include <string>

#include "model/config_error.hpp"

namespace kvtier::runner {

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

SessionPlan plan_session(const SessionOptions& o, const Geometry& g, int sms) {
  if (o.prompts.empty()) throw ConfigError("runner: a session needs at least one prompt");
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
  SessionPlan plan;
  plan.rows_per_request = static_cast<int>(std::min<std::int64_t>(o.chunk, longest));
  plan.batches = split_requests(static_cast<int>(o.prompts.size()), o.micro_batches);
  for (MicroBatch& b : plan.batches) {
    RunnerConfig& c = b.config;
    c = o.runner;
    c.max_context = o.fill_depth + longest + o.decode - 1;  // the last decoded token is not stored
    c.max_requests = b.requests;
    c.max_rows = plan.rows_per_request * b.requests;
    if (o.runner.decode_splits == 0 && o.micro_batches > 1 && c.placement == Placement::host)
      c.decode_splits = half_sm_decode_splits(sms, b.requests, g.kv_heads);
  }
  return plan;
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
  br.context_tokens = c.max_context;
  br.staging_window_tokens = c.staging_window_tokens;
  br.device_capacity_bytes = free_device_bytes;
  br.host_capacity_bytes = host_capacity_bytes;
  return br;
}

}  // namespace kvtier::runner
