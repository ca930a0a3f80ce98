// `kvtier validate calibrate --quick` on the GPU (label gpu; skips without a device): every sweep
// is measured, every time is positive and finite, times grow with the work where they must, the
// residency steps miss exactly what they were built to, and the points file is what
// docs/validation.md says the fitter reads.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cli/run_modes.hpp"
#include "cuda/calibrate/points.hpp"
#include "model/cost_model.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::calibrate {
namespace {

namespace json = boost::json;

std::vector<std::vector<double>> points_of(const json::value& s) {
  std::vector<std::vector<double>> out;
  for (const auto& p : s.at("points").as_array()) {
    std::vector<double> v;
    for (const auto& x : p.as_array())
      v.push_back(x.to_number<double>());
    out.push_back(v);
  }
  return out;
}

// The time of the first point whose inputs satisfy `match`.
double y_at(const std::vector<std::vector<double>>& pts,
            const std::function<bool(const std::vector<double>&)>& match) {
  for (const auto& p : pts)
    if (match(p)) return p.back();
  ADD_FAILURE() << "no such point";
  return std::nan("");
}

double y_at_min_x(const std::vector<std::vector<double>>& pts) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < pts.size(); ++i)
    if (pts[i][0] < pts[best][0]) best = i;
  return pts[best].back();
}

double y_at_max_x(const std::vector<std::vector<double>>& pts) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < pts.size(); ++i)
    if (pts[i][0] > pts[best][0]) best = i;
  return pts[best].back();
}

TEST(CalibrateGpu, QuickRunMeasuresEverySweepAndWritesThePointsFile) {
  KVT_REQUIRE_GPU();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kvtier_calibrate_gpu_" + std::to_string(::getpid()) + ".json"))
                               .string();
  testing::internal::CaptureStdout();
  int rc = -1;
  try {
    rc = cli::validate_calibrate(
        {"kvtier validate calibrate", "--quick", "--repeats", "3", "--out", path, "--json"});
  } catch (...) {
    testing::internal::GetCapturedStdout();
    throw;
  }
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  const json::object report = json::parse(out).as_object();
  EXPECT_TRUE(report.at("failures").as_array().empty()) << json::serialize(report.at("failures"));
  EXPECT_TRUE(report.at("terms_left_out").as_array().empty());

  // Every sweep: points, positive finite times, non-negative inputs, not cut at its budget.
  std::map<std::string, std::vector<std::vector<double>>> by_sweep;
  const auto& series = report.at("series").as_array();
  EXPECT_EQ(series.size(), 44u);
  for (const auto& s : series) {
    const std::string name =
        std::string(s.at("term").as_string()) + " / " + std::string(s.at("sweep").as_string());
    SCOPED_TRACE(name);
    const auto pts = points_of(s);
    EXPECT_GE(pts.size(), 2u);
    EXPECT_FALSE(s.at("truncated").as_bool());
    for (const auto& p : pts) {
      ASSERT_EQ(p.size(), s.at("inputs").as_array().size() + 1);
      EXPECT_TRUE(std::isfinite(p.back()) && p.back() > 0) << p.back();
      for (std::size_t i = 0; i + 1 < p.size(); ++i)
        EXPECT_TRUE(std::isfinite(p[i]) && p[i] >= 0) << p[i];
    }
    by_sweep[name] = pts;
  }
  auto sweep = [&](const std::string& prefix) {
    for (const auto& [name, pts] : by_sweep)
      if (name.rfind(prefix, 0) == 0) return pts;
    ADD_FAILURE() << "no sweep " << prefix;
    return std::vector<std::vector<double>>{};
  };

  // Times that must grow with the work.
  constexpr double MiB = 1 << 20;
  for (const char* term : {"h2d_copy / ", "d2h_copy / "}) {
    SCOPED_TRACE(term);
    const auto pts = sweep(term);
    EXPECT_GT(y_at(pts, [&](const auto& p) { return p[0] == 64 * MiB; }),
              y_at(pts, [&](const auto& p) { return p[0] == MiB; }));
  }
  EXPECT_GT(y_at_max_x(sweep("launch_eager / ")), y_at_min_x(sweep("launch_eager / ")));
  EXPECT_GT(y_at_max_x(sweep("launch_graph / ")), y_at_min_x(sweep("launch_graph / ")));
  for (const char* s :
       {"zero_copy_read / miss copy (launch_copy), bf16 layer",
        "zero_copy_read / miss copy (launch_copy), bf16 all-layers",
        "zero_copy_read / qsa::attend, host banks in place, bf16",
        "attention / qsa::attend, device banks, bf16",
        "attention_span / qsa::attend, device banks, bf16, one wide row",
        "attention_fp8 / qsa::attend, device banks, fp8",
        "attention_fp8_host / qsa::attend, host banks in place, fp8", "hbm_read / ",
        "indexer / qsa::index_scores, decode", "projection_wide / ", "layer_ops / "}) {
    SCOPED_TRACE(s);
    const auto pts = sweep(s);
    EXPECT_GT(y_at_max_x(pts), y_at_min_x(pts));
  }
  // The store into the pool and into the host bank: more tokens take longer.
  for (const char* s : {"store / qsa::store_kv, bf16, into the pool",
                        "store_fp8 / qsa::store_kv, fp8, into the pool",
                        "store_host / qsa::store_kv, bf16, into the host bank",
                        "store_host_fp8 / qsa::store_kv, fp8, into the host bank"}) {
    SCOPED_TRACE(s);
    const auto pts = sweep(s);
    EXPECT_GT(y_at_max_x(pts), y_at_min_x(pts));
  }
  // The span's shapes (bf16 and fp8): a wider row beside the same rows takes longer; the store of
  // a prefill chunk before a one-row attend takes longer than a decode row's.
  for (const char* s : {"attention_span_shapes / ", "attention_fp8_span_shapes / "}) {
    SCOPED_TRACE(s);
    std::map<std::pair<double, double>, std::map<double, double>> by_shape;  // rows, narrow
    for (const auto& p : sweep(s)) {
      ASSERT_EQ(p.size(), 7u);
      by_shape[{p[0], p[2]}][p[1]] = p[6];
    }
    for (const auto& [shape, by_wide] : by_shape) {
      if (by_wide.size() >= 2) {
        EXPECT_GT(by_wide.rbegin()->second, by_wide.begin()->second);
      }
    }
  }
  {
    std::map<double, std::map<double, double>> by_tokens;  // tokens -> store tokens -> us
    for (const auto& p : sweep("store_then_attend / "))
      by_tokens[p[1]][p[0]] = p[2];
    EXPECT_GE(by_tokens.size(), 2u);
    for (const auto& [tokens, by_store] : by_tokens) {
      ASSERT_EQ(by_store.size(), 2u) << tokens;
      EXPECT_GT(by_store.rbegin()->second, by_store.begin()->second) << tokens;
    }
  }
  {
    // The store's part of a forward's layer: a prefill chunk's store adds more than a decode
    // row's token does (each width's attend timed alone beside).
    std::map<double, std::vector<double>> by_bytes;  // store bytes -> what it adds, us
    for (const auto& p : sweep("store_in_forward / "))
      by_bytes[p[0]].push_back(p[1]);
    ASSERT_EQ(by_bytes.size(), 2u);
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    EXPECT_GT(median(by_bytes.rbegin()->second), median(by_bytes.begin()->second));
  }
  // The residency steps missed exactly the planned pages (quick grid: 0 or 32 per step).
  for (const auto& p : sweep("ensure / MirrorEngine::residency_step_async"))
    EXPECT_TRUE(p[2] == 0 || p[2] == 32) << p[2];
  // The step beside: up to kStepGroupedRows rows, and past them; the rows' pages follow their
  // context (the quick grid's 128 and 2,048 pages: at most 128 a row and its written page, about
  // 460).
  for (const char* term : {"step_beside / ", "step_beside_wide / "}) {
    SCOPED_TRACE(term);
    const bool wide = std::string(term) == "step_beside_wide / ";
    std::map<double, std::pair<double, double>> pages_by_rows;  // rows -> least, most pages
    for (const auto& p : sweep(term)) {
      EXPECT_TRUE(p[3] == 0 || p[3] == 32) << p[3];
      EXPECT_EQ(p[0] > kStepGroupedRows, wide) << p[0];
      auto [it, fresh] = pages_by_rows.try_emplace(p[0], p[1], p[1]);
      it->second = {std::min(it->second.first, p[1]), std::max(it->second.second, p[1])};
    }
    EXPECT_FALSE(pages_by_rows.empty());
    for (const auto& [rows, range] : pages_by_rows) {
      EXPECT_LE(range.first, rows * 129) << rows << " rows of 128 pages";
      EXPECT_GE(range.second, rows * 400) << rows << " rows of 2,048 pages";
    }
  }
  // The step beside's copy of its misses: bytes of bf16 layer pages, more take longer.
  {
    const auto pts = sweep("step_beside_copy / ");
    for (const auto& p : pts)
      EXPECT_EQ(std::fmod(p[0], 131072.0), 0.0) << p[0];
    EXPECT_GT(y_at_max_x(pts), y_at_min_x(pts));
  }
  // The points file, as docs/validation.md defines it.
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json::object file = json::parse(text.str()).as_object();
  EXPECT_EQ(file.size(), 5u);
  for (const char* k : {"card", "driver", "date", "command"})
    EXPECT_FALSE(file.at(k).as_string().empty()) << k;
  EXPECT_TRUE(std::regex_match(std::string(file.at("date").as_string()),
                               std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}")));
  std::set<std::string> terms;
  for (const auto& s : file.at("series").as_array()) {
    const auto& o = s.as_object();
    const std::string term(o.at("term").as_string());
    SCOPED_TRACE(term);
    EXPECT_EQ(o.size(), 4u);
    EXPECT_TRUE(terms.insert(term).second) << "twice";
    EXPECT_EQ(o.at("unit").as_string(), "us");
    std::vector<std::string> inputs;
    for (const auto& n : o.at("inputs").as_array())
      inputs.emplace_back(n.as_string());
    EXPECT_EQ(inputs, term_inputs(term));
    const auto pts = points_of(s);
    EXPECT_GE(pts.size(), inputs.size() + 2);
    for (const auto& p : pts) {
      ASSERT_EQ(p.size(), inputs.size() + 1);
      EXPECT_GT(p.back(), 0);
    }
  }
  EXPECT_EQ(terms, (std::set<std::string>{"launch_eager",
                                          "launch_graph",
                                          "h2d_copy",
                                          "d2h_copy",
                                          "zero_copy_read",
                                          "store",
                                          "store_fp8",
                                          "store_host",
                                          "store_host_fp8",
                                          "hbm_read",
                                          "indexer",
                                          "indexer_prefill",
                                          "topk",
                                          "topk_one_cta",
                                          "topk_chain",
                                          "projection",
                                          "projection_wide",
                                          "layer_ops",
                                          "ensure",
                                          "step_beside",
                                          "step_beside_wide",
                                          "step_beside_copy",
                                          "attention",
                                          "attention_span",
                                          "attention_warm",
                                          "attention_waves",
                                          "staging",
                                          "window_fold",
                                          "fold_reset",
                                          "store_in_forward",
                                          "attention_fp8",
                                          "attention_fp8_host"}));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kvtier::calibrate
