// The planner's Belady log is held only when it fits its cap (issue 16: a 32-request trace
// filled 1 GB with a log it then dropped): kept in the curve's pass when the pre-pass bounds
// it within the cap, made by a second pass when only the count fits, skipped (and said so)
// when the count does not; the bounds are the same whichever way the log was made.
#include <gtest/gtest.h>

#include "sim/mrc.hpp"
#include "sim/planner.hpp"
#include "sim/profiles.hpp"
#include "traces/trace_io.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {
namespace {

PlanResult plan_with_cap(const traces::TraceInput& input, std::int64_t cap) {
  PlanConfig cfg;
  cfg.placements = {Placement::mirror};
  cfg.units = {ResidencyUnit::layer_page};
  cfg.points = 3;
  cfg.threads = 2;
  cfg.belady_max_entries = cap;
  return plan(input, CostModel(load_profile("h200-pcie5")), cfg);
}

TEST(PlanBeladyLog, KeptSecondPassOrSkippedByItsSize) {
  const traces::TraceInput input =
      traces::file_trace(traces::samples_dir() + "/prefill-shared-prefix.ktr");
  const frontend::TraceBounds st = frontend::scan_trace(input);
  const MrcResult m = miss_ratio_curve(input, st, ResidencyUnit::layer_page, true);
  const std::int64_t entries = m.log.entries();
  EXPECT_EQ(m.log_entries, entries);
  EXPECT_EQ(miss_ratio_curve(input, st, ResidencyUnit::layer_page, false).log_entries, entries);
  const std::int64_t bound = query_log_bound(st, input.header.geometry, ResidencyUnit::layer_page);
  ASSERT_LT(entries, bound);

  const PlanResult kept = plan_with_cap(input, bound);           // the pre-pass bound fits
  const PlanResult second = plan_with_cap(input, entries);       // only the count fits
  const PlanResult skipped = plan_with_cap(input, entries - 1);  // neither
  ASSERT_EQ(kept.units.size(), 1u);
  EXPECT_EQ(kept.units[0].belady_note, "");
  EXPECT_FALSE(kept.units[0].belady_misses.empty());
  EXPECT_EQ(second.units[0].belady_note, "");
  EXPECT_EQ(second.units[0].belady_misses, kept.units[0].belady_misses);
  EXPECT_TRUE(skipped.units[0].belady_misses.empty());
  EXPECT_EQ(skipped.units[0].belady_note,
            "skipped: the trace's query log is over " + std::to_string(entries - 1) + " entries");
  // The rest of the plan does not depend on the log.
  EXPECT_EQ(skipped.units[0].classic_lru_misses, kept.units[0].classic_lru_misses);
  EXPECT_EQ(skipped.units[0].points.back().misses, kept.units[0].points.back().misses);
}

}  // namespace
}  // namespace kvtier::sim
