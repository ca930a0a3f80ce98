// The GPU calibration's plain parts, on the CPU: sweep grids, medians, calls per graph,
// selections, the points file (docs/validation.md) and `validate calibrate` refusing without a GPU.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "cli/run_modes.hpp"
#include "cuda/calibrate/points.hpp"
#include "cuda/calibrate/sweep.hpp"
#include "model/attend_grid.hpp"
#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#if defined(KVTIER_WITH_CUDA)
#include "cuda/host_bank.hpp"
#endif

namespace kvtier::calibrate {
namespace {

TEST(CalibrateSweep, Median) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({7.0}), 7.0);
  EXPECT_THROW(median({}), std::invalid_argument);
  EXPECT_THROW(median({1.0, std::nan("")}), std::invalid_argument);
}

TEST(CalibrateSweep, CallsPerGraph) {
  EXPECT_EQ(calls_per_graph(10, 300, 16), 16);  // 30 wanted, clamped
  EXPECT_EQ(calls_per_graph(100, 300, 16), 3);
  EXPECT_EQ(calls_per_graph(110, 300, 16), 3);  // ceil(2.7)
  EXPECT_EQ(calls_per_graph(1000, 300, 16), 1);
  EXPECT_EQ(calls_per_graph(0, 300, 16), 1);
  EXPECT_EQ(calls_per_graph(std::nan(""), 300, 16), 1);
  EXPECT_EQ(calls_per_graph(std::numeric_limits<double>::infinity(), 300, 16), 1);
  EXPECT_EQ(calls_per_graph(1, 300, 0), 1);
}

TEST(CalibrateSweep, Spread) {
  EXPECT_EQ(spread(10, 3), (std::vector<int>{4, 3, 3}));
  EXPECT_EQ(spread(2, 4), (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(spread(0, 2), (std::vector<int>{0, 0}));
  EXPECT_THROW(spread(1, 0), std::invalid_argument);
}

TEST(CalibrateSweep, SampleSorted) {
  std::mt19937_64 rng(7);  // fixed seed
  for (const auto& [n, k] :
       {std::pair{17, 7}, std::pair{1000, 513}, std::pair{5, 5}, std::pair{3, 0}}) {
    const auto s = sample_sorted(rng, n, k);
    ASSERT_EQ(static_cast<int>(s.size()), k);
    for (std::size_t i = 0; i < s.size(); ++i) {
      EXPECT_GE(s[i], 0);
      EXPECT_LT(s[i], n);
      if (i > 0) {
        EXPECT_LT(s[i - 1], s[i]);
      }
    }
  }
  EXPECT_THROW(sample_sorted(rng, 3, 4), std::invalid_argument);
  EXPECT_THROW(sample_sorted(rng, 3, -1), std::invalid_argument);
}

TEST(CalibrateSweep, DecodePositionsAreBlocksThenTheTail) {
  std::mt19937_64 rng(11);
  const std::int64_t ctx = 65536;
  const auto p = decode_positions(rng, ctx, 2051);
  ASSERT_EQ(p.size(), 2051u);
  for (std::size_t i = 1; i < p.size(); ++i)
    EXPECT_LT(p[i - 1], p[i]);
  for (std::size_t i = 0; i < 2048; i += 4) {
    EXPECT_EQ(p[i] % 4, 0);
    EXPECT_EQ(p[i + 3], p[i] + 3);
    EXPECT_LT(p[i + 3], ctx - 4);  // below the last block
  }
  EXPECT_EQ(p[2048], ctx - 3);
  EXPECT_EQ(p[2050], ctx - 1);
  EXPECT_EQ(decode_positions(rng, ctx, 512).size(), 512u);
  EXPECT_THROW(decode_positions(rng, 2048, 2051), std::invalid_argument);  // 512 of 511 blocks
  EXPECT_NO_THROW(decode_positions(rng, 8192, 2051));
  EXPECT_THROW(decode_positions(rng, 8190, 4), std::invalid_argument);
}

TEST(CalibrateSweep, ScatteredTablesAreDistinctPerRow) {
  std::mt19937_64 rng(3);
  const auto t = scattered_tables(rng, 3, 17, 40);
  ASSERT_EQ(t.size(), 51u);
  for (int r = 0; r < 3; ++r) {
    std::set<std::int32_t> seen(t.begin() + r * 17, t.begin() + (r + 1) * 17);
    EXPECT_EQ(seen.size(), 17u);
    EXPECT_GE(*seen.begin(), 0);
    EXPECT_LT(*seen.rbegin(), 40);
  }
}

// Every term's sweep has at least k + 2 points with each input varying alone, and the sizes the
// benchmarks rely on hold (the residency pool's halves, contexts long enough for 2051 tokens).
TEST(CalibrateSweep, GridsCoverEveryTerm) {
  for (const bool quick : {true, false}) {
    SCOPED_TRACE(quick ? "quick" : "full");
    const CalibrationGrid g = calibration_grid(quick);
    EXPECT_GE(g.launch_kernels.size(), 3u);
    int copies = 0;
    bool one_mib = false, sixty_four_mib = false;
    std::set<std::int64_t> pieces, transfers;
    for (const auto piece : g.copy_pieces)
      for (const int t : g.copy_transfers)
        if (piece * t <= g.copy_max_bytes) {
          ++copies;
          pieces.insert(piece);
          transfers.insert(t);
          one_mib |= piece * t == (1 << 20);
          sixty_four_mib |= piece * t == (64 << 20);
        }
    EXPECT_GE(copies, 4);
    EXPECT_GE(pieces.size(), 2u);
    EXPECT_GE(transfers.size(), 2u);
    EXPECT_TRUE(one_mib && sixty_four_mib);  // the gpu test compares them
    EXPECT_GE(g.layer_misses.size() + g.attend_rows.size() * g.attend_tokens.size(), 3u);
    EXPECT_GE(g.store_tokens.size(), 4u);  // store_host: two pieces need 4 distinct sizes
    EXPECT_GE(g.index_rows.size() * g.index_contexts.size(), 3u);
    EXPECT_GE(g.prefill_rows.size() * g.prefill_contexts.size(), 2u);  // extras: 2 points too
    EXPECT_GE(g.layer_rows.size(), 1u);
    EXPECT_GE(g.ensure_rows.size() * g.ensure_slots.size() * g.ensure_misses.size(), 5u);
    EXPECT_GE(g.ensure_rows.size(), 2u);
    EXPECT_GE(g.ensure_slots.size(), 2u);
    EXPECT_GE(g.ensure_misses.size(), 2u);
    // the step beside: both pieces (rows up to 8 and past), rows of 2,048 pages (the ensure
    // series') and of fewer, and misses of real pages
    EXPECT_TRUE(std::ranges::any_of(g.ensure_rows, [](int r) { return r <= kStepGroupedRows; }));
    EXPECT_TRUE(std::ranges::any_of(g.ensure_rows, [](int r) { return r > kStepGroupedRows; }));
    EXPECT_NE(std::ranges::find(g.ensure_context_pages, 2048), g.ensure_context_pages.end());
    EXPECT_GE(g.ensure_context_pages.size(), 2u);
    for (const int c : g.ensure_context_pages)
      EXPECT_LE(c, 2048);  // the rows' tables fit the recent half of the smallest pool
    EXPECT_GE(g.beside_copy_misses.size(), 3u);
    EXPECT_GE(g.beside_copy_misses.front(), 1);  // a copy in every point
    EXPECT_LE(g.beside_copy_misses.back(), 64);  // half the copy sweep's 128-page rows
    // the ensure series (rows of 2,048 pages) at two pools at least, and the largest misses of
    // every call in the older half of the largest pool
    EXPECT_GE(std::ranges::count_if(g.ensure_slots, [](int s) { return s / 2 >= 2048; }), 2);
    EXPECT_GE(g.ensure_slots.back() / 2, std::min(g.max_calls, 8) * g.ensure_misses.back());
    for (const int t : g.attend_tokens)
      EXPECT_LT(t / 4, g.context_pages * 16);
    // attention_span: a line over the widest CTA's tokens (4 points, 3 distinct at least), from
    // rows where the span binds, every row count within the attend's rows
    std::set<int> cta_tokens;
    for (const int rows : g.span_rows) {
      EXPECT_LE(rows, *std::ranges::max_element(g.attend_rows));
      for (const int t : g.span_tokens) {
        EXPECT_LT(t / 4, g.context_pages * 16);
        if (rows >= kSpanBoundRows) cta_tokens.insert(attend_cta_tokens(rows, 2, t, 132));
      }
    }
    EXPECT_GE(std::ranges::count_if(g.span_rows, [](int r) { return r >= kSpanBoundRows; }) *
                  g.span_tokens.size(),
              4u);
    EXPECT_GE(cta_tokens.size(), 3u);
    ASSERT_FALSE(g.span_narrow_tokens.empty());
    for (const int n : g.span_narrow_tokens)
      EXPECT_LT(n, g.span_tokens.front());
    EXPECT_FALSE(g.store_attend_tokens.empty());
    // attention_waves: every point past one wave of CTAs (2 x 132 on the H200: every CTA walks
    // its whole row), two widths at least so that bytes and CTAs part, k + 2 points for 3
    // coefficients, and the rows' selections within their context
    EXPECT_GE(g.waves_tokens.size(), 2u);
    EXPECT_GE(g.waves_rows.size() * g.waves_tokens.size(), 5u);
    EXPECT_GE(g.waves_chunk_rows, 1);
    for (const int rows : g.waves_rows)
      for (const int t : g.waves_tokens) {
        EXPECT_GT(attend_ctas(rows, 2, t, 132), attend_wave_ctas(132)) << rows << " x " << t;
        EXPECT_EQ(attend_ctas(rows, 2, t, 132), 2 * rows);
      }
    for (const int t : g.waves_tokens)
      EXPECT_LT(t / 4, g.context_pages * 16);
    // attention_warm: decode rows of 2,051 tokens (one of the attend's selections), every layer
    // its own selection (one per call of a graph)
    EXPECT_NE(std::ranges::find(g.attend_tokens, 2051), g.attend_tokens.end());
    EXPECT_FALSE(g.warm_rows.empty());
    EXPECT_GE(g.warm_layers.size(), 2u);
    for (const int rows : g.warm_rows)
      EXPECT_LE(rows, *std::ranges::max_element(g.attend_rows));
    for (const int layers : g.warm_layers)
      EXPECT_LE(layers, g.max_calls);
    EXPECT_LE(g.context_pages, g.bank_pages);
    EXPECT_LE(g.layer_misses.back(), g.layer_copy_bank_pages);
    EXPECT_LE(g.all_layers_misses.back(), g.all_layers_copy_bank_pages);
    for (const auto ctx : g.index_contexts)
      EXPECT_EQ(ctx % 4, 0);
    EXPECT_GE(g.max_calls, 1);
    EXPECT_GT(g.target_us, 0);
    EXPECT_LE(g.budget_s, 240);  // the whole run within 4 minutes
  }
}

Series series(const std::string& term, std::vector<std::vector<double>> pts,
              const std::string& sweep = "s") {
  Series s;
  s.term = term;
  s.sweep = sweep;
  s.inputs = term_inputs(term);
  s.points = std::move(pts);
  return s;
}

Points canned() {
  Points p;
  p.card = "NVIDIA H200";
  p.driver = "580.65.06 / CUDA 13.0";
  p.date = "2026-12-02";
  p.command = "kvtier validate calibrate --out x.json";
  p.series.push_back(series("zero_copy_read", {{1024, 3.5}, {2048, 4.0}}, "miss copy"));
  p.series.push_back(series("h2d_copy", {{2048, 1, 3}, {4096, 2, 6}, {8192, 4, 9}, {8192, 1, 4}}));
  p.series.push_back(series("zero_copy_read", {{4096, 5.0}}, "in place"));
  Series extra = series("zero_copy_read", {{1, 99}}, "fp8 host");
  extra.in_points_file = false;
  p.series.push_back(extra);
  return p;
}

TEST(CalibratePointsFile, MergesSweepsByTermInTheTablesOrder) {
  const boost::json::value v = boost::json::parse(points_file_json(canned()));
  const auto& o = v.as_object();
  EXPECT_EQ(o.size(), 5u);
  for (const char* k : {"card", "driver", "date", "command"})
    EXPECT_FALSE(o.at(k).as_string().empty());
  const auto& series = o.at("series").as_array();
  ASSERT_EQ(series.size(), 2u);
  const auto& h2d = series[0].as_object();  // h2d_copy comes before zero_copy_read
  EXPECT_EQ(h2d.size(), 4u);
  EXPECT_EQ(h2d.at("term").as_string(), "h2d_copy");
  EXPECT_EQ(h2d.at("unit").as_string(), "us");
  EXPECT_EQ(h2d.at("inputs").as_array().size(), 2u);
  EXPECT_EQ(h2d.at("points").as_array().size(), 4u);
  const auto& zc = series[1].as_object();
  EXPECT_EQ(zc.at("term").as_string(), "zero_copy_read");
  const auto& pts = zc.at("points").as_array();
  ASSERT_EQ(pts.size(), 3u);  // the two file sweeps, not the extra
  EXPECT_EQ(pts[2].as_array()[0].to_number<double>(), 4096.0);
}

TEST(CalibratePointsFile, RefusesWhatTheReaderWould) {
  {
    Points p = canned();
    p.series[0].inputs = {"piece_bytes"};
    try {
      points_file_json(p);
      FAIL();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("miss copy"), std::string::npos) << e.what();
    }
  }
  Points p = canned();
  p.series[0].points[1][1] = -1;
  EXPECT_THROW(points_file_json(p), std::invalid_argument);
  p = canned();
  p.series[0].points[1][0] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(points_file_json(p), std::invalid_argument);
  p = canned();
  p.series[1].points[0].pop_back();
  EXPECT_THROW(points_file_json(p), std::invalid_argument);
  p = canned();
  p.series[1].points.resize(3);  // two inputs need k + 2 = 4
  EXPECT_THROW(points_file_json(p), std::invalid_argument);
  EXPECT_THROW(term_inputs("nonsense"), std::invalid_argument);
  EXPECT_EQ(term_inputs("ensure"), (std::vector<std::string>{"lookups", "slots", "misses"}));
  EXPECT_EQ(term_inputs("ensure_beside"), (std::vector<std::string>{"lookups", "slots", "misses"}));
  EXPECT_EQ(term_inputs("step_beside"),
            (std::vector<std::string>{"rows", "pages", "slots", "misses"}));
  EXPECT_EQ(term_inputs("step_beside_wide"),
            (std::vector<std::string>{"rows", "pages", "slots", "misses"}));
  EXPECT_EQ(term_inputs("step_beside_copy"), (std::vector<std::string>{"bytes"}));
  EXPECT_EQ(term_inputs("projection"), (std::vector<std::string>{"weight_bytes", "rows"}));
  EXPECT_EQ(term_inputs("attention_span"), (std::vector<std::string>{"cta_tokens"}));
  EXPECT_EQ(term_inputs("attention_warm"),
            (std::vector<std::string>{"rows", "layers", "working_set_bytes", "hbm_bytes", "ctas",
                                      "cta_tokens"}));
  EXPECT_EQ(term_inputs("store_in_forward"), (std::vector<std::string>{"store_bytes"}));
  EXPECT_EQ(term_inputs("attention_waves"), (std::vector<std::string>{"hbm_bytes", "ctas"}));
  EXPECT_EQ(term_inputs("staging"), (std::vector<std::string>{"bytes"}));
  EXPECT_EQ(term_inputs("window_fold"), (std::vector<std::string>{"rows"}));
  EXPECT_EQ(term_inputs("fold_reset"), (std::vector<std::string>{"rows"}));
  EXPECT_EQ(points_file_terms().size(), 35u);
}

TEST(CalibratePointsFile, ShortTermsAreLeftOut) {
  Points p = canned();
  p.series[1].points.resize(3);
  EXPECT_EQ(leave_out_short_terms(p), std::vector<std::string>{"h2d_copy"});
  EXPECT_FALSE(p.series[1].in_points_file);
  EXPECT_TRUE(p.series[0].in_points_file);
  EXPECT_NO_THROW(points_file_json(p));
}

TEST(CalibratePointsFile, WrittenWholeThroughARename) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvtier_calibrate_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "points.json").string();
  write_points_file(canned(), path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), points_file_json(canned()));
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir))
    ++files;
  EXPECT_EQ(files, 1);  // no temporary file left
  EXPECT_THROW(write_points_file(canned(), (dir / "missing" / "p.json").string()), ConfigError);
  EXPECT_THROW(check_points_path((dir / "missing" / "p.json").string()), ConfigError);
  EXPECT_NO_THROW(check_points_path(path));
  std::filesystem::remove_all(dir);
}

TEST(CalibratePointsFile, CardDriverDate) {
  EXPECT_EQ(utc_date(0), "1970-01-01");
  EXPECT_EQ(utc_date(1796255999), "2026-12-02");
  EXPECT_EQ(nvidia_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun "
                                  "Jul 27 07:09:11 UTC 2025\nGCC version:  gcc 12.3.0\n"),
            "580.65.06");
  EXPECT_EQ(nvidia_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                  "570.86.15  Release Build  (dvs-builder@U16)\n"),
            "570.86.15");
  EXPECT_EQ(nvidia_driver_version("nothing here 12\n1.2.3"), "");
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(12080), "12.8");
}

TEST(ValidateCalibrate, RefusesClearlyWithoutAGpu) {
  EXPECT_EQ(cli::validate_calibrate({"kvtier validate calibrate", "--help"}), 0);
  EXPECT_THROW(cli::validate_calibrate({"kvtier validate calibrate", "--repeats", "0"}),
               ConfigError);
#if defined(KVTIER_WITH_CUDA)
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present (the gpu test runs it)";
#endif
  try {
    cli::validate_calibrate({"kvtier validate calibrate", "--quick"});
    FAIL() << "ran without a GPU";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvtier::calibrate
