// The plan report: round 1-2-5 tick values, and a page that shows the decision (the budget
// and card lines, the recommended and within sizes ringed, the dropping sizes shaded, the
// latency section) on a hand-made plan.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/planner.hpp"
#include "sim/report_svg.hpp"

namespace kvtier::sim {
namespace {

// v is m x 10^k with m in {1, 2, 5} times an integer step count: a round value.
bool round_value(double v, double step) {
  const double k = v / step;
  return std::fabs(k - std::round(k)) < 1e-9;
}

bool one_two_five(double step) {
  const double m = step / std::pow(10.0, std::floor(std::log10(step)));
  return std::fabs(m - 1) < 1e-9 || std::fabs(m - 2) < 1e-9 || std::fabs(m - 5) < 1e-9;
}

TEST(ReportTicks, LinearTicksAreOneTwoFiveSteps) {
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
           {0, 2300}, {0, 0.37}, {15, 25}, {0, 4270.5}, {0.94, 1}, {3, 7}}) {
    const std::vector<double> t = svg::nice_ticks(lo, hi, false, 5);
    ASSERT_GE(t.size(), 2u) << lo << ".." << hi;
    const double step = t[1] - t[0];
    EXPECT_TRUE(one_two_five(step)) << step;
    for (double v : t) {
      EXPECT_TRUE(round_value(v, step)) << v;
      EXPECT_GE(v, lo - 1e-9);
      EXPECT_LE(v, hi + 1e-9);
    }
  }
}

TEST(ReportTicks, LogTicksAreTheDecadesOneTwoFive) {
  EXPECT_EQ(svg::nice_ticks(8, 150, true), (std::vector<double>{10, 20, 50, 100}));
  EXPECT_EQ(svg::nice_ticks(3000, 90000, true), (std::vector<double>{5000, 10000, 20000, 50000}));
  // Too little of a decade for three of them: linear 1-2-5 steps instead.
  EXPECT_EQ(svg::nice_ticks(15, 25, true), (std::vector<double>{15, 20, 25}));
  // Many decades: the powers of ten alone.
  EXPECT_EQ(svg::nice_ticks(1, 1e6, true).size(), 7u);
}

TEST(ReportTicks, Labels) {
  EXPECT_EQ(svg::tick_label(20000), "20,000");
  EXPECT_EQ(svg::tick_label(0.5), "0.5");
  EXPECT_EQ(svg::tick_label(50), "50");
  EXPECT_EQ(svg::tick_label(0.25, true), "25 %");
  EXPECT_EQ(svg::tick_label(svg::nice_ticks(0, 10, false).front()), "0");
}

PointSummary point(double decode, double device_gib, std::int64_t drops = 0) {
  PointSummary p;
  p.decode_tps = decode;
  p.prefill_tps = decode * 3;
  p.device_bytes = static_cast<std::int64_t>(device_gib * 1024 * 1024 * 1024);
  p.host_bytes = std::int64_t{50} << 30;
  p.drops = drops;
  p.decode_step_ms = 1000 / decode;
  p.fits_device = device_gib <= 12;
  p.layer_hit_rate = {0.9, 0.95};
  p.has_lookups = true;
  return p;
}

PlanResult hand_made_plan() {
  PlanResult r;
  r.trace = "hand-made";
  r.profile = "test";
  r.within = 0.05;
  r.chosen = 0.10;
  r.budget = device_budget(131, 12.0, "profile test");
  r.device_capacity_bytes = r.budget.card_bytes;
  r.has_device = r.has_host = true;
  r.ideal = r.device = point(2000, 16);
  r.host = point(700, 9.5);
  r.host.has_lookups = false;
  UnitSweep us;
  us.unit = ResidencyUnit::layer_page;
  us.sizes = {4000, 5000, 6000, 7000};
  us.points = {point(1000, 10, 50), point(1900, 11), point(1980, 12), point(2000, 13)};
  us.classic_lru_misses = {900, 500, 400, 400};
  us.lookups = 10000;
  r.units.push_back(us);
  RecommendInput in;
  in.budget = r.budget;
  in.ideal = &r.ideal;
  in.device = &r.device;
  in.host = &r.host;
  in.units = r.units;
  r.decision = recommend(in);
  r.recommendation = r.decision.sentence;
  r.units[0].within_slots = r.decision.mirror[0].within_slots;
  return r;
}

TEST(Report, ShowsTheDecision) {
  const PlanResult r = hand_made_plan();
  ASSERT_EQ(r.decision.chosen.slots, 6000);            // the fastest within 12 GiB
  ASSERT_EQ(r.decision.mirror[0].within_slots, 5000);  // 1,900 >= 1,980 x 0.95
  const std::string h = plan_to_html(r);
  for (const char* want :
       {"card 131.0 GiB, KV budget 12.0 GiB, 119.0 GiB left for weights and activations",
        "KV budget 12 GiB", "card 131 GiB", ">recommended<", "within 5 %: 5,000 slots",
        "sizes that drop pages", "over the KV budget", "pool slots", "id='latency'",
        "Per-request latency", "Time per output token", "Time to first token",
        "TPOT target is held against the p95", "device memory, GiB", "reasons: best_of_fitting"}) {
    EXPECT_NE(h.find(want), std::string::npos) << want;
  }
  EXPECT_NE(h.find(svg::esc(r.decision.sentence)), std::string::npos);
  for (const char* bad : {"nan", "inf'", "-0<"})
    EXPECT_EQ(h.find(bad), std::string::npos) << bad;
}

TEST(Report, NothingFitsStillRenders) {
  PlanResult r = hand_made_plan();
  r.budget = device_budget(131, 1.0, "profile test");
  RecommendInput in;
  in.budget = r.budget;
  in.ideal = &r.ideal;
  in.host = &r.host;
  in.units = r.units;
  r.decision = recommend(in);
  ASSERT_FALSE(r.decision.found);
  const std::string h = plan_to_html(r);
  EXPECT_EQ(h.find(">recommended<"), std::string::npos);
  EXPECT_NE(h.find("Nothing fits"), std::string::npos);
}

}  // namespace
}  // namespace kvtier::sim
