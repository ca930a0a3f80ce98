// Issue 16, item 8: the plan's miss curve is labelled for what it is, the classic-LRU curve
// (one-pass MRC), in the table, the JSON and the HTML report, with the core's own simulated
// misses beside it. (That it decides nothing: tests/sim/test_plan_decisions.cpp.)
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli/cli_runner.hpp"
#include "traces/trace_io.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

std::string plan_args() {
  return "plan --trace " + traces::samples_dir() +
         "/prefill-shared-prefix.ktr --placement mirror --unit layer --points 3 --threads 2 ";
}

TEST(CliPlanMissCurve, LabelledClassicLruBesideTheCoresMisses) {
  const auto table = run_kvtier(plan_args());
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("core misses"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("classic-LRU misses (MRC)"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find(" LRU misses "), std::string::npos) << table.out;  // the old header

  const auto j = testing::run_kvtier_split(plan_args() + "--json");  // the JSON on stdout alone
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(j.out.find("lru_misses_mrc"), std::string::npos);  // renamed, not kept
  const auto d = boost::json::parse(j.out).as_object();
  for (const auto& uv : d.at("mirror").as_array()) {
    for (const auto& pv : uv.as_object().at("points").as_array()) {
      const auto& p = pv.as_object();
      ASSERT_TRUE(p.contains("classic_lru_misses"));
      ASSERT_TRUE(p.contains("misses"));  // the core's, simulated
    }
  }

  const std::string html = ::testing::TempDir() + "/plan-mrc.html";
  ASSERT_EQ(run_kvtier(plan_args() + "--html " + html).exit_code, 0);
  std::stringstream page;
  page << std::ifstream(html).rdbuf();
  EXPECT_NE(page.str().find("<th>classic-LRU misses (MRC)</th>"), std::string::npos);
  EXPECT_NE(page.str().find("<th>core misses</th>"), std::string::npos);
  EXPECT_NE(page.str().find("core (sim) layer"), std::string::npos);
  EXPECT_NE(page.str().find("classic LRU layer"), std::string::npos);
}

}  // namespace
}  // namespace kvtier
