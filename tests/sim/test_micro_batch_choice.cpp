// kvtier run --micro-batches auto: the cost model's estimate of a host decode step in 1, 2 and 4
// groups (model/micro_batch_choice.hpp), on the shipped H200 profile and on round numbers.
#include <gtest/gtest.h>

#include <stdexcept>

#include "model/micro_batch_choice.hpp"
#include "sim/profiles.hpp"

namespace kvtier::sim {
namespace {

MicroBatchChoice on_h200(KvDtype d, int requests, std::int64_t context) {
  return choose_micro_batches(CostModel(load_profile("h200-pcie5")), Geometry{}, d, requests,
                              context);
}

// Where the H200 measured (bench/results/micro-batches-h200-2026-12-03.md): groups paid at
// 8 x 1M fp8 and at 32 x 128k bf16 (4 groups: -4.5 %), and not at 64 x 32k bf16 (-0.9 % at
// best), whose step the link sets nearly alone.
TEST(MicroBatchChoice, GroupsWhereTheWorkBetweenTheReadsIsALargeShare) {
  const MicroBatchChoice fp8 = on_h200(KvDtype::fp8, 8, 1048576);
  EXPECT_GT(fp8.micro_batches, 1);
  ASSERT_EQ(fp8.estimates.size(), 3u);
  EXPECT_LT(fp8.estimates[1].step_ms, 0.9 * fp8.estimates[0].step_ms);
  const MicroBatchChoice at128k = on_h200(KvDtype::bf16, 32, 131072);
  EXPECT_EQ(at128k.micro_batches, 4);
  const MicroBatchChoice at32k = on_h200(KvDtype::bf16, 64, 32768);
  EXPECT_EQ(at32k.micro_batches, 1);
  for (const MicroBatchChoice* b : {&at128k, &at32k}) {
    // the link's reads are most of the step, so a group saves a few per cent at most
    EXPECT_GT(b->link_ms(), 5 * b->estimates[0].compute_ms);
    EXPECT_GT(b->estimates.back().step_ms, 0.95 * b->estimates[0].step_ms);
  }
}

TEST(MicroBatchChoice, EstimatesAreTheOverlapOfTheLinkAndTheWork) {
  const MicroBatchChoice c = on_h200(KvDtype::fp8, 8, 1048576);
  for (const MicroBatchEstimate& e : c.estimates) {
    const double big = std::max(e.link_ms, e.compute_ms), small = std::min(e.link_ms, e.compute_ms);
    EXPECT_NEAR(e.step_ms, big + small / e.micro_batches, 1e-9);
  }
  EXPECT_EQ(c.link_ms(), c.estimates[0].link_ms);
  // every group reads the weights again: more groups, more work
  EXPECT_LT(c.estimates[0].compute_ms, c.estimates[1].compute_ms);
  EXPECT_LT(c.estimates[1].compute_ms, c.estimates[2].compute_ms);
  // one request: one batch, nothing to split; three: K = 1 and 2 only
  EXPECT_EQ(on_h200(KvDtype::fp8, 1, 1048576).estimates.size(), 1u);
  EXPECT_EQ(on_h200(KvDtype::fp8, 1, 1048576).micro_batches, 1);
  EXPECT_EQ(on_h200(KvDtype::fp8, 3, 1048576).estimates.size(), 2u);
  EXPECT_THROW(on_h200(KvDtype::bf16, 0, 1024), std::invalid_argument);
  EXPECT_THROW(on_h200(KvDtype::bf16, 8, 0), std::invalid_argument);
}

}  // namespace
}  // namespace kvtier::sim

namespace kvtier::sim {
namespace {

// The groups the session builds at 8 x 1M fp8 with --pool-pages max at B = 24 GiB (each
// group's pool its requests' share of B: bench/results/micro-batches-h200-2026-12-03.md).
std::vector<std::vector<MirrorGroup>> mirror_1m_b24() {
  return {{{8, 23981}}, {{4, 11904}, {4, 11904}}, {{2, 5866}, {2, 5866}, {2, 5866}, {2, 5866}}};
}

MicroBatchChoice mirror_on_h200(KvDtype d, std::int64_t context,
                                const std::vector<std::vector<MirrorGroup>>& c) {
  return choose_mirror_micro_batches(CostModel(load_profile("h200-pcie5")), Geometry{}, d, context,
                                     c);
}

// Where the H200 measured (bench/results/mirror-step-blocks-h200-2026-12-04.md): at 8 x 1M fp8
// with the pool B = 24 GiB holds, 2 - 4 groups took 9 - 18 % off the step; with a pool that
// holds every page nothing crosses the link, and groups only add work.
TEST(MirrorMicroBatchChoice, GroupsWhereTheMissCopySetsTheStep) {
  const MicroBatchChoice at1m = mirror_on_h200(KvDtype::fp8, 1048576, mirror_1m_b24());
  ASSERT_EQ(at1m.estimates.size(), 3u);
  EXPECT_GT(at1m.micro_batches, 1);
  EXPECT_GT(at1m.link_ms(), 5 * at1m.estimates[0].compute_ms);
  for (const MicroBatchEstimate& e : at1m.estimates) {
    const double big = std::max(e.link_ms, e.compute_ms), small = std::min(e.link_ms, e.compute_ms);
    EXPECT_NEAR(e.step_ms, big + small / e.micro_batches, 1e-9);
  }
  // a pool of every page: no misses, so one batch
  const std::int64_t all = 8 * Geometry{}.pages_for_context(16384);
  const MicroBatchChoice fits =
      mirror_on_h200(KvDtype::bf16, 16384, {{{8, all}}, {{4, all}, {4, all}}});
  EXPECT_EQ(fits.micro_batches, 1);
  EXPECT_EQ(fits.link_ms(), 0.0);
  EXPECT_LT(fits.estimates[0].step_ms, fits.estimates[1].step_ms);
}

TEST(MirrorMicroBatchChoice, MissesFollowThePoolsShareOfTheContext) {
  const Geometry g;
  // 1M tokens: 512 blocks of 262,144 draw almost one page each; 2k tokens: every page
  EXPECT_NEAR(spread_selection_pages(g, 1048576), 504.0 + 1.0, 2.0);
  EXPECT_EQ(spread_selection_pages(g, 2048), 32.0);
  EXPECT_LE(spread_selection_pages(g, 16384), static_cast<double>(g.max_pages_per_row(16384)));
  // a larger pool, fewer misses, less on the link
  const auto one = [&](std::int64_t slots) {
    return mirror_on_h200(KvDtype::fp8, 1048576, {{{8, slots}}}).link_ms();
  };
  EXPECT_GT(one(10000), one(40000));
  EXPECT_GT(one(40000), one(120000));
  EXPECT_EQ(one(8 * g.pages_for_context(1048576)), 0.0);
}

TEST(MirrorMicroBatchChoice, RefusesWhatItCannotPrice) {
  EXPECT_THROW(mirror_on_h200(KvDtype::bf16, 1024, {}), std::invalid_argument);
  EXPECT_THROW(mirror_on_h200(KvDtype::bf16, 0, {{{1, 10}}}), std::invalid_argument);
  EXPECT_THROW(mirror_on_h200(KvDtype::bf16, 1024, {{}}), std::invalid_argument);
  EXPECT_THROW(mirror_on_h200(KvDtype::bf16, 1024, {{{1, 10}, {1, 10}}}), std::invalid_argument);
  EXPECT_THROW(mirror_on_h200(KvDtype::bf16, 1024, {{{0, 10}}}), std::invalid_argument);
  EXPECT_THROW(mirror_on_h200(KvDtype::bf16, 1024, {{{1, 0}}}), std::invalid_argument);
}

}  // namespace
}  // namespace kvtier::sim
