// The planner's decision (sim/recommend.hpp) on hand-made summaries: every branch -- device
// fits, only mirror fits, only host fits, nothing fits (device budget, host RAM, every pool
// dropping), a TPOT target met and unmet, the prefill objective -- and the within size's
// reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/planner.hpp"
#include "sim/recommend.hpp"

namespace kvtier::sim {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

PointSummary point(double decode, double prefill, double device_gib, double host_gib = 0,
                   std::int64_t drops = 0, double step_ms = 0) {
  PointSummary p;
  p.decode_tps = decode;
  p.prefill_tps = prefill;
  p.device_bytes = static_cast<std::int64_t>(device_gib * static_cast<double>(kGiB));
  p.host_bytes = static_cast<std::int64_t>(host_gib * static_cast<double>(kGiB));
  p.drops = drops;
  p.decode_step_ms = step_ms;
  return p;
}

bool has_reason(const Recommendation& r, const std::string& code) {
  return std::find(r.reasons.begin(), r.reasons.end(), code) != r.reasons.end();
}

bool says(const Recommendation& r, const std::string& text) {
  return r.sentence.find(text) != std::string::npos;
}

// A trace's figures: device (the ideal) 100 tokens/s in 8 GiB; host 40 in 1 GiB + a 50 GiB
// bank; a mirror layer unit whose smallest pool drops pages, then 95 and 97 tokens/s in 6 and
// 7 GiB. Decode steps (TPOT) 20, 60, 30, 28 and 25 ms.
struct Fixture {
  PointSummary device = point(100, 500, 8, 0, 0, 20);
  PointSummary host = point(40, 600, 1, 50, 0, 60);
  std::vector<UnitSweep> units;
  RecommendInput in;

  Fixture() {
    UnitSweep us;
    us.unit = ResidencyUnit::layer_page;
    us.sizes = {1000, 2000, 3000};
    us.points = {point(90, 400, 5, 50, 3, 30), point(95, 400, 6, 50, 0, 28),
                 point(97, 400, 7, 50, 0, 25)};
    units.push_back(us);
    in.ideal = &device;
    in.device = &device;
    in.host = &host;
    in.units = units;
    budget(141);
  }
  void budget(double gib) { in.budget = device_budget(141, gib, "test card"); }
};

TEST(Recommend, DeviceFitsAndIsTheIdeal) {
  Fixture f;
  f.budget(10);
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.placement, Placement::device);
  EXPECT_DOUBLE_EQ(r.figure, 100);
  EXPECT_DOUBLE_EQ(r.vs_ideal, 1);
  EXPECT_TRUE(r.ideal_fits);
  // Ranked: every configuration that fits and drops nothing (not the pool that drops).
  ASSERT_EQ(r.ranked.size(), 4u);
  EXPECT_EQ(r.ranked[1].slots, 3000);
  EXPECT_EQ(r.ranked[2].slots, 2000);
  EXPECT_EQ(r.ranked[3].placement, Placement::host);
  // Alternatives: one of each kind; the runner-up is the best mirror.
  ASSERT_EQ(r.alternatives.size(), 3u);
  EXPECT_EQ(r.alternatives[1].slots, 3000);
  EXPECT_NEAR(r.runner_up_ratio, 100.0 / 97, 1e-12);
  // Within 5 % of the recommendation (100): 95 at 2,000 slots qualifies, the dropping 1,000 not.
  ASSERT_EQ(r.mirror.size(), 1u);
  EXPECT_EQ(r.mirror[0].within_slots, 2000);
  EXPECT_EQ(r.mirror[0].chosen_slots, 2000);
  EXPECT_DOUBLE_EQ(r.within_reference, 100);
  EXPECT_TRUE(has_reason(r, "best_of_fitting"));
  EXPECT_TRUE(has_reason(r, "ideal_fits"));
  EXPECT_TRUE(says(r, "device: 100 decode tokens/s")) << r.sentence;
  EXPECT_TRUE(
      says(r, "Runner-up: mirror, layer unit, 3,000 slots, 97.0 decode tokens/s (3 % slower)"))
      << r.sentence;
  EXPECT_TRUE(says(r, "layer unit, 2,000 slots (6.0 GiB)")) << r.sentence;
}

TEST(Recommend, OnlyMirrorFits) {
  Fixture f;
  f.host = point(40, 600, 7, 50, 0, 60);  // a host placement with a wide staging window
  f.budget(6.5);
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.placement, Placement::mirror);
  EXPECT_EQ(r.chosen.slots, 2000);
  EXPECT_EQ(r.ranked.size(), 1u);
  EXPECT_FALSE(r.ideal_fits);
  EXPECT_NEAR(r.vs_ideal, 0.95, 1e-12);
  EXPECT_TRUE(has_reason(r, "only_fitting"));
  EXPECT_TRUE(has_reason(r, "device_over_budget"));
  EXPECT_TRUE(has_reason(r, "host_over_budget"));
  EXPECT_TRUE(has_reason(r, "ideal_over_budget"));
  EXPECT_TRUE(says(r, "95 % of the ideal")) << r.sentence;
  EXPECT_TRUE(says(r, "device needs 8.0 GiB of device memory")) << r.sentence;
  EXPECT_TRUE(says(r, "No smaller pool swept comes within 5 %")) << r.sentence;
}

TEST(Recommend, MirrorBeatsHostAndTheWithinSizeIsMeasuredAgainstIt) {
  Fixture f;
  f.budget(7.5);
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.slots, 3000);
  ASSERT_GE(r.alternatives.size(), 2u);
  EXPECT_EQ(r.alternatives[1].placement, Placement::host);
  EXPECT_NEAR(r.runner_up_ratio, 97.0 / 40, 1e-12);
  EXPECT_TRUE(says(r, "Runner-up: host (in place), 40.0 decode tokens/s (2.4")) << r.sentence;
  // 95 >= 97 x 0.95: the smaller pool is within 5 % of the recommendation.
  EXPECT_EQ(r.mirror[0].within_slots, 2000);
  EXPECT_DOUBLE_EQ(r.within_reference, 97);
}

TEST(Recommend, OnlyHostFits) {
  Fixture f;
  f.budget(2);
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.placement, Placement::host);
  EXPECT_TRUE(has_reason(r, "only_fitting"));
  EXPECT_TRUE(has_reason(r, "mirror_over_budget"));
  EXPECT_TRUE(says(r, "the smallest pool that drops nothing needs 6.0 GiB")) << r.sentence;
  EXPECT_TRUE(says(r, "40 % of the ideal")) << r.sentence;
  EXPECT_EQ(r.mirror[0].within_slots, 0);
}

TEST(Recommend, NothingFitsSaysTheSmallestBudget) {
  Fixture f;
  f.budget(0.5);
  const Recommendation r = recommend(f.in);
  EXPECT_FALSE(r.found);
  EXPECT_TRUE(r.ranked.empty());
  EXPECT_TRUE(has_reason(r, "nothing_fits"));
  EXPECT_EQ(r.smallest_budget_bytes, kGiB);
  EXPECT_EQ(r.cheapest.placement, Placement::host);
  EXPECT_TRUE(says(r, "--device-kv-gib 1.00 or more")) << r.sentence;
  EXPECT_TRUE(says(r, "50.0 GiB of host RAM")) << r.sentence;
  EXPECT_TRUE(says(r, "the ideal, device, needs 8.0 GiB")) << r.sentence;
}

TEST(Recommend, NothingFitsTheHostRam) {
  Fixture f;
  f.budget(7.5);
  f.in.host_capacity_bytes = 32 * kGiB;  // every bank needs 50 GiB
  f.in.device = nullptr;                 // device not asked for: the ideal only
  const Recommendation r = recommend(f.in);
  EXPECT_FALSE(r.found);
  EXPECT_TRUE(has_reason(r, "host_ram_short"));
  EXPECT_EQ(r.host_ram_needed_bytes, 50 * kGiB);
  EXPECT_EQ(r.smallest_budget_bytes, 0);  // nothing asked for fits the host RAM at any budget
  EXPECT_TRUE(says(r, "host (in place) needs 50.0 GiB of host RAM, the host has 32.0 GiB"))
      << r.sentence;
}

TEST(Recommend, EveryPoolDropping) {
  Fixture f;
  f.in.device = nullptr;
  f.in.host = nullptr;
  for (PointSummary& p : f.units[0].points)
    p.drops = 1;
  const Recommendation r = recommend(f.in);
  EXPECT_FALSE(r.found);
  EXPECT_TRUE(has_reason(r, "all_drop"));
  EXPECT_TRUE(says(r, "every configuration swept drops selected pages")) << r.sentence;
}

TEST(Recommend, TpotTargetMet) {
  Fixture f;
  f.budget(7.5);
  f.in.objective = {Objective::tpot, 28.5};
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_TRUE(r.meets_target);
  EXPECT_EQ(r.chosen.slots, 3000);  // 25 ms; 2,000 slots (28 ms) meets it too, but decodes slower
  EXPECT_EQ(r.ranked.size(), 3u);
  EXPECT_EQ(r.ranked.back().placement, Placement::host);  // 60 ms: ranked after those that meet
  EXPECT_TRUE(has_reason(r, "tpot_met"));
  EXPECT_TRUE(says(r, "meet the TPOT target of 28.5 ms")) << r.sentence;
  EXPECT_DOUBLE_EQ(tpot_ms(f.units[0].points[2]), 25);
}

TEST(Recommend, TpotTargetUnmet) {
  Fixture f;
  f.budget(7.5);
  f.in.objective = {Objective::tpot, 10};
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_FALSE(r.meets_target);
  EXPECT_EQ(r.chosen.slots, 3000);  // the quickest step that fits
  EXPECT_TRUE(has_reason(r, "tpot_unmet"));
  EXPECT_EQ(r.mirror[0].within_slots, 0);  // nothing meets the target
  EXPECT_TRUE(says(r,
                   "No configuration that fits and drops nothing meets the TPOT target of "
                   "10.0 ms; the quickest is mirror"))
      << r.sentence;
}

TEST(Recommend, PrefillObjective) {
  Fixture f;
  f.in.objective = {Objective::prefill, 0};
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.placement, Placement::host);  // 600 prefill tokens/s against 500
  EXPECT_DOUBLE_EQ(r.figure, 600);
  EXPECT_NEAR(r.vs_ideal, 600.0 / 500, 1e-12);
  EXPECT_TRUE(says(r, "host (in place): 600 prefill tokens/s")) << r.sentence;
}

TEST(Recommend, EqualFiguresGoToTheLeastDeviceMemory) {
  Fixture f;
  f.units[0].points[1].decode_tps = 97;  // 2,000 slots as fast as 3,000
  f.device.decode_tps = 97;
  const Recommendation r = recommend(f.in);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.chosen.slots, 2000);
  EXPECT_EQ(r.ranked[1].slots, 3000);
  EXPECT_EQ(r.ranked[2].placement, Placement::device);
  const Recommendation again = recommend(f.in);
  EXPECT_EQ(again.sentence, r.sentence);
}

TEST(Recommend, JsonCarriesTheDecision) {
  Fixture f;
  f.budget(2);
  const boost::json::object o = to_json(recommend(f.in));
  EXPECT_EQ(o.at("objective").as_string(), "decode");
  EXPECT_TRUE(o.at("found").as_bool());
  EXPECT_EQ(o.at("chosen").as_object().at("placement").as_string(), "host");
  EXPECT_TRUE(o.at("runner_up").is_null());
  EXPECT_FALSE(o.at("ideal_fits").as_bool());
  EXPECT_EQ(o.at("within_reference").as_string(), "recommended");
  EXPECT_FALSE(o.at("reasons").as_array().empty());
  EXPECT_FALSE(o.at("sentence").as_string().empty());
}

}  // namespace
}  // namespace kvtier::sim
