// Issue 16, item 8: the classic-LRU curve (one-pass MRC) and the Belady bound stand beside the
// plan's decisions and never make them. The plan's cliff, thresholds and recommendation are
// recomputed (decide) after both are perturbed, and must not move; a change to the simulated
// points themselves must move them (so decide is not a no-op).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/planner.hpp"
#include "sim/profiles.hpp"
#include "traces/trace_io.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {
namespace {

struct Decisions {
  std::vector<std::int64_t> cliff, within, chosen;
  std::string recommendation;
  bool operator==(const Decisions&) const = default;
};

Decisions decisions_of(const PlanResult& r) {
  Decisions d;
  for (const UnitSweep& us : r.units) {
    d.cliff.push_back(us.cliff_slots);
    d.within.push_back(us.within_slots);
    d.chosen.push_back(us.chosen_slots);
  }
  d.recommendation = r.recommendation;
  return d;
}

void forget_decisions(PlanResult& r) {
  for (UnitSweep& us : r.units)
    us.cliff_slots = us.within_slots = us.chosen_slots = 0;
  r.recommendation.clear();
}

// One config for every plan and decide of this file (built once: GCC 12 at -O3 warns,
// wrongly, of an uninitialised read when PlanConfig's defaults are built at each call).
const PlanConfig& config() {
  static const PlanConfig cfg = [] {
    PlanConfig c;
    c.points = 6;
    c.threads = 2;
    return c;
  }();
  return cfg;
}

// The plan of the small bundled sample on the H200, and on a card whose memory the device
// placement outgrows (the recommendation then takes the mirror's or host's branch).
std::vector<PlanResult> plans() {
  const traces::TraceInput input =
      traces::file_trace(traces::samples_dir() + "/prefill-shared-prefix.ktr");
  HardwareProfile small = load_profile("h200-pcie5");
  small.device_memory_gib = 0.05;
  return {plan(input, CostModel(load_profile("h200-pcie5")), config()),
          plan(input, CostModel(small), config())};
}

TEST(PlanDecisions, PerturbingTheClassicLruCurveAndBeladyChangesNoDecision) {
  for (const PlanResult& r : plans()) {
    SCOPED_TRACE(r.recommendation);
    ASSERT_FALSE(r.units.empty());
    ASSERT_FALSE(r.recommendation.empty());
    const Decisions want = decisions_of(r);
    // Zero, reversed, inflated: curves that would each suggest another size if they were read.
    for (int how = 0; how < 3; ++how) {
      PlanResult q = r;
      for (UnitSweep& us : q.units) {
        for (auto* v : {&us.classic_lru_misses, &us.belady_misses}) {
          if (how == 0) std::fill(v->begin(), v->end(), 0);
          if (how == 1) std::reverse(v->begin(), v->end());
          if (how == 2) {
            for (std::int64_t& m : *v)
              m = m * 1000 + 7;
          }
        }
      }
      forget_decisions(q);
      decide(q, config());
      EXPECT_EQ(decisions_of(q), want) << "perturbation " << how;
    }
  }
}

TEST(PlanDecisions, TheSimulatedPointsDoDecide) {
  PlanResult r = plans().front();
  UnitSweep& us = r.units.front();
  ASSERT_NE(us.within_slots, 0);
  const auto at = std::find(us.sizes.begin(), us.sizes.end(), us.within_slots) - us.sizes.begin();
  // The qualifying size now drops pages: it can no longer qualify.
  us.points[static_cast<std::size_t>(at)].drops = 1;
  const std::int64_t before = us.within_slots;
  forget_decisions(r);
  decide(r, config());
  EXPECT_NE(r.units.front().within_slots, before);
}

}  // namespace
}  // namespace kvtier::sim
