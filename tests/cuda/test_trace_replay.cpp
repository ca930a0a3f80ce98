// `kvtier run --trace` (cuda/trace_replay.hpp) on small generated traces: the GPU replay
// makes exactly the simulator's eviction decisions (its --decisions lines are identical),
// every compacted query and copy list equals the core's, every selected token reads the
// bytes that were stored (checksum == CPU reference), and the three placements read the
// same bytes.
#include <gtest/gtest.h>

#include <sstream>

#include "cuda/trace_replay.hpp"
#include "frontend/front_end.hpp"
#include "model/cost_model.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "tests/cuda/gpu_test_util.hpp"
#include "tests/cuda/replay_test_util.hpp"
#include "traces/generator.hpp"

namespace kvtier::cuda {
namespace {

Geometry small_geometry() {
  return test::small_replay_geometry();
}

traces::TraceInput small_trace(std::uint64_t seed) {
  const Geometry g = small_geometry();
  traces::GenParams p = traces::gen_preset("dsv4-flash");
  p.seed = seed;
  p.requests = 4;
  p.concurrent = 2;
  p.prompt_min = 200;
  p.prompt_max = 700;
  p.decode_min = 30;
  p.decode_max = 60;
  p.prefill_chunk = 256;
  p.prefill_samples = 4;
  p.sinks_always = 2;
  p.sinks_likely = 4;
  traces::TraceHeader h;
  h.geometry = g;
  return traces::memory_trace("small", h, test::generated_records(g, p));
}

struct Case {
  std::uint64_t seed;
  std::int64_t pool;
  KvDtype dtype;
  EnsureForm form;
  MirrorPolicy policy = MirrorPolicy::lru;
};

class ReplayMatchesSimulator : public ::testing::TestWithParam<Case> {};

TEST_P(ReplayMatchesSimulator, SameDecisionsAndBytes) {
  KVT_REQUIRE_GPU();
  const Case k = GetParam();
  const traces::TraceInput in = small_trace(k.seed);
  std::ostringstream gpu_decisions;
  ReplayConfig c;
  c.placement = Placement::mirror;
  c.dtype = k.dtype;
  c.pool_pages = k.pool;
  c.form = k.form;
  c.policy = k.policy;
  c.verify = true;
  c.decisions = &gpu_decisions;
  const ReplayResult r = replay_trace(in, c);
  EXPECT_GT(r.total.forward, 10);
  EXPECT_GT(r.total.misses, 0);
  EXPECT_EQ(r.query_mismatches, 0) << r.first_mismatch;
  EXPECT_EQ(r.decision_mismatches, 0) << r.first_mismatch;
  EXPECT_EQ(r.total.missing, 0);
  EXPECT_EQ(r.checksum, r.expected_checksum);
  const std::string expected = test::simulator_decisions(in, k.pool, k.policy);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(gpu_decisions.str(), expected);
  if (k.policy == MirrorPolicy::prefetch) {
    EXPECT_GT(r.total.prefetched, 0);
    EXPECT_NE(expected.find("\"kind\":\"prefetch\""), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Traces, ReplayMatchesSimulator,
    ::testing::Values(Case{1, 40, KvDtype::bf16, EnsureForm::block},
                      Case{2, 48, KvDtype::fp8, EnsureForm::block},
                      Case{3, 40, KvDtype::bf16, EnsureForm::multi_block},
                      Case{4, 64, KvDtype::fp8, EnsureForm::multi_block},
                      Case{5, 2000, KvDtype::bf16, EnsureForm::core_thread},
                      Case{6, 40, KvDtype::bf16, EnsureForm::block, MirrorPolicy::prefetch},
                      Case{7, 48, KvDtype::fp8, EnsureForm::multi_block, MirrorPolicy::prefetch},
                      Case{8, 64, KvDtype::bf16, EnsureForm::core_thread, MirrorPolicy::prefetch}));

// With a pool that never truncates a row, every placement reads the same bytes.
TEST(TraceReplay, PlacementsReadTheSameBytes) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = small_trace(7);
  for (KvDtype dt : {KvDtype::bf16, KvDtype::fp8}) {
    ReplayConfig c;
    c.dtype = dt;
    c.verify = true;
    c.placement = Placement::device;
    const ReplayResult dev = replay_trace(in, c);
    c.write_through = true;
    const ReplayResult wt = replay_trace(in, c);
    c.write_through = false;
    c.placement = Placement::host;
    const ReplayResult host = replay_trace(in, c);
    c.placement = Placement::mirror;
    c.pool_pages = 4096;
    const ReplayResult mir = replay_trace(in, c);
    EXPECT_EQ(dev.total.drops, 0);
    EXPECT_EQ(mir.total.drops, 0);
    EXPECT_EQ(dev.checksum, dev.expected_checksum);
    EXPECT_EQ(wt.checksum, dev.checksum);
    EXPECT_EQ(host.checksum, dev.checksum);
    EXPECT_EQ(mir.checksum, dev.checksum);
    EXPECT_GT(mir.total.hits, 0);
    EXPECT_EQ(dev.total.d2h_bytes, 0);
    EXPECT_GT(wt.total.d2h_bytes, 0);
    EXPECT_EQ(host.total.d2h_bytes, wt.total.d2h_bytes);
    EXPECT_EQ(mir.total.d2h_bytes, wt.total.d2h_bytes);
    EXPECT_GT(host.total.h2d_bytes, 0);
  }
}

TEST(TraceReplay, PoolTooSmallIsACapacityError) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = small_trace(1);
  ReplayConfig c;
  c.placement = Placement::mirror;
  c.pool_pages = 3;
  EXPECT_ANY_THROW(replay_trace(in, c));
}

}  // namespace
}  // namespace kvtier::cuda
