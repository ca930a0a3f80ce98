// The concurrency sweep: each level's trace holds that many requests in flight, throughput
// rises with concurrency on a small case, the temporaries go, and bad levels are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "model/config_error.hpp"
#include "sim/concurrency_sweep.hpp"
#include "tests/sim/sim_fixtures.hpp"

namespace kvtier::sim {
namespace {

// A small geometry the generator can use: 2 QSA layers, pages of 16, 16 blocks of top-k.
Geometry small_geometry() {
  Geometry g;
  g.total_layers = 4;
  g.qsa_layer_ids = {1, 3};
  g.hidden_size = 64;
  g.q_heads = 4;
  g.kv_heads = 2;
  g.head_dim = 16;
  g.rope_dims = 8;
  g.index_q_heads = 2;
  g.index_kv_heads = 1;
  g.index_head_dim = 16;
  g.compress_ratio = 4;
  g.select_budget = 64;
  g.page_size = 16;
  g.rope_max_positions = 4096;
  g.yarn_factor = 4;
  g.validate();
  return g;
}

traces::GenParams small_workload() {
  traces::GenParams p = traces::gen_preset("dsv4-flash");
  p.prompt_min = p.prompt_max = 256;
  p.decode_min = p.decode_max = 12;
  p.prefill_chunk = 64;
  return p;
}

TEST(ConcurrencySweep, EachLevelHoldsThatManyRequestsInFlight) {
  const Geometry g = small_geometry();
  for (std::int64_t level : {1, 3, 8}) {
    std::string path;
    {
      const LevelTrace t(g, level_workload(small_workload(), level), "level");
      path = t.path();
      EXPECT_TRUE(std::filesystem::exists(path));
      EXPECT_EQ(t.input().name, "level");  // outputs never name the temporary
      const frontend::TraceBounds st = frontend::scan_trace(t.input());
      EXPECT_EQ(st.requests, level);
      EXPECT_EQ(st.max_rows, level);  // every request in every forward: all in flight at once
      EXPECT_EQ(st.decode_tokens, level * 12);
      EXPECT_EQ(st.prefill_tokens, level * 256);
      EXPECT_EQ(st.forwards, 256 / 64 + 12);  // 4 prefill chunks, then 12 decode steps
    }
    EXPECT_FALSE(std::filesystem::exists(path)) << path;
  }
}

TEST(ConcurrencySweep, ThroughputRisesWithConcurrency) {
  ConcurrencyConfig cc;
  cc.geometry = small_geometry();
  cc.workload = small_workload();
  cc.preset = "dsv4-flash";
  cc.levels = {1, 4, 16};
  cc.plan.units = {ResidencyUnit::layer_page};
  cc.plan.points = 3;
  cc.plan.belady = false;
  cc.plan.threads = 1;
  std::vector<std::int64_t> started;
  cc.on_level_start = [&](std::size_t, std::int64_t level) { started.push_back(level); };
  const CostModel cost(testing::unit_profile());
  const ConcurrencyResult r = concurrency_sweep(cost, cc);
  EXPECT_EQ(started, cc.levels);
  ASSERT_EQ(r.levels.size(), 3u);
  for (std::size_t i = 0; i < r.levels.size(); ++i) {
    const ConcurrencyLevel& l = r.levels[i];
    EXPECT_EQ(l.concurrency, cc.levels[i]);
    EXPECT_EQ(l.plan.stats.requests, cc.levels[i]);
    // device, host, and the mirror at its within size (this small case always has one).
    ASSERT_EQ(l.points.size(), 3u);
    EXPECT_EQ(l.points[0].placement, Placement::device);
    EXPECT_EQ(l.points[1].placement, Placement::host);
    EXPECT_EQ(l.points[2].placement, Placement::mirror);
    EXPECT_EQ(l.points[2].slots, l.plan.units[0].within_slots);
    EXPECT_EQ(l.points[2].size_rule, "within 5 %");
    for (std::size_t k = 0; k < l.points.size(); ++k) {
      const LevelPoint& p = l.points[k];
      EXPECT_GT(p.point.ttft_p50_us, 0);
      EXPECT_GT(p.point.tpot_p50_us, 0);
      if (i == 0) continue;
      const LevelPoint& below = r.levels[i - 1].points[k];
      EXPECT_GT(p.point.decode_tps, below.point.decode_tps) << to_string(p.placement);
      // All admitted at once: more requests share the prefill forwards, so the first token
      // comes later.
      EXPECT_GT(p.point.ttft_p50_us, below.point.ttft_p50_us) << to_string(p.placement);
    }
  }
  // The same inputs give the same bytes.
  EXPECT_EQ(concurrency_to_json(r), concurrency_to_json(concurrency_sweep(cost, cc)));
}

// --fill-depth: each level's requests begin at the depth, the context before it never
// prefilled (decode at depth, as `kvtier run --fill-depth` runs it): the same context as a
// prompt that long, without its prefill forwards, so the first token comes sooner and the
// host's prefill buffers are not needed.
TEST(ConcurrencySweep, AtDepthTheRequestsDecodeWithoutPrefillingIt) {
  const Geometry g = small_geometry();
  traces::GenParams deep = small_workload();
  deep.fill_depth = 1024;
  deep.prompt_min = deep.prompt_max = 1;
  {
    const LevelTrace t(g, level_workload(deep, 4), "deep");
    const frontend::TraceBounds st = frontend::scan_trace(t.input());
    EXPECT_EQ(st.requests, 4);
    EXPECT_EQ(st.prefill_tokens, 4);  // the one-token prompts, nothing of the depth
    EXPECT_EQ(st.forwards, 1 + 12);
    EXPECT_EQ(st.max_context, 1024 + 1 + 12);  // the depth, the prompt, the decode steps
  }
  traces::GenParams whole = small_workload();
  whole.prompt_min = whole.prompt_max = 1025;
  ConcurrencyConfig cc;
  cc.geometry = g;
  cc.preset = "dsv4-flash";
  cc.levels = {4};
  cc.plan.units = {ResidencyUnit::layer_page};
  cc.plan.points = 3;
  cc.plan.belady = false;
  cc.plan.threads = 1;
  const CostModel cost(testing::unit_profile());
  cc.workload = deep;
  const ConcurrencyResult at_depth = concurrency_sweep(cost, cc);
  cc.workload = whole;
  const ConcurrencyResult prefilled = concurrency_sweep(cost, cc);
  const LevelPoint& host_deep = at_depth.levels[0].points[1];
  const LevelPoint& host_whole = prefilled.levels[0].points[1];
  ASSERT_EQ(host_deep.placement, Placement::host);
  EXPECT_LT(host_deep.point.ttft_p50_us, host_whole.point.ttft_p50_us);
  EXPECT_LE(host_deep.point.device_bytes, host_whole.point.device_bytes);
  EXPECT_EQ(at_depth.levels[0].plan.stats.peak_pages, prefilled.levels[0].plan.stats.peak_pages);
  const std::string js = concurrency_to_json(at_depth);
  EXPECT_NE(js.find("\"fill_depth\":1024"), std::string::npos);
}

// A level's mirror row is the plan's within size, else its chosen size, else -- a budget below
// every size close to the recommendation -- the unit's fastest that fits (the decision's
// alternative), and only when none fits the largest swept, said in the size rule.
TEST(ConcurrencySweep, AMirrorRowShowsWhatTheBudgetAllows) {
  PlanResult plan;
  UnitSweep us;
  us.unit = ResidencyUnit::layer_page;
  us.sizes = {2000, 9934, 16392};
  us.points.resize(3);
  for (std::size_t i = 0; i < 3; ++i)
    us.points[i].decode_tps = 100.0 * static_cast<double>(i + 1);
  plan.units.push_back(us);
  const auto mirror_row = [](const PlanResult& p) {
    for (const LevelPoint& lp : level_points(p))
      if (lp.placement == Placement::mirror) return lp;
    ADD_FAILURE() << "no mirror row";
    return LevelPoint{};
  };
  LevelPoint row = mirror_row(plan);
  EXPECT_EQ(row.slots, 16392);
  EXPECT_EQ(row.size_rule, "largest swept (none fits)");
  ConfigFigures fits;
  fits.placement = Placement::mirror;
  fits.unit = ResidencyUnit::layer_page;
  fits.slots = 9934;
  ConfigFigures host;
  host.placement = Placement::host;
  plan.decision.alternatives = {host, fits};
  row = mirror_row(plan);
  EXPECT_EQ(row.slots, 9934);
  EXPECT_EQ(row.size_rule, "fastest that fits (none within 10 %)");
  EXPECT_DOUBLE_EQ(row.point.decode_tps, 200.0);  // the point of that size
  plan.units[0].chosen_slots = 2000;
  EXPECT_EQ(mirror_row(plan).slots, 2000);
  EXPECT_EQ(mirror_row(plan).size_rule, "within 10 %");
  plan.units[0].within_slots = 16392;
  EXPECT_EQ(mirror_row(plan).size_rule, "within 5 %");
  // another unit's alternative is not this unit's
  plan.units[0].within_slots = plan.units[0].chosen_slots = 0;
  plan.decision.alternatives[1].unit = ResidencyUnit::all_layers_page;
  EXPECT_EQ(mirror_row(plan).size_rule, "largest swept (none fits)");
}

TEST(ConcurrencySweep, BadLevelsAreRefused) {
  const Geometry g = small_geometry();
  const traces::GenParams w = small_workload();
  auto refused = [&](std::vector<std::int64_t> levels, const std::string& says,
                     const traces::GenParams& workload) {
    try {
      check_levels(levels, g, workload);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--concurrency"), std::string::npos) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
    }
  };
  refused({}, "at least one level", w);
  refused({0}, "got 0", w);
  refused({-3}, "got -3", w);
  refused({1, 8, 1}, "level 1 is given twice", w);
  refused({1000000000}, "got 1000000000", w);
  refused({kMaxConcurrency + 1}, "1.." + std::to_string(kMaxConcurrency), w);
  EXPECT_NO_THROW(check_levels({1, kMaxConcurrency}, g, w));
  // A level whose generator state passes 1 GiB: 1024 requests of 1M tokens.
  traces::GenParams huge = w;
  huge.prompt_min = huge.prompt_max = 1 << 20;
  refused({1024}, "at most 1 GiB", huge);
}

}  // namespace
}  // namespace kvtier::sim
