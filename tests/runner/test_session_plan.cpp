// The plan of a session (cuda/runner/session_plan.hpp) on the CPU: the split of the requests
// into micro-batches, each micro-batch's runner configuration (rows, context, decode splits)
// and what memory_budget prices for it.
#include "cuda/runner/session_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/memory_budget.hpp"
#include "sim/profiles.hpp"
#include "tests/error_of.hpp"

namespace kvtier::runner_test {
namespace {

using runner::MicroBatch;
using runner::SessionOptions;

SessionOptions options_of(const std::vector<std::int64_t>& lengths) {
  SessionOptions o;
  for (std::int64_t n : lengths)
    o.prompts.emplace_back(static_cast<std::size_t>(n), 7);
  return o;
}

// 8 x 1M fp8 on placement mirror, --pool-pages max at B = 24 GiB: the H200's case of
// bench/results/micro-batches-h200-2026-12-03.md.
SessionOptions mirror_8x1m_fp8() {
  SessionOptions o = options_of({1, 1, 1, 1, 1, 1, 1, 1});
  o.runner.placement = Placement::mirror;
  o.runner.dtype = KvDtype::fp8;
  o.runner.yarn = true;
  o.fill_depth = 1048544;
  o.pool_fits_budget = true;
  o.device_kv_bytes = std::int64_t{24} << 30;
  return o;
}

TEST(SessionPlan, MicroBatchesCoverEveryRequestOnceInNearlyEqualParts) {
  for (int n : {1, 2, 3, 5, 8, 17}) {
    for (int k = 1; k <= n; ++k) {
      const std::vector<MicroBatch> b = runner::split_requests(n, k);
      ASSERT_EQ(b.size(), static_cast<std::size_t>(k));
      int next = 0;
      for (std::size_t i = 0; i < b.size(); ++i) {
        EXPECT_EQ(b[i].first, next) << n << " in " << k;
        EXPECT_GE(b[i].requests, n / k);
        EXPECT_LE(b[i].requests, n / k + 1);
        next += b[i].requests;
      }
      EXPECT_EQ(next, n);
    }
  }
  const auto five = runner::split_requests(5, 2);
  EXPECT_EQ(five[0].requests, 2);
  EXPECT_EQ(five[1].first, 2);
  EXPECT_EQ(five[1].requests, 3);
  EXPECT_THROW(runner::split_requests(2, 3), ConfigError);
  EXPECT_THROW(runner::split_requests(2, 0), ConfigError);
}

// generate()'s batching forward by forward: every request with tokens left gives up to chunk.
std::vector<int> forward_rows_one_by_one(const std::vector<std::int64_t>& lengths, int chunk) {
  std::vector<std::int64_t> done(lengths.size(), 0);
  std::vector<int> rows;
  for (;;) {
    std::int64_t r = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const std::int64_t take = std::min<std::int64_t>(chunk, lengths[i] - done[i]);
      r += take;
      done[i] += take;
    }
    if (r == 0) break;
    if (std::find(rows.begin(), rows.end(), r) == rows.end()) rows.push_back(static_cast<int>(r));
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

TEST(SessionPlan, PrefillForwardRowsAreTheDistinctRowsGenerateRuns) {
  EXPECT_EQ(runner::prefill_forward_rows({16384, 16384}, 2048), (std::vector<int>{4096}));
  EXPECT_EQ(runner::prefill_forward_rows({5000}, 2048), (std::vector<int>{904, 2048}));
  EXPECT_EQ(runner::prefill_forward_rows({1, 1, 1}, 2048), (std::vector<int>{3}));
  EXPECT_EQ(runner::prefill_forward_rows({100, 3000}, 1024), (std::vector<int>{952, 1024, 1124}));
  EXPECT_TRUE(runner::prefill_forward_rows({}, 16).empty());
  std::uint64_t s = 12345;
  const auto next = [&s](std::uint64_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (s >> 33) % n;
  };
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::int64_t> lengths(1 + next(9));
    for (auto& n : lengths)
      n = 1 + static_cast<std::int64_t>(next(trial % 3 == 0 ? 40 : 5000));
    const int chunk = 1 + static_cast<int>(next(trial % 2 == 0 ? 7 : 3000));
    EXPECT_EQ(runner::prefill_forward_rows(lengths, chunk), forward_rows_one_by_one(lengths, chunk))
        << "trial " << trial << ", chunk " << chunk;
  }
}

TEST(SessionPlan, HalfTheSmsForAHostMicroBatch) {
  EXPECT_EQ(runner::half_sm_decode_splits(132, 4, 2), 8);  // 66 SMs / 8 (request, KV head)
  EXPECT_EQ(runner::half_sm_decode_splits(132, 1, 1), 66);
  EXPECT_EQ(runner::half_sm_decode_splits(132, 64, 2), 1);  // at least one split
}

TEST(SessionPlan, EveryRunnerHoldsItsRequestsAtTheLongestContext) {
  SessionOptions o = options_of({8000, 2000, 500});
  o.chunk = 2048;
  o.decode = 16;
  o.fill_depth = 100;
  o.runner.placement = Placement::mirror;
  o.runner.pool_pages = 999;
  o.runner.copy_first = true;
  const Geometry g;
  const runner::SessionPlan one = runner::plan_session(o, g, 132);
  EXPECT_EQ(one.rows_per_request, 2048);
  ASSERT_EQ(one.batches.size(), 1u);
  const runner::RunnerConfig& c = one.batches[0].config;
  EXPECT_EQ(c.max_requests, 3);
  EXPECT_EQ(c.max_rows, 3 * 2048);
  EXPECT_EQ(c.max_context, 100 + 8000 + 16 - 1);  // the last decoded token is not stored
  EXPECT_EQ(c.pool_pages, 999);                   // the rest as given
  EXPECT_TRUE(c.copy_first);
  EXPECT_EQ(c.decode_splits, 0);

  o.chunk = 9000;  // a chunk longer than every prompt takes the longest prompt's rows
  EXPECT_EQ(runner::plan_session(o, g, 132).rows_per_request, 8000);
}

TEST(SessionPlan, HostMicroBatchesShareTheSmsAndTheirReadsYield) {
  SessionOptions o = options_of({1, 1, 1, 1, 1});
  o.micro_batches = 2;
  o.runner.placement = Placement::host;
  const Geometry g;
  const runner::SessionPlan p = runner::plan_session(o, g, 132);
  ASSERT_EQ(p.batches.size(), 2u);
  EXPECT_EQ(p.batches[0].config.max_requests, 2);
  EXPECT_EQ(p.batches[1].config.max_requests, 3);
  EXPECT_EQ(p.batches[1].config.max_rows, 3);
  for (const MicroBatch& b : p.batches) {
    EXPECT_EQ(b.config.decode_splits, runner::half_sm_decode_splits(132, b.requests, g.kv_heads));
    EXPECT_TRUE(b.config.reads_yield);  // the others' work goes ahead of the reads
  }
  o.runner.decode_splits = 7;
  for (const MicroBatch& b : runner::plan_session(o, g, 132).batches) {
    EXPECT_EQ(b.config.decode_splits, 7);
    EXPECT_TRUE(b.config.reads_yield);
  }
  o.runner.decode_splits = 0;
  o.runner.placement = Placement::device;  // no link to wait on: the kernels' default
  for (const MicroBatch& b : runner::plan_session(o, g, 132).batches) {
    EXPECT_EQ(b.config.decode_splits, 0);
    EXPECT_FALSE(b.config.reads_yield);
  }
  o.micro_batches = 1;
  o.runner.placement = Placement::host;
  EXPECT_EQ(runner::plan_session(o, g, 132).batches[0].config.decode_splits, 0);
  EXPECT_FALSE(runner::plan_session(o, g, 132).batches[0].config.reads_yield);
}

TEST(SessionPlan, MirrorMicroBatchesStepOnAFewBlocks) {
  SessionOptions o = options_of({1, 1, 1, 1});
  o.runner.placement = Placement::mirror;
  o.runner.pool_pages = 100000;
  o.allow_drops = true;
  const Geometry g;
  o.micro_batches = 2;
  for (const MicroBatch& b : runner::plan_session(o, g, 132).batches)
    EXPECT_EQ(b.config.step_blocks, runner::kMicroBatchStepBlocks);
  o.step_blocks = 0;  // asked: one per SM
  for (const MicroBatch& b : runner::plan_session(o, g, 132).batches)
    EXPECT_EQ(b.config.step_blocks, 0);
  o.step_blocks = 5;
  o.micro_batches = 1;
  EXPECT_EQ(runner::plan_session(o, g, 132).batches[0].config.step_blocks, 5);
  o.step_blocks = -1;  // one batch: nothing runs beside its step, so it takes every SM
  EXPECT_EQ(runner::plan_session(o, g, 132).batches[0].config.step_blocks, 0);
  o.runner.placement = Placement::host;  // no step
  o.micro_batches = 2;
  for (const MicroBatch& b : runner::plan_session(o, g, 132).batches)
    EXPECT_EQ(b.config.step_blocks, 0);
}

// --micro-batches auto on mirror: the groups of K = 1, 2, 4 with the pools the session gives
// them; at 8 x 1M fp8 with --pool-pages max at B = 24 GiB those the H200 runs had
// (bench/results/micro-batches-h200-2026-12-03.md: 23,981, 2 x 11,904, 4 x 5,866 slots).
TEST(SessionPlan, MirrorCandidatesAreTheGroupsTheSessionBuilds) {
  SessionOptions o = mirror_8x1m_fp8();
  const Geometry g;
  const auto c = runner::mirror_micro_batch_candidates(o, g);
  ASSERT_EQ(c.size(), 3u);
  ASSERT_EQ(c[0].size(), 1u);
  EXPECT_EQ(c[0][0].rows, 8);
  EXPECT_EQ(c[0][0].pool_slots, 23981);
  ASSERT_EQ(c[1].size(), 2u);
  ASSERT_EQ(c[2].size(), 4u);
  for (const kvtier::MirrorGroup& grp : c[1]) {
    EXPECT_EQ(grp.rows, 4);
    EXPECT_EQ(grp.pool_slots, 11904);
  }
  for (const kvtier::MirrorGroup& grp : c[2]) {
    EXPECT_EQ(grp.rows, 2);
    EXPECT_EQ(grp.pool_slots, 5866);
  }
  // a budget whose pools would drop pages: every K refused, so no candidate
  o.device_kv_bytes = std::int64_t{1} << 30;
  EXPECT_TRUE(runner::mirror_micro_batch_candidates(o, g).empty());
  // three requests: K = 1 and 2 only
  o.device_kv_bytes = std::int64_t{24} << 30;
  o.prompts.resize(3);
  const auto three = runner::mirror_micro_batch_candidates(o, g);
  ASSERT_EQ(three.size(), 2u);
  EXPECT_EQ(three[1][0].rows + three[1][1].rows, 3);
  // a pool given by count would be every group's (memory times K): one batch only
  o = options_of({1000, 1000, 1000, 1000});
  o.runner.placement = Placement::mirror;
  o.runner.pool_pages = 5000;
  const auto given = runner::mirror_micro_batch_candidates(o, g);
  ASSERT_EQ(given.size(), 1u);
  EXPECT_EQ(given[0][0].rows, 4);
  EXPECT_EQ(given[0][0].pool_slots, 5000);
}

// --micro-batches auto (runner::choose_session_micro_batches): the model's count where the
// groups can run, one batch (and no estimates) everywhere else, whatever count was set.
TEST(SessionPlan, AutoMicroBatchesAreTheModelsCountWhereGroupsCanRun) {
  const CostModel cost(sim::load_profile("h200-pcie5"));
  const Geometry g;
  SessionOptions host = options_of(std::vector<std::int64_t>(32, 1));
  host.runner.placement = Placement::host;
  host.fill_depth = 131071;
  const auto c = runner::choose_session_micro_batches(host, g, cost);
  ASSERT_TRUE(c.has_value());
  const MicroBatchChoice want = choose_micro_batches(cost, g, KvDtype::bf16, 32, 131072);
  EXPECT_EQ(c->micro_batches, want.micro_batches);
  EXPECT_EQ(host.micro_batches, want.micro_batches);
  EXPECT_EQ(host.micro_batches, 4);  // as the H200 measured it (micro-batches-h200-2026-12-03)
  ASSERT_EQ(c->estimates.size(), want.estimates.size());
  for (std::size_t k = 0; k < want.estimates.size(); ++k)
    EXPECT_DOUBLE_EQ(c->estimates[k].step_ms, want.estimates[k].step_ms);

  SessionOptions mirror = mirror_8x1m_fp8();
  const auto m = runner::choose_session_micro_batches(mirror, g, cost);
  ASSERT_TRUE(m.has_value());
  const MicroBatchChoice mwant = choose_mirror_micro_batches(
      cost, g, KvDtype::fp8, 1048545, runner::mirror_micro_batch_candidates(mirror, g));
  EXPECT_EQ(m->micro_batches, mwant.micro_batches);
  EXPECT_EQ(mirror.micro_batches, mwant.micro_batches);
  // a budget whose one batch plan_session refuses: no estimate, one batch
  mirror.device_kv_bytes = std::int64_t{1} << 30;
  EXPECT_FALSE(runner::choose_session_micro_batches(mirror, g, cost).has_value());
  EXPECT_EQ(mirror.micro_batches, 1);

  // where groups cannot run, whatever count was set before
  const auto one_batch = [&](SessionOptions o) {
    o.micro_batches = 3;
    const bool chose = runner::choose_session_micro_batches(o, g, cost).has_value();
    return !chose && o.micro_batches == 1;
  };
  SessionOptions o = host;
  o.runner.placement = Placement::device;
  EXPECT_TRUE(one_batch(o));
  o = host;
  o.decode = 1;
  EXPECT_TRUE(one_batch(o));
  o = host;
  o.prompts.resize(1);
  EXPECT_TRUE(one_batch(o));
  o = host;
  o.needle_at = 0;
  EXPECT_TRUE(one_batch(o));
  o = host;
  o.record_path = "t.ktr";
  EXPECT_TRUE(one_batch(o));
  o = host;
  o.runner.profile_phases = true;
  EXPECT_TRUE(one_batch(o));
  EXPECT_FALSE(one_batch(host));
}

TEST(SessionPlan, RefusesWhatTheSessionCannotRun) {
  const Geometry g;
  EXPECT_THROW(runner::plan_session(SessionOptions{}, g, 132), ConfigError);
  SessionOptions o = options_of({4, 4});
  o.micro_batches = 3;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
  o.micro_batches = 2;
  o.record_path = "x.ktr";
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
  o.record_path.clear();
  o.needle_at = 1;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
  o.micro_batches = 1;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);  // two requests
  o = options_of({4});
  o.decode = 0;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
  o.decode = 1;
  o.chunk = 0;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
}

TEST(SessionPlan, BudgetPricesAMicroBatchAtItsContext) {
  const Geometry g;
  MicroBatch b;
  b.requests = 3;
  b.config.max_requests = 3;
  b.config.max_context = 1000;  // 16 pages of 64
  b.config.placement = Placement::mirror;
  b.config.dtype = KvDtype::fp8;
  b.config.pool_pages = 4096;
  b.config.staging_window_tokens = 8192;
  const BudgetRequest br = runner::budget_request(g, b, 100, 5'000'000'000, 7'000'000'000);
  EXPECT_EQ(br.placement, Placement::mirror);
  EXPECT_EQ(br.dtype, KvDtype::fp8);
  EXPECT_EQ(br.host_pages, 16 * 3);
  EXPECT_EQ(br.pool_slots, 4096);
  EXPECT_EQ(br.batch_rows, 3);
  EXPECT_EQ(br.write_pages, 3 * (2 + 1));  // 100 rows fill two pages and may start inside one
  EXPECT_EQ(br.context_tokens, 1000);
  EXPECT_EQ(br.staging_window_tokens, 8192);
  EXPECT_EQ(br.device_capacity_bytes, 5'000'000'000);
  EXPECT_EQ(br.host_capacity_bytes, 7'000'000'000);
  const MemoryBudget m = memory_budget(br);
  EXPECT_GT(m.device_bytes, 0);
  EXPECT_GT(m.host_bytes, 0);

  b.config.host_pages = 12345;  // a page space given is priced as given
  EXPECT_EQ(runner::budget_request(g, b, 100, 0, 0).host_pages, 12345);
  b.config.pool_pages = 1;  // a pool that cannot hold one forward's selection
  EXPECT_THROW(memory_budget(runner::budget_request(g, b, 100, 0, 0)), ConfigError);
}

// The message of the ConfigError `f` throws.
template <class F>
std::string refusal(F&& f) {
  return kvtier::testing::error_of<ConfigError>(std::forward<F>(f));
}

// Issue 19: 16 requests at 128k on a mirror pool of 2,048 slots dropped a million selected
// pages in silence. The pool is now refused unless allow_drops, naming the smallest that drops
// nothing: memory_budget's no_drop_slots (the core's select_width), not a figure of its own.
TEST(SessionPlan, AMirrorPoolThatDropsSelectedPagesIsRefusedNamingTheSmallest) {
  SessionOptions o = options_of(std::vector<std::int64_t>(16, 1));
  o.fill_depth = 131071;
  o.decode = 16;
  o.runner.placement = Placement::mirror;
  o.runner.pool_pages = 2048;
  const Geometry g;
  const std::string m = refusal([&] { runner::plan_session(o, g, 132); });
  // 16 requests x 513 pages (512 blocks in pages of their own + the causal tail's) + 16
  // pages a forward of one row per request writes (two each: a chunk may straddle pages).
  const std::int64_t smallest = 16 * 513 + 16 * 2;
  EXPECT_NE(m.find("--pool-pages 2048 drops selected pages"), std::string::npos) << m;
  EXPECT_NE(m.find("the smallest pool that drops nothing is " + std::to_string(smallest)),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("--allow-drops"), std::string::npos) << m;

  // The figure is the core's: memory_budget of the micro-batch the session would build.
  o.allow_drops = true;
  const runner::SessionPlan p = runner::plan_session(o, g, 132);
  const MemoryBudget need =
      memory_budget(runner::budget_request(g, p.batches[0], p.rows_per_request, 0, 0));
  EXPECT_EQ(need.no_drop_slots, smallest);

  o.allow_drops = false;
  o.runner.pool_pages = smallest - 1;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
  o.runner.pool_pages = smallest;
  EXPECT_NO_THROW(runner::plan_session(o, g, 132));

  // One request at 128k: 513 + 2 slots; the GPU script's 256 needs --allow-drops.
  SessionOptions one = options_of({1});
  one.fill_depth = 131071;
  one.decode = 64;
  one.runner.placement = Placement::mirror;
  one.runner.pool_pages = 256;
  EXPECT_NE(refusal([&] {
              runner::plan_session(one, g, 132);
            }).find("the smallest pool that drops nothing is 515 slots"),
            std::string::npos);
  // Each micro-batch is checked with its own requests.
  o.micro_batches = 2;
  o.runner.pool_pages = 8 * 513 + 8 * 2;
  EXPECT_NO_THROW(runner::plan_session(o, g, 132));
  o.runner.pool_pages -= 1;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
}

TEST(SessionPlan, AContextBeyondTheGeometrysIsRefusedBeforeAnyPrompt) {
  const Geometry g;  // 262,144 positions, 1,048,576 with YaRN
  EXPECT_NO_THROW(runner::check_context(g, false, 0, 262144, 1));
  EXPECT_NE(refusal([&] {
              runner::check_context(g, false, 0, 262144, 2);
            }).find("beyond the geometry's largest, 262144"),
            std::string::npos);
  EXPECT_NO_THROW(runner::check_context(g, true, 1048544, 1, 32));
  EXPECT_THROW(runner::check_context(g, true, 1048544, 1, 33), ConfigError);
  // Sizes that would overflow a sum are refused, not wrapped.
  EXPECT_THROW(runner::check_context(g, true, INT64_MAX, 1, 1), ConfigError);
  EXPECT_THROW(runner::check_context(g, true, 0, INT64_MAX, 1), ConfigError);
  EXPECT_THROW(runner::check_context(g, true, 1, 1, INT32_MAX), ConfigError);
  SessionOptions o = options_of({8});
  o.fill_depth = 262144;
  EXPECT_THROW(runner::plan_session(o, g, 132), ConfigError);
  o.runner.yarn = true;
  EXPECT_NO_THROW(runner::plan_session(o, g, 132));
}

}  // namespace
}  // namespace kvtier::runner_test

namespace kvtier::runner_test {
namespace {

// --device-kv-gib: the KV tier of every micro-batch is priced before anything is allocated; a
// budget below it is refused naming the smallest that fits, which then plans.
TEST(SessionPlan, DeviceKvBudgetRefusesBelowTheNeedAndNamesIt) {
  const Geometry g;
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    SessionOptions o = options_of({4096, 3000});
    o.chunk = 1024;
    o.micro_batches = 2;
    o.runner.placement = p;
    o.runner.pool_pages = p == Placement::mirror ? 4096 : 0;
    o.allow_drops = true;
    const std::int64_t need = runner::kv_device_need(g, runner::plan_session(o, g, 132));
    ASSERT_GT(need, 0);
    // the sum of what memory_budget prices for each micro-batch's runner
    std::int64_t sum = 0;
    const runner::SessionPlan plan = runner::plan_session(o, g, 132);
    for (const MicroBatch& b : plan.batches)
      sum += memory_budget(runner::budget_request(g, b, plan.rows_per_request, 0, 0)).device_bytes;
    EXPECT_EQ(need, sum);
    o.device_kv_bytes = need;  // exactly enough
    EXPECT_NO_THROW(runner::plan_session(o, g, 132));
    o.device_kv_bytes = need - 1;
    const std::string e =
        testing::error_of<CapacityError>([&] { runner::plan_session(o, g, 132); });
    EXPECT_NE(e.find("the KV tier needs"), std::string::npos) << e;
    EXPECT_NE(e.find("over every micro-batch"), std::string::npos) << e;
    const auto at = e.find("the smallest budget that fits this run is --device-kv-gib ");
    ASSERT_NE(at, std::string::npos) << e;
    const double named = std::stod(e.substr(at + 58));
    o.device_kv_bytes = static_cast<std::int64_t>(named * 1024.0 * 1024.0 * 1024.0);
    EXPECT_GE(o.device_kv_bytes, need) << e;
    EXPECT_NO_THROW(runner::plan_session(o, g, 132)) << e;
  }
}

}  // namespace
}  // namespace kvtier::runner_test

namespace kvtier::runner_test {
namespace {

// --pool-pages max: each micro-batch's pool is the largest its share of B holds (one slot more
// would not fit), the whole run stays within B, and a B whose pool would drop selected pages is
// refused naming the B that holds the smallest pool that drops nothing.
TEST(SessionPlan, PoolPagesMaxSpendsTheBudgetOnThePool) {
  const Geometry g;
  constexpr std::int64_t kGiB = std::int64_t{1} << 30;
  for (int k : {1, 2, 3}) {
    SessionOptions o = options_of(std::vector<std::int64_t>(16, 1));
    o.fill_depth = 131071;
    o.decode = 16;
    o.micro_batches = k;
    o.runner.placement = Placement::mirror;
    o.pool_fits_budget = true;
    o.device_kv_bytes = 16 * kGiB;
    const runner::SessionPlan p = runner::plan_session(o, g, 132);
    EXPECT_LE(runner::kv_device_need(g, p), o.device_kv_bytes) << k;
    std::int64_t spent = 0;
    for (const MicroBatch& b : p.batches) {
      BudgetRequest br = runner::budget_request(g, b, p.rows_per_request, 0, 0);
      const std::int64_t share = o.device_kv_bytes / 16 * b.requests +
                                 (b.first + b.requests == 16 ? o.device_kv_bytes % 16 : 0);
      spent += share;
      EXPECT_GT(b.config.pool_pages, 0);
      EXPECT_LE(memory_budget(br).device_bytes, share) << k;
      br.pool_slots += 1;
      EXPECT_GT(memory_budget(br).device_bytes, share) << k;
      EXPECT_GE(b.config.pool_pages, memory_budget(br).no_drop_slots) << k;
    }
    EXPECT_EQ(spent, o.device_kv_bytes);
  }

  SessionOptions o = options_of(std::vector<std::int64_t>(16, 1));
  o.fill_depth = 131071;
  o.runner.placement = Placement::mirror;
  o.pool_fits_budget = true;
  EXPECT_NE(refusal([&] { runner::plan_session(o, g, 132); }).find("needs B"), std::string::npos);
  // 16 x 513 + 32 slots drop nothing; 4 GiB holds fewer.
  o.device_kv_bytes = 4 * kGiB;
  const std::string e = testing::error_of<CapacityError>([&] { runner::plan_session(o, g, 132); });
  EXPECT_NE(e.find("the smallest pool that drops nothing is 8240 slots"), std::string::npos) << e;
  const auto at = e.rfind(": --device-kv-gib ");
  ASSERT_NE(at, std::string::npos) << e;
  o.device_kv_bytes = static_cast<std::int64_t>(std::stod(e.substr(at + 18)) * double(kGiB));
  const runner::SessionPlan p = runner::plan_session(o, g, 132);
  EXPECT_GE(p.batches[0].config.pool_pages, 8240) << e;
  // With --allow-drops the small budget runs its truncated experiment.
  o.device_kv_bytes = 4 * kGiB;
  o.allow_drops = true;
  const runner::SessionPlan small = runner::plan_session(o, g, 132);
  EXPECT_GT(small.batches[0].config.pool_pages, 0);
  EXPECT_LT(small.batches[0].config.pool_pages, 8240);
}

// The host banks of every micro-batch together, against MemAvailable, before any is mapped.
TEST(SessionPlan, HostBanksBeyondTheAvailableMemoryAreRefusedSayingTheNeed) {
  const Geometry g;
  SessionOptions o = options_of(std::vector<std::int64_t>(4, 1));
  o.fill_depth = 131071;
  o.micro_batches = 2;
  o.runner.placement = Placement::host;
  const runner::SessionPlan p = runner::plan_session(o, g, 132);
  std::int64_t need = 0;
  for (const MicroBatch& b : p.batches)
    need += memory_budget(runner::budget_request(g, b, p.rows_per_request, 0, 0)).host_bytes;
  ASSERT_GT(need, 0);
  EXPECT_NO_THROW(runner::check_host_memory(g, p, need));
  EXPECT_NO_THROW(runner::check_host_memory(g, p, -1));  // not known
  const std::string e =
      testing::error_of<CapacityError>([&] { runner::check_host_memory(g, p, need - 1); });
  EXPECT_NE(e.find("the pinned host banks of every micro-batch need"), std::string::npos) << e;
  EXPECT_NE(e.find("available (MemAvailable)"), std::string::npos) << e;
}

TEST(SessionPlan, AbsurdRequestCountsAreRefused) {
  const Geometry g;
  SessionOptions o = options_of(std::vector<std::int64_t>(runner::kMaxSessionRequests + 1, 1));
  EXPECT_NE(refusal([&] { runner::plan_session(o, g, 132); }).find("at most 4096"),
            std::string::npos);
  o.prompts.pop_back();
  EXPECT_NO_THROW(runner::plan_session(o, g, 132));
  // 1,024 prompts of 1M tokens each would be 4 GiB of token ids: refused before any is built.
  EXPECT_NO_THROW(runner::check_prompt_tokens(std::vector<std::int64_t>(1024, 1 << 20)));
  EXPECT_NE(refusal([&] {
              runner::check_prompt_tokens(std::vector<std::int64_t>(1025, 1 << 20));
            }).find("more than 1073741824 prompt tokens in all (1025 requests)"),
            std::string::npos);
}

}  // namespace
}  // namespace kvtier::runner_test
