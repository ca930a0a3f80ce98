#pragma once
// Micro-batches (`--micro-batches K`, docs/runner.md): every micro-batch has a runner of its
// own; prefill and the first token run one micro-batch at a time, then every decode step
// launches each micro-batch's forward and only then waits for each, so that one's reads over
// the link overlap the others' GPU work. Written for any runner with QsaRunner's generate,
// launch_step and finish_step, so that the bookkeeping is tested on the CPU.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cuda/runner/qsa_runner.hpp"
#include "cuda/runner/runner_stats.hpp"
#include "cuda/runner/session_plan.hpp"

namespace kvtier::runner {

// Prefills every micro-batch's prompts and decodes their first token, one micro-batch after
// the other: runners[k] takes the prompts of batches[k]. `on_forward` (optional) sees the
// prompt tokens done over all micro-batches and their total. Returns each request's first
// token, in request order.
template <class Runner>
std::vector<std::vector<std::int32_t>> prefill_each(
    const std::vector<std::unique_ptr<Runner>>& runners, const std::vector<MicroBatch>& batches,
    const std::vector<std::vector<std::int32_t>>& prompts, int rows_per_request,
    const std::function<void(std::int64_t, std::int64_t)>& on_forward) {
  std::int64_t all_tokens = 0, done_before = 0;
  for (const auto& p : prompts)
    all_tokens += static_cast<std::int64_t>(p.size());
  std::vector<std::vector<std::int32_t>> out;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const auto b = prompts.begin() + batches[k].first;
    std::int64_t batch_tokens = 0;
    const auto progress_of_all = [&](std::int64_t done, std::int64_t total) {
      batch_tokens = total;
      if (on_forward) on_forward(done_before + done, all_tokens);
    };
    for (auto& toks :
         runners[k]->generate({b, b + batches[k].requests}, rows_per_request, 1, progress_of_all))
      out.push_back(toks);
    done_before += batch_tokens;
  }
  return out;
}

// The wall time of the overlapped steps, and of those where every micro-batch's forward was
// steady (Runner::last_step_steady: a shape seen before, no graph captured).
struct OverlappedTime {
  double ms = 0;
  double steady_ms = 0;
  int steady_steps = 0;
};

// Decodes `steps` more tokens per request with every micro-batch's forward in flight at once:
// launch each, then wait for each. tokens[q] holds request q's tokens so far and grows by one
// per step.
template <class Runner>
OverlappedTime decode_overlapped(const std::vector<std::unique_ptr<Runner>>& runners,
                                 const std::vector<MicroBatch>& batches, int steps,
                                 std::vector<std::vector<std::int32_t>>& tokens) {
  using clock = std::chrono::steady_clock;
  OverlappedTime t;
  for (int d = 0; d < steps; ++d) {
    const auto t0 = clock::now();
    for (std::size_t k = 0; k < runners.size(); ++k) {
      std::vector<RequestRows> rows;
      for (int i = 0; i < batches[k].requests; ++i)
        rows.push_back({i, {tokens[static_cast<std::size_t>(batches[k].first + i)].back()}});
      runners[k]->launch_step(rows);
    }
    for (std::size_t k = 0; k < runners.size(); ++k) {
      const std::vector<std::int32_t> next = runners[k]->finish_step();
      for (std::size_t i = 0; i < next.size(); ++i)
        tokens[static_cast<std::size_t>(batches[k].first) + i].push_back(next[i]);
    }
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    t.ms += ms;
    bool steady = true;
    for (const auto& r : runners)
      steady = steady && r->last_step_steady();
    if (steady) {
      t.steady_ms += ms;
      ++t.steady_steps;
    }
  }
  return t;
}

// The figures of a micro-batched run: `overlapped`, every runner's counters summed since the
// overlapped steps began, plus `before`, theirs until then; but the decode figures (tokens,
// wall and GPU milliseconds, graph forwards) are the overlapped steps' alone, timed by their
// wall time `time` (the runners' own decode times overlap each other), and the steady ones its
// steady steps (their link bytes: every runner's steady forwards').
RunnerStats overlapped_run_stats(const RunnerStats& overlapped, const RunnerStats& before,
                                 const OverlappedTime& time);

}  // namespace kvtier::runner
