#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <boost/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

TEST(Cli, HelpListsCommandsAndUnknownCommandFails) {
  const auto help = run_kvtier("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("demo"), std::string::npos);
  EXPECT_NE(help.out.find("budget"), std::string::npos);
  const auto bad = run_kvtier("no-such-command");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("unknown command 'no-such-command'"), std::string::npos);
}

// The version comes from CMake's project version; the commit from git when cmake configured
// the build, or "unknown" outside a git checkout (a tarball).
TEST(Cli, VersionPrintsTheProjectVersionAndTheCommit) {
  const auto v = run_kvtier("--version");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  const std::string prefix = std::string("kvtier ") + KVTIER_PROJECT_VERSION + " (commit ";
  ASSERT_EQ(v.out.rfind(prefix, 0), 0u) << v.out;
  const std::string commit = v.out.substr(prefix.size(), v.out.find(')') - prefix.size());
  EXPECT_TRUE(
      commit == "unknown" ||
      (commit.size() == 12 && commit.find_first_not_of("0123456789abcdef") == std::string::npos))
      << commit;
  EXPECT_EQ(v.out, prefix + commit + ")\n");
  EXPECT_EQ(run_kvtier("version").out, v.out);
  EXPECT_NE(run_kvtier("--help").out.find("kvtier --version"), std::string::npos);
  EXPECT_EQ(run_kvtier("version --help").exit_code, 0);
  EXPECT_EQ(run_kvtier("version --fast").exit_code, 2);
}

TEST(Cli, DemoJsonCarriesTheHandWorkedTotals) {
  const auto r = run_kvtier("demo --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto o = boost::json::parse(r.out).as_object();
  EXPECT_EQ(o.at("hits").as_int64(), 28);
  EXPECT_EQ(o.at("misses").as_int64(), 16);
  EXPECT_EQ(o.at("steps").as_array().size(), 8u);
  // Byte-identical on a second run.
  EXPECT_EQ(run_kvtier("demo --json").out, r.out);
}

TEST(Cli, DemoWithTooFewSlotsIsAClearError) {
  const auto r = run_kvtier("demo --slots 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("only 3 slots are evictable"), std::string::npos) << r.out;
}

TEST(Cli, BudgetJsonAndErrors) {
  const auto r = run_kvtier("budget --placement mirror --context 65536 --pool-slots 512 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto o = boost::json::parse(r.out).as_object();
  EXPECT_EQ(o.at("host_pages").as_int64(), 1024);
  EXPECT_EQ(o.at("host_bytes").as_int64(), 1025LL * 12 * 131072);
  const auto small = run_kvtier("budget --pool-slots 10 --batch 16");
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_NE(small.out.find("the minimum is 32 slots"), std::string::npos) << small.out;
  const auto bad = run_kvtier("budget --kv-dtype fp16");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("--kv-dtype: expected bf16 or fp8"), std::string::npos) << bad.out;
  const auto unknown = run_kvtier("budget --frobnicate");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.out.find("--frobnicate"), std::string::npos);
}

// Device and host placements query no pool: their hit rate is not 100 %, it does not exist.
TEST(Cli, HitRateIsNotApplicableWithoutAPool) {
  for (const char* placement : {"device", "host"}) {
    const auto table = run_kvtier(std::string("sim --placement ") + placement);
    ASSERT_EQ(table.exit_code, 0) << table.out;
    EXPECT_NE(table.out.find("n/a (no pool"), std::string::npos) << table.out;
    EXPECT_EQ(table.out.find("100.00%"), std::string::npos) << table.out;
    const auto json = run_kvtier(std::string("sim --json --placement ") + placement);
    ASSERT_EQ(json.exit_code, 0) << json.out;
    EXPECT_NE(json.out.find("\"hit_rate\":null"), std::string::npos) << json.out;
  }
  const auto mirror = run_kvtier("sim --json --placement mirror --slots 8499");
  ASSERT_EQ(mirror.exit_code, 0) << mirror.out;
  EXPECT_EQ(mirror.out.find("\"hit_rate\":null"), std::string::npos) << mirror.out;
}

// A run that fails leaves none of its outputs behind: --decisions and --timeline appear only
// when the simulation completed.
TEST(Cli, FailedSimLeavesNoDecisionsOrTimeline) {
  const std::string dir = ::testing::TempDir();
  const std::string decisions = dir + "/kvtier-failed-decisions.jsonl";
  const std::string timeline = dir + "/kvtier-failed-timeline.json";
  std::remove(decisions.c_str());
  std::remove(timeline.c_str());
  const auto r = run_kvtier("sim --slots 100 --decisions " + decisions + " --timeline " + timeline);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  for (const std::string& f : {decisions, timeline, decisions + ".tmp", timeline + ".tmp"})
    EXPECT_FALSE(std::ifstream(f).good()) << f << " was left behind";
}

}  // namespace
}  // namespace kvtier
