// The model runner's placements, batching, fp8, fill and trace recording on a small geometry
// with the compiled head sizes (tests/runner/test_runner_gpu.cpp has the geometry's CPU
// reference). Label gpu; skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>

#include "cuda/runner/qsa_runner.hpp"
#include "cuda/runner/session.hpp"
#include "cuda/runner/session_plan.hpp"
#include "cuda/trace_replay.hpp"
#include "cuda/weights/synth.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "tests/runner/runner_gpu_util.hpp"
#include "tests/weights/weights_test_util.hpp"
#include "traces/trace_io.hpp"

namespace kvtier::runner_test {
namespace {

using weights::test::TempDir;

constexpr std::int64_t kVocab = 64;

std::vector<std::int32_t> random_tokens(std::uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t)
    x = static_cast<std::int32_t>(rng() % kVocab);
  return t;
}

struct Weights {
  TempDir dir{"runner-placements"};
  std::string path;
  std::unique_ptr<weights::SafetensorsFile> file;
  explicit Weights(std::uint64_t seed) {
    path = dir.file("w.safetensors");
    weights::write_synthetic_weights(path, small_gpu_geometry(), kVocab, {seed, false});
    file = std::make_unique<weights::SafetensorsFile>(path);
  }
};

runner::RunnerConfig config(Placement p, std::int64_t pool = 0) {
  runner::RunnerConfig c;
  c.max_rows = 768;  // three requests x chunks of 256
  c.max_requests = 3;
  c.max_context = 2048;
  c.placement = p;
  c.pool_pages = pool;
  return c;
}

struct RunOut {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<float> logits;
  runner::RunnerStats stats;
};

RunOut run(const Weights& w, const runner::RunnerConfig& c,
           const std::vector<std::vector<std::int32_t>>& prompts, int chunk, int decode) {
  runner::QsaRunner r(*w.file, small_gpu_geometry(), kVocab, c);
  r.set_capture(true);
  RunOut out;
  out.tokens = r.generate(prompts, chunk, decode);
  out.logits = r.last_logits();
  out.stats = r.stats();
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

const std::vector<std::vector<std::int32_t>>& prompts() {
  static const std::vector<std::vector<std::int32_t>> p = {
      random_tokens(1, 1500), random_tokens(2, 700), random_tokens(3, 1100)};
  return p;
}

// The three placements read the same bytes with the same kernel: the same tokens, and the
// same logits bit for bit while the staging window holds the whole context.
TEST(RunnerPlacements, SameTokensAndLogitsOnEveryPlacement) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(21);
  const RunOut dev = run(w, config(Placement::device), prompts(), 256, 12);
  const RunOut host = run(w, config(Placement::host), prompts(), 256, 12);
  // Pool: the widest forward (3 rows x width + writes) must fit; 40 slots is 1/2 of the pages.
  const RunOut mir = run(w, config(Placement::mirror, 40), prompts(), 256, 12);
  EXPECT_EQ(dev.tokens, host.tokens);
  EXPECT_EQ(dev.tokens, mir.tokens);
  EXPECT_EQ(dev.logits, host.logits);
  EXPECT_EQ(dev.logits, mir.logits);
  EXPECT_GT(host.stats.staged_windows, 0);  // prefill chunks read through the window
  EXPECT_GT(mir.stats.misses, 0);
  EXPECT_GT(mir.stats.hits, 0);
  EXPECT_GT(host.stats.in_place_bytes, 0);
  EXPECT_EQ(dev.stats.decode_tokens, 3 * 11);
  EXPECT_EQ(dev.stats.prefill_tokens, 1500 + 700 + 1100);
  std::printf("mirror: hits %lld misses %lld evictions %lld drops %lld\n",
              static_cast<long long>(mir.stats.hits), static_cast<long long>(mir.stats.misses),
              static_cast<long long>(mir.stats.evictions), static_cast<long long>(mir.stats.drops));
}

// Several staging windows per request fold by log-sum-exp: the tokens stay, the logits move
// only by fp32 rounding.
TEST(RunnerPlacements, SmallStagingWindowsFoldToTheSameResult) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(22);
  const RunOut dev = run(w, config(Placement::device), prompts(), 256, 6);
  auto c = config(Placement::host);
  c.staging_window_tokens = 192;  // 3 pages: up to 8 windows per request
  const RunOut host = run(w, c, prompts(), 256, 6);
  EXPECT_EQ(dev.tokens, host.tokens);
  EXPECT_GT(host.stats.staged_windows, 3 * 2 * 6);
  double scale = 0;
  for (float x : dev.logits)
    scale = std::max(scale, std::abs(static_cast<double>(x)));
  EXPECT_LT(max_abs_diff(dev.logits, host.logits), 1e-3 * scale);
}

// A batch gives each request what it gets alone (the projections may round differently with
// the batch's row count, so logits are compared loosely, tokens exactly).
TEST(RunnerPlacements, BatchEqualsEachRequestAlone) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(23);
  for (Placement p : {Placement::device, Placement::mirror}) {
    const RunOut batch = run(w, config(p, 40), prompts(), 256, 8);
    for (std::size_t r = 0; r < prompts().size(); ++r) {
      const RunOut alone = run(w, config(p, 40), {prompts()[r]}, 256, 8);
      EXPECT_EQ(alone.tokens[0], batch.tokens[r]) << "request " << r;
    }
  }
}

// fp8 pages run on every placement, agree across placements, and stay close to bf16.
TEST(RunnerPlacements, Fp8RunsAndStaysClose) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(24);
  const RunOut bf = run(w, config(Placement::device), prompts(), 256, 4);
  std::vector<RunOut> f8;
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    auto c = config(p, 40);
    c.dtype = KvDtype::fp8;
    f8.push_back(run(w, c, prompts(), 256, 4));
  }
  EXPECT_EQ(f8[0].tokens, f8[1].tokens);
  EXPECT_EQ(f8[0].tokens, f8[2].tokens);
  EXPECT_EQ(f8[0].logits, f8[2].logits);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < bf.logits.size(); ++i) {
    ASSERT_TRUE(std::isfinite(f8[0].logits[i]));
    num += std::pow(static_cast<double>(f8[0].logits[i]) - bf.logits[i], 2);
    den += std::pow(static_cast<double>(bf.logits[i]), 2);
  }
  const double rel = std::sqrt(num / den);
  std::printf("fp8 vs bf16: relative L2 difference of the last logits %.3e, max abs %.3e\n", rel,
              max_abs_diff(f8[0].logits, bf.logits));
  EXPECT_LT(rel, 0.1);
}

// A run of `c` recorded into `trace`: `work` drives the runner (its tokens are kept).
RunOut record_run(
    const Weights& w, const runner::RunnerConfig& c, const std::string& trace,
    const std::function<std::vector<std::vector<std::int32_t>>(runner::QsaRunner&)>& work) {
  runner::QsaRunner r(*w.file, small_gpu_geometry(), kVocab, c);
  r.set_capture(true);
  auto writer = traces::TraceWriter::create(trace, r.trace_header("runner test"),
                                            traces::TraceFormat::binary);
  r.set_recorder(writer.get());
  RunOut out;
  out.tokens = work(r);
  out.logits = r.last_logits();
  r.close();
  writer->close();
  out.stats = r.stats();
  return out;
}

// A recorded trace replayed in the simulator and on the GPU (--verify) with the mirror of
// `pool` slots and `policy`, each writing its decision lines.
struct Replays {
  sim::SimResult sim;
  cuda::ReplayResult gpu;
  std::string sim_decisions, gpu_decisions;
};

Replays replay_recorded(const traces::TraceInput& in, std::int64_t pool, MirrorPolicy policy) {
  Replays out;
  sim::SimConfig sc;
  sc.placement = Placement::mirror;
  sc.pool_slots = pool;
  sc.policy = policy;
  sc.check_memory = false;
  std::ostringstream sim_decisions;
  sc.decisions = &sim_decisions;
  out.sim =
      sim::simulate(in, frontend::scan_trace(in), CostModel(sim::load_profile("h200-pcie5")), sc);
  cuda::ReplayConfig rc;
  rc.placement = Placement::mirror;
  rc.pool_pages = pool;
  rc.policy = policy;
  rc.verify = true;
  std::ostringstream gpu_decisions;
  rc.decisions = &gpu_decisions;
  out.gpu = cuda::replay_trace(in, rc);
  out.sim_decisions = sim_decisions.str();
  out.gpu_decisions = gpu_decisions.str();
  return out;
}

// The runner's residency counts are the simulator's, and the GPU replay's decision lines the
// simulator's.
void expect_runners_decisions(const Replays& r, const runner::RunnerStats& stats) {
  const sim::LayerStats t = r.sim.total();
  EXPECT_EQ(t.hits, stats.hits);
  EXPECT_EQ(t.misses, stats.misses);
  EXPECT_EQ(t.evictions, stats.evictions);
  EXPECT_EQ(t.drops, stats.drops);
  EXPECT_EQ(t.prefetched, stats.prefetched);
  EXPECT_EQ(r.gpu.decision_mismatches, 0) << r.gpu.first_mismatch;
  EXPECT_EQ(r.gpu_decisions, r.sim_decisions);
}

// A recorded trace replays in the simulator and on the GPU replay with the runner's own
// residency decisions: the same hits, misses, evictions and drops.
TEST(RunnerPlacements, RecordedTraceReplaysWithTheSameDecisions) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(25);
  TempDir dir("runner-record");
  const std::string trace = dir.file("run.ktr");
  const std::int64_t pool = 40;
  const RunOut rec =
      record_run(w, config(Placement::mirror, pool), trace,
                 [](runner::QsaRunner& r) { return r.generate(prompts(), 256, 10); });
  const Replays rep = replay_recorded(traces::file_trace(trace), pool, MirrorPolicy::lru);
  expect_runners_decisions(rep, rec.stats);
  EXPECT_GT(rec.stats.evictions, 0);
  EXPECT_EQ(rep.gpu.total.hits, rec.stats.hits);
  EXPECT_EQ(rep.gpu.total.misses, rec.stats.misses);
}

// The prefetch policy in the runner: each layer's pages ensured into the next layer's pool
// beside the main stream. The device placement's tokens and logits bit for bit, and the
// decisions (demand and prefetch) those of the simulator and of the GPU trace replay on the
// run's recorded trace. Drops are the prefill rows' pages past the select width (their
// attention reads the logical pages, so the outputs are the device's).
TEST(RunnerPlacements, PrefetchPolicyKeepsTheBytesAndTheCoresDecisions) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // the weights and pool of SameTokensAndLogitsOnEveryPlacement, whose lru mirror drops nothing
  const Weights w(21);
  const RunOut dev = run(w, config(Placement::device), prompts(), 256, 12);
  TempDir dir("runner-prefetch");
  const std::string trace = dir.file("run.ktr");
  const std::int64_t pool = 40;
  runner::RunnerConfig c = config(Placement::mirror, pool);
  c.policy = MirrorPolicy::prefetch;
  const RunOut mir =
      record_run(w, c, trace, [](runner::QsaRunner& r) { return r.generate(prompts(), 256, 12); });
  std::printf("mirror, prefetch: hits %lld misses %lld evictions %lld prefetched %lld drops %lld\n",
              static_cast<long long>(mir.stats.hits), static_cast<long long>(mir.stats.misses),
              static_cast<long long>(mir.stats.evictions),
              static_cast<long long>(mir.stats.prefetched),
              static_cast<long long>(mir.stats.drops));
  EXPECT_EQ(mir.tokens, dev.tokens);
  EXPECT_EQ(mir.logits, dev.logits);
  EXPECT_GT(mir.stats.prefetched, 0);
  const Replays rep = replay_recorded(traces::file_trace(trace), pool, MirrorPolicy::prefetch);
  expect_runners_decisions(rep, mir.stats);
  EXPECT_EQ(rep.gpu.total.prefetched, mir.stats.prefetched);
}

// A filled run records too: its requests begin at the fill depth (the trace has no fill
// forward), and the replays grow their pages at the first forward as the fill did. At a depth
// on a page boundary the first decode token opens a page, which the fill allocated in request
// order, so the page ids (and so the decisions) are the replays'.
TEST(RunnerPlacements, RecordedFilledRunReplaysWithTheSameDecisions) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(27);
  TempDir dir("runner-record-fill");
  const std::string trace = dir.file("fill.ktr");
  const std::int64_t pool = 40;
  const RunOut rec =
      record_run(w, config(Placement::mirror, pool), trace, [](runner::QsaRunner& r) {
        r.fill(28 * 64);
        return r.generate({random_tokens(7, 1), random_tokens(8, 1), random_tokens(9, 1)}, 1, 8);
      });
  EXPECT_GT(rec.stats.misses, 0);
  const Replays rep = replay_recorded(traces::file_trace(trace), pool, MirrorPolicy::lru);
  expect_runners_decisions(rep, rec.stats);
  EXPECT_EQ(rep.sim.forwards, rec.stats.forwards);
  EXPECT_EQ(rep.sim.prefill_tokens, 0);
  EXPECT_EQ(rep.gpu.checksum, rep.gpu.expected_checksum);
}

// Decode at depth without a prefill: the same tokens on every placement.
TEST(RunnerPlacements, FilledDepthDecodesAlikeOnEveryPlacement) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(26);
  std::vector<std::vector<std::int32_t>> out;
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    runner::QsaRunner r(*w.file, small_gpu_geometry(), kVocab, config(p, 40));
    r.fill(1801);
    EXPECT_EQ(r.position(2), 1801);
    out.push_back(
        r.generate({random_tokens(7, 1), random_tokens(8, 1), random_tokens(9, 1)}, 1, 6)[1]);
    EXPECT_EQ(r.stats().filled_tokens, 3 * 1801);
    EXPECT_THROW(r.fill(10), ConfigError);
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[0], out[2]);
}

// Batched decode past 16 rows: the index scores of 20 one-row requests take the decode kernel
// (one group per request), whose bits are the ones 16 rows get, so the first 16 requests of a
// batch of 20 decode the tokens of a batch of those 16 alone, on every placement (the fill of a
// request depends on its index, not on the batch). Before, 20 rows fell to the CUDA-core path.
TEST(RunnerPlacements, ManyOneRowRequestsDecodeAsFewerDo) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(27);
  std::vector<std::vector<std::int32_t>> prompts;
  for (int q = 0; q < 20; ++q)
    prompts.push_back(random_tokens(100 + static_cast<std::uint64_t>(q), 1));
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    auto tokens = [&](int n) {
      runner::RunnerConfig c = config(p, 20 * 40);
      c.max_requests = n;
      c.max_rows = n;
      runner::QsaRunner r(*w.file, small_gpu_geometry(), kVocab, c);
      r.fill(1801);
      const std::vector<std::vector<std::int32_t>> first(prompts.begin(), prompts.begin() + n);
      return r.generate(first, 1, 6);
    };
    const auto twenty = tokens(20);
    const auto sixteen = tokens(16);
    for (int q = 0; q < 16; ++q)
      EXPECT_EQ(twenty[static_cast<std::size_t>(q)], sixteen[static_cast<std::size_t>(q)])
          << to_string(p) << " request " << q;
  }
}

// Decode forwards replayed from CUDA graphs make the same tokens and the same residency
// decisions as eager forwards.
TEST(RunnerPlacements, GraphReplayEqualsEager) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(28);
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    auto c = config(p, 40);
    c.graphs = false;
    runner::QsaRunner eager(*w.file, small_gpu_geometry(), kVocab, c);
    const auto a = eager.generate(prompts(), 256, 24);
    c.graphs = true;
    runner::QsaRunner graph(*w.file, small_gpu_geometry(), kVocab, c);
    const auto b = graph.generate(prompts(), 256, 24);
    EXPECT_EQ(a, b) << to_string(p);
    EXPECT_EQ(eager.stats().graph_forwards, 0);
    EXPECT_GE(graph.stats().graph_forwards, 20) << to_string(p);
    EXPECT_EQ(eager.stats().hits, graph.stats().hits);
    EXPECT_EQ(eager.stats().misses, graph.stats().misses);
    EXPECT_EQ(eager.stats().evictions, graph.stats().evictions);
  }
}

// The stand-in MLP of the non-QSA layers is real work on the hidden state (the logits move)
// and, like the QSA layers, the same on every placement and in graphs as eagerly.
TEST(RunnerPlacements, StandInMlpChangesTheStateAndKeepsPlacementsAlike) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(29);
  const RunOut plain = run(w, config(Placement::device), prompts(), 256, 8);
  std::vector<RunOut> outs;
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    // a pool of every page: no selection is cut (a cut one reads fewer pages, by design)
    auto c = config(p, 96);
    c.stand_in_width = 512;
    outs.push_back(run(w, c, prompts(), 256, 8));
  }
  EXPECT_EQ(outs[2].stats.drops, 0);
  EXPECT_EQ(outs[0].tokens, outs[1].tokens);
  EXPECT_EQ(outs[0].tokens, outs[2].tokens);
  EXPECT_EQ(outs[0].logits, outs[1].logits);
  EXPECT_EQ(outs[0].logits, outs[2].logits)
      << "max abs difference " << max_abs_diff(outs[0].logits, outs[2].logits);
  EXPECT_GT(max_abs_diff(plain.logits, outs[0].logits), 1e-3);
  for (float v : outs[0].logits)
    ASSERT_TRUE(std::isfinite(v));
  auto c = config(Placement::device);
  c.stand_in_width = 512;
  c.graphs = false;
  runner::QsaRunner eager(*w.file, small_gpu_geometry(), kVocab, c);
  EXPECT_EQ(eager.generate(prompts(), 256, 8), outs[0].tokens);
}

// Micro-batches (kvtier run --micro-batches): two runners with a forward in flight each at once
// (launch A, launch B, finish A, finish B, graphs replayed on their own streams) decode exactly
// as two runners stepped one after the other, on host also with the reads on streams of the
// lowest priority (reads_yield: a fork and a join around each decode attend, kept by the
// graphs). launch_step twice, or finish_step with nothing in flight, is refused.
TEST(RunnerPlacements, MicroBatchesInFlightTogetherEqualOneAtATime) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(30);
  const auto& all = prompts();
  const std::vector<std::vector<std::vector<std::int32_t>>> groups = {{all[0], all[1]}, {all[2]}};
  for (Placement p : {Placement::host, Placement::mirror}) {
    std::vector<std::vector<std::vector<std::int32_t>>> together, alone, yielding;
    for (auto* out : {&together, &alone, &yielding}) {
      if (out == &yielding && p != Placement::host) continue;
      std::vector<std::unique_ptr<runner::QsaRunner>> rs;
      for (const auto& gp : groups) {
        auto c = config(p, 96);
        c.decode_splits = 5;  // as --micro-batches sets them for host placement
        c.reads_yield = out == &yielding;
        rs.push_back(std::make_unique<runner::QsaRunner>(*w.file, small_gpu_geometry(), kVocab, c));
        out->push_back(rs.back()->generate(gp, 256, 1));
      }
      const bool in_flight = out != &alone;
      for (int d = 0; d < 12; ++d) {
        std::vector<std::vector<runner::RequestRows>> rows(groups.size());
        for (std::size_t k = 0; k < groups.size(); ++k)
          for (std::size_t q = 0; q < (*out)[k].size(); ++q)
            rows[k].push_back({static_cast<int>(q), {(*out)[k][q].back()}});
        if (in_flight) {
          for (std::size_t k = 0; k < groups.size(); ++k)
            rs[k]->launch_step(rows[k]);
          EXPECT_THROW(rs[0]->launch_step(rows[0]), std::logic_error);
        }
        for (std::size_t k = 0; k < groups.size(); ++k) {
          const auto next = in_flight ? rs[k]->finish_step() : rs[k]->step(rows[k]);
          for (std::size_t q = 0; q < next.size(); ++q)
            (*out)[k][q].push_back(next[q]);
        }
      }
      EXPECT_THROW(rs[0]->finish_step(), std::logic_error);
      EXPECT_GE(rs[1]->stats().graph_forwards, 10) << to_string(p);
    }
    EXPECT_EQ(together, alone) << to_string(p);
    ASSERT_EQ(together[0][0].size(), 13u);
    if (p == Placement::host) {
      EXPECT_EQ(yielding, alone);
    }
  }
}

// --device-kv-gib: a session whose KV tier fits the budget B runs within it (memory_budget's
// priced tier and the pages, pool and staging window the runner allocates, measured by CUDA's
// free memory around them), and the same session with one byte less is refused before
// anything is allocated (the GPU's free memory is unchanged).
TEST(RunnerPlacements, DeviceKvBudgetIsKeptOrRefusedBeforeAllocation) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(31);
  const Geometry g = small_gpu_geometry();
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    runner::SessionOptions o;
    o.prompts = {prompts()[0], prompts()[1]};
    o.chunk = 256;
    o.decode = 4;
    o.runner.placement = p;
    o.runner.pool_pages = p == Placement::mirror ? 96 : 0;
    o.allow_drops = true;  // a small pool: the budget is what is tested
    const std::int64_t need = runner::kv_device_need(g, runner::plan_session(o, g, 132));
    o.device_kv_bytes = need;
    const runner::SessionResult r = runner::run_session(*w.file, g, kVocab, o, {});
    EXPECT_GT(r.kv_device_bytes, 0) << to_string(p);
    EXPECT_LE(r.budget_device_bytes, need) << to_string(p);
    EXPECT_LE(r.kv_device_bytes, need) << to_string(p);
    ASSERT_EQ(r.tokens.size(), 2u);
    o.device_kv_bytes = need - 1;
    std::size_t free_before = 0, free_after = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
    EXPECT_THROW(runner::run_session(*w.file, g, kVocab, o, {}), CapacityError) << to_string(p);
    ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
    EXPECT_EQ(free_before, free_after) << to_string(p);
  }
}

TEST(RunnerPlacements, BadConfigurationsSayWhy) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Weights w(27);
  EXPECT_THROW(
      runner::QsaRunner(*w.file, small_gpu_geometry(), kVocab, config(Placement::mirror, 0)),
      ConfigError);
  runner::QsaRunner tiny(*w.file, small_gpu_geometry(), kVocab, config(Placement::mirror, 3));
  // Three prefill rows of 256 tokens write 12 pages: more than 3 slots.
  EXPECT_THROW(tiny.generate(prompts(), 256, 1), ConfigError);
  runner::QsaRunner r(*w.file, small_gpu_geometry(), kVocab, config(Placement::device));
  EXPECT_THROW(r.step({{0, random_tokens(1, 769)}}), ConfigError);
  EXPECT_THROW(r.step({{3, {1}}}), ConfigError);
  EXPECT_THROW(r.step({{0, {1}}, {0, {2}}}), ConfigError);
  EXPECT_THROW(r.step({{0, {static_cast<std::int32_t>(kVocab)}}}), ConfigError);
}

}  // namespace
}  // namespace kvtier::runner_test
