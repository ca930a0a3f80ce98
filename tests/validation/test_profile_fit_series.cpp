// fit_profile, series by series: a host store without a knee, the one-CTA top-k's terms, and
// the retired step-beside series and terms.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/attend_grid.hpp"
#include "model/calibration_terms.hpp"
#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#include "sim/profiles.hpp"
#include "tests/validation/synthetic_points.hpp"
#include "validation/fit/profile_fit.hpp"

namespace kvtier::fit {
namespace {

using fixtures::kSeed;
using fixtures::pieces;
using fixtures::synthetic;
using fixtures::Truth;

// The host bank's store with too few sizes for two pieces (3 distinct, 4 needed): priced as
// the line from 0 bytes, and the report says so.
TEST(ProfileFit, AHostStoreWithoutAKneePricesTheLine) {
  PointsFile p{"c", "d", "2026-12-02", "cmd", {}};
  PointSeries sh{"store_host", {{"bytes"}, {}, {}}};
  for (double x : {2048.0, 524288.0, 8388608.0}) {
    sh.samples.x.push_back({x});
    sh.samples.y.push_back(2.0 + x / 50000);
  }
  p.series.push_back(sh);
  const ProfileFit f = fit_profile(p, sim::load_profile("h200-pcie5"));
  EXPECT_NEAR(f.profile.store_host_us, 2.0, 1e-6);
  EXPECT_EQ(f.profile.store_host_knee_bytes, 0.0);
  EXPECT_EQ(f.profile.store_host_ns_per_kib, 0.0);
  EXPECT_NEAR(f.profile.zero_copy_write_gbps, 50.0, 1e-6);
  ASSERT_FALSE(f.report.series[0].notes.empty());
  EXPECT_NE(f.report.series[0].notes[0].find("no knee"), std::string::npos);
}

// The one-CTA-per-row top-k, as the calibration sweeps it: decode batches (64 - 128 rows) and
// prefill chunks (256 - 2,048 rows of one request) over their contexts. Each row's CTA costs
// besides its blocks, which row blocks alone cannot tell apart (2,048 rows of 16k see fewer
// blocks than 512 of 128k).
TEST(ProfileFit, TheOneCtaTopkPaysPerRowAndPerRowBlock) {
  PointsFile p{"c", "d", "2026-12-03", "cmd", {}};
  PointSeries s{"topk_one_cta", {{"row_blocks", "rows"}, {}, {}}};
  for (double rows : {64.0, 128.0, 256.0, 512.0, 2048.0}) {
    for (double ctx : {16384.0, 32768.0, 131072.0}) {
      const double rb = rows * ctx / 4;
      s.samples.x.push_back({rb, rows});
      s.samples.y.push_back(8.0 + rb * 0.0055e-3 + rows * 0.07);
    }
  }
  p.series.push_back(s);
  const HardwareProfile f = fit_profile(p, sim::load_profile("h200-pcie5")).profile;
  EXPECT_NEAR(f.topk_one_cta_fixed_us, 8.0, 1e-6);
  EXPECT_NEAR(f.topk_one_cta_ns_per_row_block, 0.0055, 1e-9);
  EXPECT_NEAR(f.topk_one_cta_ns_per_row, 70.0, 1e-6);
  EXPECT_EQ(CostModel(f).topk_ns(2048 * 4096, TopkPath::one_cta, 2048), 8'000 + 46'137 + 143'360);
}

// Points files of 2026-12-03 and before time the step beside without its rows and pages
// (ensure_beside): that series is read and fitted for the report but prices nothing, and the
// step beside keeps the base profile's values and sources.
TEST(ProfileFit, TheRetiredBesideSeriesPricesNothing) {
  PointsFile p = synthetic(Truth{}, 0.0);
  std::erase_if(p.series, [](const PointSeries& s) { return s.term.starts_with("step_beside"); });
  PointSeries old{"ensure_beside", {{"lookups", "slots", "misses"}, {}, {}}};
  for (double lookups : {514.0, 4112.0})
    for (double slots : {8192.0, 32768.0})
      for (double misses : {0.0, 16.0}) {
        old.samples.x.push_back({lookups, slots, misses});
        old.samples.y.push_back(10 + lookups * 0.002 + (misses > 0 ? slots * 0.001 : 0));
      }
  p.series.push_back(old);
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const ProfileFit f = fit_profile(p, base);
  for (const char* field :
       {"step_beside_fixed_us", "step_beside_us_per_row_doubling", "step_beside_ns_per_page",
        "step_beside_wide_ns_per_row", "step_beside_copy_gbps"}) {
    EXPECT_EQ(f.profile.param(field), base.param(field)) << field;
    EXPECT_EQ(f.profile.source(field), base.source(field)) << field;
  }
  for (const char* term : {"step_beside", "step_beside_wide", "step_beside_copy"})
    EXPECT_NE(std::find(f.report.kept.begin(), f.report.kept.end(), term), f.report.kept.end())
        << term;
  const auto s = std::find_if(f.report.series.begin(), f.report.series.end(),
                              [](const SeriesFit& x) { return x.term == "ensure_beside"; });
  ASSERT_NE(s, f.report.series.end());
  EXPECT_TRUE(s->fields.empty());
  ASSERT_EQ(s->unpriced.size(), 1u);
  EXPECT_NE(s->unpriced[0].note.find("retired"), std::string::npos);
  // The full-grid step's own fit moves on without it.
  EXPECT_NE(f.profile.source("ensure_fixed_us").find("fitted"), std::string::npos);
}

// A profile written before the step beside took its rows and pages names a retired parameter:
// refused with what replaced it, not as an unknown one.
TEST(ProfileFit, AProfileWithTheRetiredBesideTermsIsRefusedWithTheReason) {
  std::string text = hardware_profile_to_json(sim::load_profile("h200-pcie5"));
  const std::string key = "\"step_beside_fixed_us\"";
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, key.size(), "\"ensure_beside_fixed_us\"");
  try {
    (void)hardware_profile_from_json(text);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ensure_beside_fixed_us: retired parameter"), std::string::npos) << what;
    EXPECT_NE(what.find("step_beside_"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace kvtier::fit
