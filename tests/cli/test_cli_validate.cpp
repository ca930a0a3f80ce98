// `kvtier validate compare` and `kvtier validate fit` end to end on hand-made files.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tests/cli/cli_runner.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

std::string data(const std::string& name) {
  const char* dir = std::getenv("KVTIER_VALIDATION_DATA");
  return std::string(dir ? dir : ".") + "/" + name;
}

std::string pair(const std::string& gpu, const std::string& sim) {
  return " --pair " + data(gpu) + " " + data(sim);
}

TEST(CliValidate, CompareTableJsonAndHtml) {
  const std::string html = ::testing::TempDir() + "/compare.html";
  const auto t = run_kvtier("validate compare" + pair("gpu_device.json", "sim_device.json") +
                            pair("gpu_mirror.json", "sim_mirror.json") + " --html " + html);
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("error = (sim - gpu) / gpu"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("device (1 runs)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("7.50%"), std::string::npos) << t.out;  // device decode median |e|
  EXPECT_NE(t.out.find("differ from forward 2"), std::string::npos) << t.out;
  std::ifstream in(html);
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_NE(page.str().find("<svg"), std::string::npos);

  const auto j =
      run_kvtier("validate compare" + pair("gpu_device.json", "sim_device.json") + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto o = boost::json::parse(j.out).as_object();
  const auto& dev = o.at("placements").as_array()[0].as_object();
  EXPECT_DOUBLE_EQ(dev.at("decode").as_object().at("median_abs_error").as_double(), 0.075);
  EXPECT_DOUBLE_EQ(dev.at("prefill").as_object().at("total_error").as_double(), -0.10);
}

TEST(CliValidate, CompareRefusesMismatchedRuns) {
  const auto r = run_kvtier("validate compare" + pair("gpu_device.json", "sim_device_short.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("the GPU run has 5 forwards and the simulator 4"), std::string::npos)
      << r.out;
  const auto none = run_kvtier("validate compare");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("give at least one --pair"), std::string::npos) << none.out;
  const auto one = run_kvtier("validate compare --pair " + data("gpu_device.json"));
  EXPECT_NE(one.out.find("--pair takes two files"), std::string::npos) << one.out;
}

// A points file in the test's temporary folder: a topk series, then `more_series` (JSON text of
// further series, each led by a comma).
std::string write_points(const std::string& name, const std::string& more_series = "") {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path);
  out << R"j({"card": "H200 (test)", "driver": "580.65", "date": "2026-12-02",
      "command": "kvtier validate calibrate", "series": [
      {"term": "topk", "inputs": ["row_blocks"], "unit": "us",
       "points": [[1000, 2.0], [2000, 3.0], [3000, 4.0], [4000, 5.0], [5000, 6.0]]})j"
      << more_series << "]}";
  return path;
}

TEST(CliValidate, FitWritesAProfileThatPlanReads) {
  const std::string points = write_points("points.json");
  const std::string profile = ::testing::TempDir() + "/fitted.json";
  const auto f = run_kvtier("validate fit --points " + points + " --out " + profile);
  ASSERT_EQ(f.exit_code, 0) << f.out;
  EXPECT_NE(f.out.find("topk_ns_per_row_block"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("no series (base values kept): launch_eager"), std::string::npos) << f.out;
  const auto p = run_kvtier("sim --profile " + profile + " --placement device --json");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_EQ(boost::json::parse(p.out).as_object().at("trust").as_string(), "not validated");
}

// --json: the report (each series with its fit and the fields it set) and the fitted profile in
// one object, the profile the one --out writes.
TEST(CliValidate, FitJsonHoldsTheReportAndTheProfile) {
  const std::string points = write_points("points-json.json");
  const std::string profile = ::testing::TempDir() + "/fitted-json.json";
  const auto f = run_kvtier("validate fit --points " + points + " --json --out " + profile);
  ASSERT_EQ(f.exit_code, 0) << f.out;
  const auto o = boost::json::parse(f.out).as_object();
  const auto& report = o.at("report").as_object();
  EXPECT_EQ(report.at("card").as_string(), "H200 (test)");
  const auto& series = report.at("series").as_array();
  ASSERT_EQ(series.size(), 1u);
  const auto& topk = series[0].as_object();
  EXPECT_EQ(topk.at("term").as_string(), "topk");
  EXPECT_EQ(topk.at("points").as_int64(), 5);
  // the points lie on y = 1 + 0.001 x: R² 1, the slope 1 ns a row block
  EXPECT_NEAR(topk.at("linear").at("quality").at("r2").as_double(), 1.0, 1e-9);
  EXPECT_NEAR(topk.at("linear").at("slopes_us").as_array()[0].as_double(), 0.001, 1e-9);
  double fixed_us = -1, per_block_ns = -1;
  for (const auto& fv : topk.at("fields").as_array()) {
    const auto& field = fv.as_object();
    if (field.at("field").as_string() == "topk_fixed_us") fixed_us = field.at("value").as_double();
    if (field.at("field").as_string() == "topk_ns_per_row_block")
      per_block_ns = field.at("value").as_double();
  }
  EXPECT_NEAR(fixed_us, 1.0, 1e-6);
  EXPECT_NEAR(per_block_ns, 1.0, 1e-6);
  bool kept_launch = false;
  for (const auto& k : report.at("kept").as_array())
    kept_launch = kept_launch || k.as_string() == "launch_eager";
  EXPECT_TRUE(kept_launch);
  std::ifstream in(profile);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(o.at("profile"), boost::json::parse(written));
}

// A series that cannot be fitted stops the fit, naming it; --exclude leaves it out and fits the
// rest, saying which it left out; a term that is not one, or has no series, or an empty item
// between commas, is refused.
TEST(CliValidate, FitLeavesOutTheSeriesExcludeNames) {
  // staging's line through these points has a negative fixed part
  const std::string points = write_points("points-bad-staging.json", R"j(,
      {"term": "staging", "inputs": ["bytes"], "unit": "us",
       "points": [[1048576, 19.0], [4194304, 83.0], [16777216, 339.0], [67108864, 1363.0]]})j");
  const std::string profile = ::testing::TempDir() + "/fitted-without-staging.json";
  const auto bad = run_kvtier("validate fit --points " + points);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("'staging' gives staging_fixed_us"), std::string::npos) << bad.out;
  const auto f =
      run_kvtier("validate fit --points " + points + " --exclude staging --out " + profile);
  ASSERT_EQ(f.exit_code, 0) << f.out;
  EXPECT_NE(f.out.find("topk_ns_per_row_block"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("left out by --exclude (base values kept): staging"), std::string::npos)
      << f.out;
  const auto p = run_kvtier("sim --profile " + profile + " --placement device --json");
  EXPECT_EQ(p.exit_code, 0) << p.out;
  for (const auto& [arg, says] :
       {std::pair{"staging,,topk", "an empty term"}, std::pair{"stagin", "not a calibration term"},
        std::pair{"topk_chain", "the points have no series of it"}}) {
    const auto r = run_kvtier("validate fit --points " + points + " --exclude " + arg);
    EXPECT_EQ(r.exit_code, 1) << arg;
    EXPECT_NE(r.out.find(says), std::string::npos) << arg << ": " << r.out;
  }
}

}  // namespace
}  // namespace kvtier
