// The needle protocol's bookkeeping (cuda/runner/needle_protocol.hpp) over a fake runner on
// the CPU: everything but the query token is prefilled with the probe on, the query token is
// the first decode row, the cosines are taken then, and the remaining steps run without the
// probe.
#include "cuda/runner/needle_protocol.hpp"

#include <gtest/gtest.h>

#include "model/config_error.hpp"
#include "tests/runner/fake_runner.hpp"

namespace kvtier::runner_test {
namespace {

// Two query heads over one KV head of two dimensions: an attention output [2][2] against a
// value [1][2].
Geometry tiny_heads() {
  Geometry g;
  g.q_heads = 2;
  g.kv_heads = 1;
  g.head_dim = 2;
  return g;
}

TEST(NeedleProtocol, PrefillsAllButTheQueryWithTheProbeOn) {
  std::vector<std::string> log;
  FakeRunner r(1, "r", &log);
  r.attention = {{1, 0, 1, 0}, {0, 1, 0, 1}};
  r.values = {{2, 0}, {3, 0}};
  const std::vector<std::int32_t> prompt = {5, 6, 7, 8, 9, 42};  // 42: the query token
  int prefilled = 0;
  std::vector<std::int64_t> progress;
  const runner::NeedleRun n = runner::run_needle(
      r, tiny_heads(), prompt, 2, 4, 3,
      [&](std::int64_t done, std::int64_t total) {
        EXPECT_EQ(total, 5);
        progress.push_back(done);
      },
      [&] {
        ++prefilled;
        log.push_back("prefilled");
      });
  EXPECT_EQ(prefilled, 1);
  EXPECT_EQ(progress, (std::vector<std::int64_t>{4, 5}));  // chunks of 4 rows
  const std::vector<std::string> expected = {
      "r: probe 2",  "r: generate 1 x 1", "prefilled", "r: launch", "r: finish",  // the query
      "r: probe -1", "r: launch",         "r: finish", "r: launch", "r: finish"};
  EXPECT_EQ(log, expected);
  EXPECT_EQ(r.probe(), -1);
  // The runner saw the prompt, then the tokens it decoded but the last.
  ASSERT_EQ(n.tokens.size(), 3u);
  std::vector<std::int32_t> seen = prompt;
  seen.insert(seen.end(), n.tokens.begin(), n.tokens.end() - 1);
  EXPECT_EQ(r.history(0), seen);
  ASSERT_EQ(n.cosines.size(), 2u);
  EXPECT_DOUBLE_EQ(n.cosines[0], 1.0);
  EXPECT_DOUBLE_EQ(n.cosines[1], 0.0);
}

TEST(NeedleProtocol, OneDecodeStepIsTheQueryAlone) {
  FakeRunner r(1, "r", nullptr);
  r.attention = {{1, 0, 1, 0}};
  r.values = {{1, 0}};
  const runner::NeedleRun n = runner::run_needle(r, tiny_heads(), {3, 4, 42}, 0, 8, 1, {}, {});
  EXPECT_EQ(n.tokens.size(), 1u);
  EXPECT_EQ(r.history(0), (std::vector<std::int32_t>{3, 4, 42}));
  EXPECT_THROW(runner::run_needle(r, tiny_heads(), {42}, 0, 8, 1, {}, {}), ConfigError);
}

}  // namespace
}  // namespace kvtier::runner_test
