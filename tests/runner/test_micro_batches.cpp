// The micro-batches' bookkeeping (cuda/runner/micro_batches.hpp) over fake runners on the
// CPU: prefilled one micro-batch at a time and decoded with every forward in flight, the
// requests get the tokens one batch gives them; progress counts over all micro-batches; the
// figures keep the overlapped steps' decode figures apart from the rest.
#include "cuda/runner/micro_batches.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "tests/runner/fake_runner.hpp"

namespace kvtier::runner_test {
namespace {

std::vector<std::vector<std::int32_t>> random_prompts(const std::vector<int>& lengths,
                                                      std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::int32_t>> out;
  for (int n : lengths) {
    out.emplace_back();
    for (int i = 0; i < n; ++i)
      out.back().push_back(static_cast<std::int32_t>(rng() % 1000));
  }
  return out;
}

struct MicroRun {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::pair<std::int64_t, std::int64_t>> progress;
  std::vector<std::string> log;
};

MicroRun run_micro(const std::vector<std::vector<std::int32_t>>& prompts, int micro, int chunk,
                   int decode) {
  MicroRun run;
  const std::vector<runner::MicroBatch> batches =
      runner::split_requests(static_cast<int>(prompts.size()), micro);
  std::vector<std::unique_ptr<FakeRunner>> runners;
  for (std::size_t k = 0; k < batches.size(); ++k)
    runners.push_back(
        std::make_unique<FakeRunner>(batches[k].requests, "mb" + std::to_string(k), &run.log));
  run.tokens = runner::prefill_each(
      runners, batches, prompts, chunk,
      [&run](std::int64_t done, std::int64_t total) { run.progress.emplace_back(done, total); });
  runner::decode_overlapped(runners, batches, decode - 1, run.tokens);
  return run;
}

TEST(MicroBatches, DecodeTheTokensOfOneBatch) {
  const std::uint64_t seed = 20261130;
  for (int micro : {1, 2, 3, 5}) {
    const auto prompts = random_prompts({37, 5, 64, 1, 18}, seed);
    FakeRunner one(5, "one", nullptr);
    const auto expected = one.generate(prompts, 7, 9);
    const MicroRun run = run_micro(prompts, micro, 7, 9);
    EXPECT_EQ(run.tokens, expected) << micro << " micro-batches, seed " << seed;
    ASSERT_EQ(run.tokens[4].size(), 9u);
  }
}

TEST(MicroBatches, EveryStepLaunchesAllBeforeWaitingForAny) {
  const MicroRun run = run_micro(random_prompts({3, 4, 5}, 1), 2, 2, 3);
  const std::vector<std::string> expected = {
      "mb0: generate 1 x 1", "mb1: generate 2 x 1",                                 // prefill
      "mb0: launch",         "mb1: launch",         "mb0: finish", "mb1: finish",   // step 2
      "mb0: launch",         "mb1: launch",         "mb0: finish", "mb1: finish"};  // step 3
  EXPECT_EQ(run.log, expected);
}

// A step is steady when every micro-batch's forward was: the slowest runner to settle decides.
TEST(MicroBatches, SteadyStepsAreThoseWhereEveryMicroBatchWasSteady) {
  const auto prompts = random_prompts({3, 4, 5, 6}, 3);
  const std::vector<runner::MicroBatch> batches = runner::split_requests(4, 2);
  std::vector<std::unique_ptr<FakeRunner>> runners;
  for (std::size_t k = 0; k < batches.size(); ++k)
    runners.push_back(std::make_unique<FakeRunner>(batches[k].requests, "mb", nullptr));
  runners[1]->unsteady_steps = 2;
  auto tokens = runner::prefill_each(runners, batches, prompts, 4, {});
  const runner::OverlappedTime t = runner::decode_overlapped(runners, batches, 6, tokens);
  EXPECT_EQ(t.steady_steps, 4);
  EXPECT_GE(t.ms, t.steady_ms);
  EXPECT_GE(t.steady_ms, 0.0);
}

TEST(MicroBatches, PrefillProgressCountsOverAllMicroBatches) {
  const auto prompts = random_prompts({10, 3, 8, 8}, 2);
  const MicroRun run = run_micro(prompts, 2, 4, 2);
  ASSERT_FALSE(run.progress.empty());
  std::int64_t last = 0;
  for (const auto& [done, total] : run.progress) {
    EXPECT_EQ(total, 29);
    EXPECT_GT(done, last);
    last = done;
  }
  EXPECT_EQ(last, 29);
}

TEST(MicroBatches, OverlappedStepsKeepTheirOwnDecodeFigures) {
  runner::RunnerStats before, overlapped;
  before.forwards = 5;
  before.prefill_tokens = 900;
  before.prefill_ms = 40.0;
  before.decode_tokens = 8;  // the first token of every request: not an overlapped step
  before.decode_ms = 3.0;
  before.decode_gpu_ms = 2.5;
  before.hits = 10;
  before.staged_bytes = 4096;
  before.phases["prefill/index"] = 1.5;
  overlapped.forwards = 62;
  overlapped.decode_tokens = 248;
  overlapped.decode_ms = 300.0;  // the runners' own times, overlapping each other
  overlapped.decode_gpu_ms = 250.0;
  overlapped.graph_forwards = 58;
  overlapped.hits = 7;
  overlapped.in_place_bytes = 1 << 20;
  overlapped.phases["prefill/index"] = 0.5;
  overlapped.phases["decode/attend"] = 9.0;
  overlapped.decode_steady_ms = 280.0;  // the runners' own again
  overlapped.decode_steady_forwards = 56;
  overlapped.decode_steady_h2d_bytes = 5000;
  const runner::RunnerStats s =
      runner::overlapped_run_stats(overlapped, before, runner::OverlappedTime{160.0, 150.0, 28});
  EXPECT_EQ(s.forwards, 67);
  EXPECT_EQ(s.prefill_tokens, 900);
  EXPECT_EQ(s.prefill_ms, 40.0);
  EXPECT_EQ(s.hits, 17);
  EXPECT_EQ(s.staged_bytes, 4096);
  EXPECT_EQ(s.in_place_bytes, 1 << 20);
  EXPECT_EQ(s.decode_tokens, 248);
  EXPECT_EQ(s.decode_ms, 160.0);
  EXPECT_EQ(s.decode_gpu_ms, 160.0);
  EXPECT_EQ(s.graph_forwards, 58);
  EXPECT_EQ(s.decode_steady_ms, 150.0);
  EXPECT_EQ(s.decode_steady_forwards, 28);
  EXPECT_EQ(s.decode_steady_h2d_bytes, 5000);
  EXPECT_EQ(s.phases.at("prefill/index"), 2.0);
  EXPECT_EQ(s.phases.at("decode/attend"), 9.0);
}

}  // namespace
}  // namespace kvtier::runner_test
