// fit_profile: points made from a known profile through the cost model's own formulas come
// back as that profile's values, each with a source that says how it was fitted; terms without
// a series keep the base value and source.
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

TEST(ProfileFit, RecoversTheCardFromExactPoints) {
  const Truth t;
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const ProfileFit f = fit_profile(synthetic(t, 0.0), base);
  const HardwareProfile& p = f.profile;
  EXPECT_NEAR(p.pcie_h2d_gbps, t.h2d_gbps, 1e-6);
  EXPECT_NEAR(p.pcie_latency_us, t.latency_us, 1e-9);
  EXPECT_NEAR(p.zero_copy_read_gbps, t.zc_read_gbps, 1e-6);
  // The attend's effective rate, not the gather's ceiling, prices the attend's bytes.
  EXPECT_NEAR(p.hbm_gbps, t.attend_gbps, 1e-6);
  EXPECT_NEAR(p.attention_fixed_us, t.attend_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_ns_per_cta, t.attend_per_cta_ns, 1e-6);
  // the span's slope (its intercept, the fixed part and CTAs, is the attention series')
  EXPECT_NEAR(p.attention_ns_per_cta_token, t.span_per_token_ns, 1e-6);
  EXPECT_NEAR(p.attention_waves_fixed_us, t.waves_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_waves_ns_per_cta, t.waves_per_cta_ns, 1e-6);
  EXPECT_NEAR(p.attention_waves_gbps, t.waves_gbps, 1e-6 * t.waves_gbps);
  EXPECT_NEAR(p.attention_fp8_fixed_us, t.fp8_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_fp8_gbps, t.fp8_gbps, 1e-6);
  EXPECT_NEAR(p.attention_fp8_ns_per_row, t.fp8_per_row_ns, 1e-6);
  EXPECT_NEAR(p.attention_fp8_host_fixed_us, t.fp8_host_fixed_us, 1e-6);
  EXPECT_NEAR(p.attention_fp8_host_gbps, t.fp8_host_gbps, 1e-6);
  EXPECT_NEAR(p.attention_fp8_host_ns_per_row, t.fp8_host_per_row_ns, 1e-6);
  EXPECT_EQ(p.attention_fp8_knee_bytes, t.fp8_knee);
  EXPECT_NEAR(p.attention_fp8_ns_per_kib, t.fp8_ns_per_kib, 1e-6);
  EXPECT_EQ(p.attention_fp8_host_knee_bytes, t.fp8_host_knee);
  EXPECT_NEAR(p.attention_fp8_host_ns_per_kib, t.fp8_host_ns_per_kib, 1e-6);
  // The store into the pool and into the host bank: two pieces each.
  EXPECT_NEAR(p.store_fixed_us, t.store_fixed_us, 1e-6);
  EXPECT_NEAR(p.store_hbm_gbps, t.store_hbm_gbps, 1e-6);
  EXPECT_EQ(p.store_knee_bytes, t.store_knee);
  EXPECT_NEAR(p.store_ns_per_kib, t.store_ns_per_kib, 1e-6);
  EXPECT_NEAR(p.store_host_us, t.host_us, 1e-6);
  EXPECT_EQ(p.store_host_knee_bytes, t.host_knee);
  EXPECT_NEAR(p.store_host_ns_per_kib, t.host_ns_per_kib, 1e-6);
  EXPECT_NEAR(p.zero_copy_write_gbps, t.store_zc_gbps, 1e-6);
  EXPECT_NEAR(p.ensure_fixed_us, t.ensure_fixed_us, 1e-6);
  EXPECT_NEAR(p.ensure_ns_per_lookup, t.per_lookup_ns, 1e-9);
  EXPECT_NEAR(p.ensure_ns_per_slot, t.per_slot_ns, 1e-9);
  EXPECT_NEAR(p.ensure_ns_per_miss, t.per_miss_ns, 1e-9);
  // The step beside: its own series, its own fields, in two pieces; its copy's rate.
  EXPECT_NEAR(p.step_beside_fixed_us, t.beside_fixed_us, 1e-6);
  EXPECT_NEAR(p.step_beside_us_per_row_doubling, t.beside_per_doubling_us, 1e-6);
  EXPECT_NEAR(p.step_beside_ns_per_page, t.beside_per_page_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_ns_per_slot, t.beside_per_slot_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_ns_per_miss, t.beside_per_miss_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_ns_per_page_missing, t.beside_per_page_missing_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_us_missing, t.beside_missing_us, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_fixed_us, t.beside_wide_fixed_us, 1e-6);
  EXPECT_NEAR(p.step_beside_wide_ns_per_row, t.beside_wide_per_row_ns, 1e-6);
  EXPECT_NEAR(p.step_beside_wide_ns_per_page, t.beside_wide_per_page_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_ns_per_slot, t.beside_wide_per_slot_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_ns_per_miss, t.beside_wide_per_miss_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_wide_ns_per_page_missing, t.beside_wide_per_page_missing_ns, 1e-9);
  EXPECT_NEAR(p.step_beside_copy_us, t.beside_copy_us, 1e-6);
  EXPECT_NEAR(p.step_beside_copy_gbps, t.beside_copy_gbps, 1e-6);
  EXPECT_NEAR(p.indexer_ns_per_row_block, t.indexer_ns, 1e-9);
  EXPECT_NEAR(p.indexer_fixed_us, t.indexer_fixed_us, 1e-6);
  EXPECT_NEAR(p.launch_us, t.launch_us, 1e-9);
  EXPECT_NEAR(p.projection_fixed_us, t.proj_fixed_us, 1e-6);
  EXPECT_NEAR(p.projection_gbps, t.proj_gbps, 1e-6 * t.proj_gbps);
  EXPECT_NEAR(p.projection_ns_per_row, t.proj_per_row_ns, 1e-6);
  EXPECT_NEAR(p.projection_wide_fixed_us, t.wide_fixed_us, 1e-6);
  EXPECT_NEAR(p.projection_wide_tflops, t.wide_tflops, 1e-6 * t.wide_tflops);
  EXPECT_NEAR(p.layer_ops_fixed_us, t.ops_fixed_us, 1e-6);
  EXPECT_NEAR(p.layer_ops_ns_per_row, t.ops_per_row_ns, 1e-6);
  EXPECT_NEAR(p.staging_fixed_us, t.staging_fixed_us, 1e-6);
  EXPECT_NEAR(p.staging_gbps, t.staging_gbps, 1e-6);
  EXPECT_NEAR(p.window_fold_fixed_us, t.window_fixed_us, 1e-6);
  EXPECT_NEAR(p.window_fold_ns_per_row, t.window_per_row_ns, 1e-6);
  EXPECT_NEAR(p.fold_reset_fixed_us, t.reset_fixed_us, 1e-6);
  EXPECT_NEAR(p.fold_reset_ns_per_row, t.reset_per_row_ns, 1e-6);
  for (const SeriesFit& s : f.report.series)
    EXPECT_NEAR(s.linear.quality.r2, 1.0, 1e-9) << s.term;
}

TEST(ProfileFit, RecoversTheCardFromNoisyPoints) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const Truth t;
  const ProfileFit f = fit_profile(synthetic(t, 0.01), sim::load_profile("h200-pcie5"));
  const HardwareProfile& p = f.profile;
  EXPECT_NEAR(p.pcie_h2d_gbps / t.h2d_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.hbm_gbps / t.attend_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.ensure_ns_per_miss / t.per_miss_ns, 1.0, 0.05);
  EXPECT_NEAR(p.launch_us / t.launch_us, 1.0, 0.02);
  EXPECT_NEAR(p.projection_gbps / t.proj_gbps, 1.0, 0.05);
  EXPECT_NEAR(p.projection_ns_per_row / t.proj_per_row_ns, 1.0, 0.1);
  EXPECT_NEAR(p.projection_wide_tflops / t.wide_tflops, 1.0, 0.03);
  EXPECT_NEAR(p.layer_ops_ns_per_row / t.ops_per_row_ns, 1.0, 0.03);
  EXPECT_NEAR(p.layer_ops_fixed_us / t.ops_fixed_us, 1.0, 0.1);
  EXPECT_NEAR(p.staging_gbps / t.staging_gbps, 1.0, 0.03);
  EXPECT_NEAR(p.window_fold_ns_per_row / t.window_per_row_ns, 1.0, 0.03);
  EXPECT_NEAR(p.attention_fixed_us / t.attend_fixed_us, 1.0, 0.05);
  EXPECT_NEAR(p.attention_ns_per_cta / t.attend_per_cta_ns, 1.0, 0.2);
  EXPECT_NEAR(p.attention_ns_per_cta_token / t.span_per_token_ns, 1.0, 0.05);
  EXPECT_NEAR(p.attention_waves_gbps / t.waves_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.attention_fp8_ns_per_row / t.fp8_per_row_ns, 1.0, 0.2);
  EXPECT_NEAR(p.attention_fp8_host_gbps / t.fp8_host_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.attention_fp8_host_ns_per_row / t.fp8_host_per_row_ns, 1.0, 0.2);
  EXPECT_NEAR(p.store_fixed_us / t.store_fixed_us, 1.0, 0.05);
  EXPECT_NEAR(p.store_hbm_gbps / t.store_hbm_gbps, 1.0, 0.05);
  EXPECT_NEAR(p.store_host_us / t.host_us, 1.0, 0.05);
  EXPECT_NEAR(p.zero_copy_write_gbps / t.store_zc_gbps, 1.0, 0.02);
  EXPECT_EQ(p.store_knee_bytes, t.store_knee);
  EXPECT_NEAR(p.attention_fp8_gbps / t.fp8_gbps, 1.0, 0.05);
  EXPECT_NEAR(p.attention_fp8_host_gbps / t.fp8_host_gbps, 1.0, 0.02);
  EXPECT_NEAR(p.step_beside_us_per_row_doubling / t.beside_per_doubling_us, 1.0, 0.05);
  EXPECT_NEAR(p.step_beside_wide_ns_per_page / t.beside_wide_per_page_ns, 1.0, 0.1);
  EXPECT_NEAR(p.step_beside_copy_gbps / t.beside_copy_gbps, 1.0, 0.05);
  for (const SeriesFit& s : f.report.series)
    EXPECT_GT(s.linear.quality.r2, 0.99) << s.term;
}

// Points files from before the store series time the store into the pool and the host bank
// together (zero_copy_write): it sets zero_copy_write_gbps only without a store_host series.
TEST(ProfileFit, TheStoreSeriesSetsTheWriteThroughRateOverTheOldSeries) {
  const Truth t;
  PointsFile p = synthetic(t, 0.0);
  PointSeries old{"zero_copy_write", {{"bytes"}, {}, {}}};
  for (double bytes : {2048.0, 65536.0, 2.0e6, 3.3e7}) {
    old.samples.x.push_back({bytes});
    old.samples.y.push_back(2.0 + bytes / (1000 * 40.0));
  }
  p.series.push_back(old);
  const ProfileFit both = fit_profile(p, sim::load_profile("h200-pcie5"));
  EXPECT_NEAR(both.profile.zero_copy_write_gbps, t.store_zc_gbps, 1e-6);
  EXPECT_NE(both.profile.source("zero_copy_write_gbps").find("store_host: 8 points"),
            std::string::npos);
  const SeriesFit& zw = both.report.series.back();
  EXPECT_TRUE(zw.fields.empty());
  ASSERT_EQ(zw.notes.size(), 1u);
  EXPECT_NE(zw.notes[0].find("write-through rate 40.0 GB/s; zero_copy_write_gbps comes from the "
                             "store_host series"),
            std::string::npos)
      << zw.notes[0];
  std::erase_if(p.series, [](const PointSeries& s) { return s.term == "store_host"; });
  EXPECT_NEAR(fit_profile(p, sim::load_profile("h200-pcie5")).profile.zero_copy_write_gbps, 40.0,
              1e-6);
}

TEST(ProfileFit, EveryFittedValueSaysHowItWasFittedAndAbsentTermsKeepTheBase) {
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const ProfileFit f = fit_profile(synthetic(Truth{}, 0.0), base);
  const std::string src = f.profile.source("ensure_ns_per_miss");
  for (const char* part :
       {"fitted (least squares, ensure: 27 points, R² 1.0000)", "'kvtier validate calibrate'",
        "NVIDIA H200 (test)", "driver 580.65.06", "2026-12-02"}) {
    EXPECT_NE(src.find(part), std::string::npos) << part << " not in: " << src;
  }
  EXPECT_NE(f.profile.source("hbm_gbps").find("attention: 18 points"), std::string::npos);
  EXPECT_NE(f.profile.source("attention_ns_per_cta").find("attention: 18 points"),
            std::string::npos);
  // No topk, d2h, fp8 store, graph launch or non-QSA series: base values and sources (and the
  // SM count is the card's, never fitted).
  for (const char* field : {"topk_ns_per_row_block", "pcie_d2h_gbps", "store_fp8_host_gbps",
                            "store_fp8_fixed_us", "store_fp8_host_knee_bytes", "graph_launch_us",
                            "non_qsa_forward_us", "device_memory_gib", "sm_count"}) {
    EXPECT_EQ(f.profile.param(field), base.param(field)) << field;
    EXPECT_EQ(f.profile.source(field), base.source(field)) << field;
  }
  EXPECT_EQ(f.report.kept, (std::vector<std::string>{
                               "launch_graph", "d2h_copy", "zero_copy_write", "store_fp8",
                               "store_host_fp8", "indexer_prefill", "topk", "topk_one_cta",
                               "topk_chain", "attention_warm", "store_in_forward", "non_qsa"}));
  // The fixed parts the cost model does not price are reported, not dropped.
  for (const SeriesFit& s : f.report.series) {
    if (s.term != "launch_eager") continue;
    ASSERT_EQ(s.unpriced.size(), 1u);
    EXPECT_EQ(s.unpriced[0].coefficient, "intercept");
    EXPECT_NEAR(s.unpriced[0].value, 1.0, 1e-9);
  }
  EXPECT_FALSE(f.profile.validation.has_value());
}

TEST(ProfileFit, TheStoreInAForwardAndTheL2ReuseComeFromTheirSeries) {
  const Truth t;
  PointsFile p = synthetic(t, 0.0);
  // The store before a decode-width attend, less the attend alone: 1.9 us + 0.5 ns a KiB.
  PointSeries in_forward{"store_in_forward", {{"store_bytes"}, {}, {}}};
  for (double tokens : {1.0, 1.0, 1.0, 4096.0, 4096.0, 4096.0}) {
    in_forward.samples.x.push_back({tokens * 2048});
    in_forward.samples.y.push_back(1.9 + tokens * 2048 * 0.5e-3 / 1024);
  }
  // One row's attends of 2,051 tokens (65 splits, 130 CTAs, 32 tokens each) a layer, the
  // forward before's pages in L2: 1.3 us off the fitted attend's price up to 25.2 MB, nothing
  // from 100.8 MB; two rows' points are not fitted.
  const HardwareProfile fitted = fit_profile(p, sim::load_profile("h200-pcie5")).profile;
  const CostModel cost(fitted);
  const double layer_bytes = 2051.0 * 2048;
  PointSeries warm{
      "attention_warm",
      {{"rows", "layers", "working_set_bytes", "hbm_bytes", "ctas", "cta_tokens"}, {}, {}}};
  for (int rows : {1, 2}) {
    for (int layers : {1, 2, 3, 4, 6, 8, 12, 16, 24}) {
      const double bytes = rows * layer_bytes, ws = layers * bytes;
      const double ctas = rows * 2.0 * attend_splits(rows, 2, 2051, 132);
      const double cta_tokens = attend_cta_tokens(rows, 2, 2051, 132);
      const double price =
          1e-3 * static_cast<double>(cost.attention_ns(
                     static_cast<std::int64_t>(bytes), rows, static_cast<std::int64_t>(ctas),
                     KvDtype::bf16, static_cast<std::int64_t>(cta_tokens)));
      warm.samples.x.push_back(
          {static_cast<double>(rows), static_cast<double>(layers), ws, bytes, ctas, cta_tokens});
      warm.samples.y.push_back(price - (rows == 1 ? 1.3 * CostModel::l2_reuse_reach(
                                                              ws, 6 * layer_bytes, 24 * layer_bytes)
                                                  : 0.2));
    }
  }
  p.series.push_back(warm);
  p.series.push_back(in_forward);
  const ProfileFit f = fit_profile(p, sim::load_profile("h200-pcie5"));
  EXPECT_NEAR(f.profile.store_fixed_us, 1.9, 1e-6);  // not the store series' 1.1
  EXPECT_NEAR(f.profile.store_hbm_gbps, t.store_hbm_gbps, 1e-6);
  EXPECT_NE(f.profile.source("store_fixed_us").find("store_in_forward: 6 points"),
            std::string::npos);
  EXPECT_NEAR(f.profile.attention_l2_reuse_us, 1.3, 1e-6);
  EXPECT_EQ(f.profile.attention_l2_reuse_full_bytes, 6 * layer_bytes);
  EXPECT_EQ(f.profile.attention_l2_reuse_none_bytes, 24 * layer_bytes);
  EXPECT_NE(f.profile.source("attention_l2_reuse_us").find("attention_warm: 9 one-row points"),
            std::string::npos)
      << f.profile.source("attention_l2_reuse_us");
  // The report: attention_warm last, the store's own fixed part noted beside.
  ASSERT_FALSE(f.report.series.empty());
  EXPECT_EQ(f.report.series.back().term, "attention_warm");
  bool noted = false;
  for (const SeriesFit& s : f.report.series) {
    for (const std::string& n : s.notes)
      noted = noted || (s.term == "store" &&
                        n.find("comes from the store_in_forward series") != std::string::npos);
  }
  EXPECT_TRUE(noted);
}

TEST(ProfileFit, AFitThatGivesANonPositiveRateIsRefused) {
  PointsFile p = synthetic(Truth{}, 0.0);
  PointSeries& zc = p.series[1];
  for (std::size_t i = 0; i < zc.samples.y.size(); ++i)
    zc.samples.y[i] = 100.0 - static_cast<double>(i);  // faster with more bytes
  try {
    fit_profile(p, sim::load_profile("h200-pcie5"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'zero_copy_read' gives zero_copy_read_gbps"),
              std::string::npos)
        << e.what();
  }
}

// A series the calibration got wrong can be left out: the others are fitted, its fields keep the
// base's values and sources, and the report says which were left out. Only calibration terms the
// points have a series of may be left out.
TEST(ProfileFit, ASeriesLeftOutKeepsTheBaseAndTheOthersAreFitted) {
  PointsFile p = synthetic(Truth{}, 0.0);
  PointSeries& zc = p.series[1];
  ASSERT_EQ(zc.term, "zero_copy_read");
  for (std::size_t i = 0; i < zc.samples.y.size(); ++i)
    zc.samples.y[i] = 100.0 - static_cast<double>(i);  // faster with more bytes: refused
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  EXPECT_THROW(fit_profile(p, base), ConfigError);
  const ProfileFit f = fit_profile(p, base, {"zero_copy_read"});
  EXPECT_EQ(f.report.excluded, std::vector<std::string>{"zero_copy_read"});
  EXPECT_EQ(f.profile.param("zero_copy_read_gbps"), base.param("zero_copy_read_gbps"));
  EXPECT_EQ(f.profile.source("zero_copy_read_gbps"), base.source("zero_copy_read_gbps"));
  for (const SeriesFit& s : f.report.series)
    EXPECT_NE(s.term, "zero_copy_read");
  // a left-out term is neither fitted nor listed as having no series
  EXPECT_EQ(std::count(f.report.kept.begin(), f.report.kept.end(), "zero_copy_read"), 0);
  // the rest as without it: the same values as a fit of the good points
  const ProfileFit good = fit_profile(synthetic(Truth{}, 0.0), base);
  for (const char* field : {"pcie_h2d_gbps", "hbm_gbps", "ensure_ns_per_miss"})
    EXPECT_EQ(f.profile.param(field), good.profile.param(field)) << field;
  EXPECT_NE(f.profile.source("pcie_h2d_gbps"), base.source("pcie_h2d_gbps"));
  // the refusal's message says the series may be left out
  try {
    fit_profile(p, base);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fit without the series"), std::string::npos) << e.what();
  }
  // not a term; a term the points have no series of (a typo must not pass unnoticed)
  EXPECT_THROW(fit_profile(p, base, {"zero_copy"}), ConfigError);
  EXPECT_THROW(fit_profile(p, base, {"topk_chain"}), ConfigError);
  try {
    fit_profile(p, base, {"zero_copy"});
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not a calibration term"), std::string::npos) << e.what();
  }
}

TEST(ProfileFit, EveryTermMapsToTheProfile) {
  // One exact series per term: each sets at least one field (or, hbm_read with attention and
  // zero_copy_write with store present, and the retired ensure_beside, none) and the result is
  // a valid profile.
  // The step beside's series are priced through their own inputs (doublings of the rows, the
  // slots searched, the pages and fixed part of a step that misses): their points are the
  // cost model's own, from a profile of positive figures, on either side of kStepGroupedRows.
  const CostModel model(sim::load_profile("a100-80gb-pcie4"));
  PointsFile p{"c", "d", "2026-12-02", "cmd", {}};
  for (const CalibrationTerm& t : calibration_terms()) {
    PointSeries s{std::string(t.term), {{}, {}, {}}};
    for (std::string_view in : t.inputs)
      s.samples.inputs.emplace_back(in);
    const bool beside = t.term == "step_beside" || t.term == "step_beside_wide";
    for (int i = 0; i < 24; ++i) {
      std::vector<double> x;
      double y = 1.0;
      for (std::size_t j = 0; j < t.inputs.size(); ++j) {
        x.push_back(1.0 + static_cast<double>((i * (j + 1) * 7 + j * 3) % 13) * 100.0);
        y += 0.01 * x.back();
      }
      if (t.term == "attention_warm") {  // one decode row, attends faster than priced
        x[0] = 1;
        y = 0.5 + 0.001 * i;
      }
      if (beside) {  // rows, pages, slots, misses
        x[0] = static_cast<double>(t.term == "step_beside" ? 1 + i % kStepGroupedRows
                                                           : kStepGroupedRows + 1 + i);
        x[3] = i % 3 == 0 ? 0 : x[3];
        y = 1e-3 * static_cast<double>(model.step_beside_ns(
                       static_cast<std::int64_t>(x[0]), static_cast<std::int64_t>(x[1]),
                       static_cast<std::int64_t>(x[2]), static_cast<std::int64_t>(x[3])));
      }
      s.samples.x.push_back(x);
      s.samples.y.push_back(y);
    }
    p.series.push_back(s);
  }
  const ProfileFit f = fit_profile(p, sim::load_profile("a100-80gb-pcie4"));
  EXPECT_FALSE(f.profile.scaled_from_datasheets);
  EXPECT_TRUE(f.report.kept.empty());
  for (const SeriesFit& s : f.report.series) {
    if (s.term != "hbm_read" && s.term != "zero_copy_write" && s.term != "ensure_beside") {
      EXPECT_FALSE(s.fields.empty()) << s.term;
    }
  }
}

}  // namespace
}  // namespace kvtier::fit
