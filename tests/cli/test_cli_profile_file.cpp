// `--profile FILE.json` with a profile written over a base: sim and plan name the derived
// profile and say what became of the base's validation; a malformed file is refused with
// exit 1, naming the file and the field.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.hpp"
#include "traces/trace_io.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

std::string example() {
  const char* dir = std::getenv("KVTIER_DOCS_EXAMPLES");
  return dir ? std::string(dir) + "/h200-our-host.json" : std::string("unset.json");
}

std::string sim_args() {
  return "sim --trace " + traces::samples_dir() + "/prefill-shared-prefix.ktr ";
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/cli-profile-" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CliProfileFile, SimAndPlanNameTheDerivedProfileAndItsTrust) {
  const auto r = run_kvtier(sim_args() + "--placement device --json --profile " + example());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto o = boost::json::parse(r.out).as_object();
  EXPECT_EQ(o.at("profile").as_string(), "h200-our-host (over h200-pcie5)");
  const std::string trust(o.at("trust").as_string());
  EXPECT_EQ(trust,
            "not validated: pcie_h2d_gbps, zero_copy_read_gbps changed over h200-pcie5, whose "
            "validation does not carry over");

  const auto plan = run_kvtier(
      "plan --trace " + traces::samples_dir() +
      "/prefill-shared-prefix.ktr --placement device --threads 2 --profile " + example());
  ASSERT_EQ(plan.exit_code, 0) << plan.out;
  EXPECT_NE(plan.out.find("profile h200-our-host (over h200-pcie5): " + trust), std::string::npos)
      << plan.out;
  EXPECT_NE(plan.out.find("(115.00 GiB device memory)"), std::string::npos) << plan.out;

  // Device memory alone keeps the base's validation, and says what changed outside it.
  const std::string mem = write("mem.json", R"({"name": "h200-96", "base": "h200-pcie5",
      "params": {"device_memory_gib": {"value": 96, "source": "weights take 35 GiB"}}})");
  const auto m = run_kvtier(sim_args() + "--placement device --json --profile " + mem);
  ASSERT_EQ(m.exit_code, 0) << m.out;
  const std::string kept(boost::json::parse(m.out).as_object().at("trust").as_string());
  EXPECT_EQ(kept.rfind("validated on NVIDIA H200", 0), 0u) << kept;
  EXPECT_NE(kept.find("(as h200-pcie5; changed here, outside what the validation covers: "
                      "device_memory_gib)"),
            std::string::npos)
      << kept;
}

TEST(CliProfileFile, ABadFileExitsOneNamingTheFileAndTheField) {
  const std::string bad = write("bad.json", R"({"name": "x", "base": "h200-pcie5",
      "params": {"pcie_h2d_gbps": {"value": 47.5}}})");
  for (const std::string& cmd :
       std::vector<std::string>{sim_args() + "--placement device --profile ",
                                "plan --placement device --threads 2 --profile "}) {
    const auto r = run_kvtier(cmd + bad);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("cli-profile-bad.json"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("params.pcie_h2d_gbps: missing \"source\""), std::string::npos) << r.out;
  }
  const std::string base = write("unknown-base.json", R"({"name": "x", "base": "h900",
      "params": {}})");
  const auto u = run_kvtier(sim_args() + "--profile " + base);
  EXPECT_EQ(u.exit_code, 1) << u.out;
  EXPECT_NE(u.out.find("base: unknown hardware profile 'h900'"), std::string::npos) << u.out;
}

// A figure no GPU has (here a read rate of 1e-12 GB/s, which priced a MiB at 33 years and
// wrapped the simulator's clock) is refused before anything is simulated, naming it.
TEST(CliProfileFile, AFigureNoGpuHasIsRefusedNamingIt) {
  const std::string slow = write("slow.json", R"({"name": "x", "base": "h200-pcie5",
      "params": {"zero_copy_read_gbps": {"value": 1e-12, "source": "a typo"}}})");
  const auto r = run_kvtier(sim_args() + "--placement host --profile " + slow);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("zero_copy_read_gbps: must be at least 1e-06 GB/s"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace kvtier
