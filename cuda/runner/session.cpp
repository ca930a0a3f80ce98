// run_session (session.hpp): the runners built, the requests run one of three ways, the
// figures collected.
#include "cuda/runner/session.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <stdexcept>

#include "cuda/host_bank.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/runner/micro_batches.hpp"
#include "cuda/runner/needle_protocol.hpp"
#include "cuda/runner/session_plan.hpp"
#include "model/config_error.hpp"
#include "model/memory_budget.hpp"
#include "traces/trace_io.hpp"

namespace kvtier::runner {

namespace {

using Runners = std::vector<std::unique_ptr<QsaRunner>>;
using PrefillFn = std::function<void(std::int64_t, std::int64_t)>;

std::int64_t free_device_bytes() {
  std::size_t free_b = 0, total_b = 0;
  KVT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<std::int64_t>(free_b);
}

// One runner per micro-batch, each priced by memory_budget against what is free when it is
// built: what cannot fit is refused before anything of it is allocated, saying the minimum.
Runners build_runners(const weights::SafetensorsFile& file, const Geometry& g, std::int64_t vocab,
                      const SessionPlan& plan, const SessionProgress& progress,
                      SessionResult& res) {
  cuda::ProgressFn bank;
  if (progress.update)
    bank = [&progress](std::uint64_t done, std::uint64_t total) {
      progress.update(SessionPhase::host_bank, done, total);
    };
  // Every micro-batch's host bank against what the system has, before any is mapped.
  check_host_memory(g, plan, cuda::HostBank::available_host_bytes());
  Runners runners;
  // plan_session checked the whole KV tier against B before this; each runner is also held to
  // what is free when it is built.
  for (const MicroBatch& b : plan.batches) {
    const std::int64_t free_b = free_device_bytes();
    const MemoryBudget part = memory_budget(budget_request(g, b, plan.rows_per_request, free_b,
                                                           cuda::HostBank::available_host_bytes()));
    res.budget_device_bytes += part.device_bytes;
    res.budget_host_bytes += part.host_bytes;
    runners.push_back(std::make_unique<QsaRunner>(file, g, vocab, b.config, bank));
    res.host_bank_s += runners.back()->host_bank_s();
    res.pool_slots.push_back(b.config.placement == Placement::mirror ? b.config.pool_pages : 0);
    if (progress.finish) progress.finish(SessionPhase::host_bank);
  }
  return runners;
}

// The recorder of a session that records (one micro-batch, so one runner), else none.
std::unique_ptr<traces::TraceWriter> open_recorder(QsaRunner& r, const SessionOptions& o) {
  if (o.record_path.empty()) return nullptr;
  auto writer = traces::TraceWriter::create(o.record_path, r.trace_header(o.producer),
                                            traces::trace_format_for_path(o.record_path));
  r.set_recorder(writer.get());
  return writer;
}

PrefillFn prefill_progress(const SessionProgress& progress) {
  if (!progress.update) return {};
  return [&progress](std::int64_t done, std::int64_t total) {
    progress.update(SessionPhase::prefill, static_cast<std::uint64_t>(done),
                    static_cast<std::uint64_t>(total));
  };
}

void finish_prefill(const SessionProgress& progress) {
  if (progress.finish) progress.finish(SessionPhase::prefill);
}

void run_needle_request(QsaRunner& r, const Geometry& g, const SessionOptions& o,
                        const SessionPlan& plan, const SessionProgress& progress,
                        SessionResult& res) {
  NeedleRun n = run_needle(r, g, o.prompts[0], o.needle_at, plan.rows_per_request, o.decode,
                           prefill_progress(progress), [&progress] { finish_prefill(progress); });
  res.tokens.push_back(std::move(n.tokens));
  res.needle_cosines = std::move(n.cosines);
}

// Micro-batches: prefill one at a time, then the decode steps after the first with every
// micro-batch in flight. `before` gets the counters until the overlapped steps, the runners'
// own counters start again there; returns the overlapped steps' wall time.
OverlappedTime run_micro_batches(const Runners& runners, const SessionOptions& o,
                                 const SessionPlan& plan, const SessionProgress& progress,
                                 SessionResult& res, RunnerStats& before) {
  res.tokens = prefill_each(runners, plan.batches, o.prompts, plan.rows_per_request,
                            prefill_progress(progress));
  finish_prefill(progress);
  for (const auto& r : runners) {
    before += r->stats();
    r->reset_stats();
  }
  return decode_overlapped(runners, plan.batches, o.decode - 1, res.tokens);
}

// Closes every runner (and the recorder) and sums their counters and memory into res.
void collect_figures(const Runners& runners, traces::TraceWriter* writer, const RunnerStats& before,
                     const OverlappedTime& overlapped, SessionResult& res) {
  RunnerStats s;
  for (const auto& r : runners) {
    r->close();
    s += r->stats();
    res.kv_device_bytes += r->kv_device_bytes();
    res.kv_host_bytes += r->kv_host_bytes();
    res.other_device_bytes += r->other_device_bytes();
  }
  if (writer != nullptr) writer->close();
  res.stats = runners.size() > 1 ? overlapped_run_stats(s, before, overlapped) : s;
  res.mirror_reads = runners.front()->mirror_reads();
}

}  // namespace

SessionResult run_session(const weights::SafetensorsFile& file, const Geometry& g,
                          std::int64_t vocab, const SessionOptions& o,
                          const SessionProgress& progress) {
  if (cuda::device_count() == 0)
    throw ConfigError("run: no CUDA device (cudaGetDeviceCount found none)");
  const SessionPlan plan = plan_session(o, g, qsa::sm_count());
  SessionResult res;
  res.requests = static_cast<int>(o.prompts.size());
  res.decode_splits = plan.batches.back().config.decode_splits;
  res.step_blocks = plan.batches.back().config.step_blocks;

  const auto t_setup = std::chrono::steady_clock::now();
  const Runners runners = build_runners(file, g, vocab, plan, progress, res);
  res.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();
  QsaRunner& first = *runners.front();
  const std::unique_ptr<traces::TraceWriter> writer = open_recorder(first, o);
  if (o.warm_up) {
    const auto t_warm = std::chrono::steady_clock::now();
    for (std::size_t b = 0; b < runners.size(); ++b) {
      const MicroBatch& mb = plan.batches[b];
      std::vector<std::int64_t> lengths;
      for (int r = mb.first; r < mb.first + mb.requests; ++r)
        lengths.push_back(static_cast<std::int64_t>(o.prompts[static_cast<std::size_t>(r)].size()));
      runners[b]->warm_up(prefill_forward_rows(lengths, plan.rows_per_request));
    }
    res.warm_up_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_warm).count();
  }
  if (o.fill_depth > 0) {
    const auto t_fill = std::chrono::steady_clock::now();
    for (const auto& r : runners)
      r->fill(o.fill_depth);  // synchronises
    res.fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fill).count();
  }

  RunnerStats before;  // micro-batches: the counters before the overlapped steps
  OverlappedTime overlapped;
  if (o.needle_at >= 0) {
    run_needle_request(first, g, o, plan, progress, res);
  } else if (runners.size() == 1) {
    res.tokens =
        first.generate(o.prompts, plan.rows_per_request, o.decode, prefill_progress(progress));
    finish_prefill(progress);
  } else {
    overlapped = run_micro_batches(runners, o, plan, progress, res, before);
  }
  collect_figures(runners, writer.get(), before, overlapped, res);
  return res;
}

}  // namespace kvtier::runner
