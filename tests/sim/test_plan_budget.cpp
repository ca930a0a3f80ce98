// plan() end to end on small generated traces under a device budget B: the ideal is always
// simulated, configurations over B are marked and never recommended, and when nothing fits
// the smallest B named is one that fits. simulate() refuses a configuration over B.
#include <gtest/gtest.h>

#include <string>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "sim/planner.hpp"
#include "tests/error_of.hpp"
#include "tests/sim/sim_fixtures.hpp"

namespace kvtier::sim {
namespace {

struct Small {
  Geometry g = testing::tiny_geometry();
  traces::TraceInput trace = testing::random_trace(20261201, g, 60, 3);
  CostModel cost{testing::unit_profile()};
  PlanConfig cfg;
  Small() {
    cfg.points = 4;
    cfg.threads = 2;
    cfg.belady = false;
  }
  PlanResult run() const { return plan(trace, cost, cfg); }
};

TEST(PlanBudget, TheIdealIsSimulatedEvenWhenDeviceIsNotAskedFor) {
  Small s;
  s.cfg.placements = {Placement::mirror, Placement::host};
  const PlanResult r = s.run();
  EXPECT_FALSE(r.has_device);
  EXPECT_GT(r.ideal.device_bytes, 0);
  EXPECT_GT(r.ideal.decode_tps, 0);
  ASSERT_TRUE(r.decision.found);
  for (const ConfigFigures& c : r.decision.ranked)
    EXPECT_NE(c.placement, Placement::device);
  EXPECT_EQ(r.recommendation, r.decision.sentence);
}

TEST(PlanBudget, DeviceFitsTheDefaultBudgetAndIsRecommended) {
  Small s;
  const PlanResult r = s.run();
  EXPECT_TRUE(r.budget.kv_is_card);
  EXPECT_EQ(r.budget.kv_bytes, r.device_capacity_bytes);
  ASSERT_TRUE(r.decision.found);
  EXPECT_TRUE(r.decision.ideal_fits);
  // The chosen one is the best of those ranked, and every one ranked fits and drops nothing.
  for (const ConfigFigures& c : r.decision.ranked) {
    EXPECT_LE(c.decode_tps, r.decision.chosen.decode_tps);
    EXPECT_LE(c.device_bytes, r.budget.kv_bytes);
    EXPECT_EQ(c.drops, 0);
  }
  EXPECT_GT(r.ideal.decode_step_ms, 0);
}

TEST(PlanBudget, ABudgetBelowTheDevicePlacementExcludesIt) {
  Small s;
  const std::int64_t device_bytes = s.run().ideal.device_bytes;
  s.cfg.device_kv_bytes = device_bytes - 1;
  const PlanResult r = s.run();
  EXPECT_FALSE(r.budget.kv_is_card);
  EXPECT_FALSE(r.ideal.fits_device);
  EXPECT_FALSE(r.device.fits_device);
  ASSERT_TRUE(r.decision.found) << r.recommendation;
  EXPECT_NE(r.decision.chosen.placement, Placement::device);
  EXPECT_LE(r.decision.chosen.device_bytes, s.cfg.device_kv_bytes);
  EXPECT_FALSE(r.decision.ideal_fits);
  EXPECT_NE(r.recommendation.find("device needs"), std::string::npos) << r.recommendation;
  EXPECT_NE(r.recommendation.find("of the ideal"), std::string::npos) << r.recommendation;
  for (const UnitSweep& us : r.units)
    for (std::size_t i = 0; i < us.sizes.size(); ++i)
      EXPECT_EQ(us.points[i].fits_device, us.points[i].device_bytes <= s.cfg.device_kv_bytes);
}

TEST(PlanBudget, NothingFitsNamesABudgetThatFits) {
  Small s;
  s.cfg.device_kv_bytes = 1;
  const PlanResult r = s.run();
  ASSERT_FALSE(r.decision.found);
  const std::int64_t smallest = r.decision.smallest_budget_bytes;
  ASSERT_GT(smallest, 0) << r.recommendation;
  EXPECT_NE(r.recommendation.find("--device-kv-gib"), std::string::npos) << r.recommendation;
  s.cfg.device_kv_bytes = smallest;
  const PlanResult again = s.run();
  ASSERT_TRUE(again.decision.found) << again.recommendation;
  EXPECT_EQ(again.decision.chosen.device_bytes, smallest);
}

TEST(PlanBudget, BadBudgetAndTargetAreClearErrors) {
  Small s;
  s.cfg.device_kv_bytes = gib_to_bytes(s.cost.profile().device_memory_gib) + 1;
  EXPECT_NE(testing::error_of<ConfigError>([&] { s.run(); }).find("at most the card's"),
            std::string::npos);
  s.cfg.device_kv_bytes = 0;
  s.cfg.objective = {Objective::tpot, 0};
  EXPECT_NE(testing::error_of<ConfigError>([&] { s.run(); }).find("--tpot-ms"), std::string::npos);
}

TEST(PlanBudget, SimulateRefusesAConfigurationOverTheBudgetSayingTheSmallest) {
  Small s;
  const frontend::TraceBounds st = frontend::scan_trace(s.trace);
  SimConfig c;
  c.placement = Placement::device;
  const std::int64_t need = simulate(s.trace, st, s.cost, c).device_bytes;
  c.device_kv_bytes = need - 1;
  const std::string m = testing::error_of<CapacityError>([&] { simulate(s.trace, st, s.cost, c); });
  EXPECT_NE(m.find("the smallest device budget that fits it is"), std::string::npos) << m;
  c.device_kv_bytes = need;
  EXPECT_NO_THROW(simulate(s.trace, st, s.cost, c));
}

TEST(DeviceBudget, DefaultIsTheCardAndBadValuesNameTheCard) {
  const DeviceBudget d = device_budget(141, std::nullopt, "profile x");
  EXPECT_TRUE(d.kv_is_card);
  EXPECT_EQ(d.kv_bytes, gib_to_bytes(141));
  EXPECT_EQ(d.left_bytes(), 0);
  const DeviceBudget b = device_budget(141, 24.0, "profile x");
  EXPECT_EQ(b.left_bytes(), gib_to_bytes(117));
  EXPECT_EQ(describe(b),
            "card 141.0 GiB, KV budget 24.0 GiB, 117.0 GiB left for weights and activations");
  for (double bad : {0.0, -1.0, 142.0, std::nan(""), 1e300}) {
    const std::string m =
        testing::error_of<ConfigError>([&] { device_budget(141, bad, "profile x"); });
    EXPECT_NE(m.find("--device-kv-gib"), std::string::npos) << m;
    EXPECT_NE(m.find("the card's 141 GiB (profile x)"), std::string::npos) << m;
  }
  // No card known: any finite budget up to kMaxDeviceGiB.
  EXPECT_EQ(device_budget(0, 24.0, "").kv_bytes, gib_to_bytes(24));
  EXPECT_THROW(device_budget(0, 1e300, ""), ConfigError);
}

}  // namespace
}  // namespace kvtier::sim
