// `kvtier plan` and `kvtier sim` end to end on the small bundled shared-prefix sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <string>

#include "sim/profiles.hpp"
#include "tests/cli/cli_runner.hpp"
#include "traces/trace_io.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

// A function, not a constant: the path is looked up when a test runs, with ctest's environment.
std::string sample_trace() {
  return traces::samples_dir() + "/prefill-shared-prefix.ktr";
}

TEST(CliPlan, JsonIsDeterministicAndThresholdsHold) {
  // stdout alone: stderr carries a line per stage (not a terminal).
  const auto a =
      testing::run_kvtier_split("plan --trace " + sample_trace() + " --json --threads 2");
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_EQ(testing::run_kvtier_split("plan --trace " + sample_trace() + " --json --threads 1").out,
            a.out);
  const auto d = boost::json::parse(a.out).as_object();
  const double within = d.at("within").to_number<double>();
  for (const auto& uv : d.at("mirror").as_array()) {
    const auto& u = uv.as_object();
    const auto& pts = u.at("points").as_array();
    ASSERT_FALSE(pts.empty());
    const double ref = pts.back().as_object().at("decode_tokens_per_s").to_number<double>();
    const std::int64_t chosen = u.at("within_slots").as_int64();
    ASSERT_NE(chosen, 0);
    bool seen = false;
    for (const auto& pv : pts) {
      const auto& p = pv.as_object();
      const std::int64_t slots = p.at("slots").as_int64();
      const bool qualifies = p.at("drops").as_int64() == 0 &&
                             p.at("decode_tokens_per_s").to_number<double>() >= ref * (1 - within);
      // The reported size is the smallest that qualifies: none below it does.
      if (slots < chosen) {
        EXPECT_FALSE(qualifies) << "slots " << slots;
      }
      if (slots == chosen) {
        EXPECT_TRUE(qualifies);
        seen = true;
      }
      // Belady never exceeds LRU.
      if (p.contains("belady_misses")) {
        EXPECT_LE(p.at("belady_misses").as_int64(), p.at("lru_misses_mrc").as_int64());
      }
    }
    EXPECT_TRUE(seen);
  }
  // The sample is small: every page fits the H200 in no more memory than the qualifying
  // mirror pool needs, so the plan recommends the device placement.
  const auto& dev = d.at("device").as_object();
  EXPECT_TRUE(dev.at("fits_device").as_bool());
  EXPECT_GT(dev.at("device_bytes").as_int64(), 0);
  EXPECT_LE(dev.at("device_bytes").as_int64(), d.at("device_capacity_bytes").as_int64());
  EXPECT_EQ(d.at("recommendation").as_string().find("device: every page fits"), 0u)
      << d.at("recommendation").as_string();
}

// On a card too small for the trace the device placement is marked, never recommended, and
// no mirror size that does not fit qualifies.
TEST(CliPlan, ConfigurationsThatDoNotFitTheCardAreMarked) {
  // The H200 profile with 1 GiB of device memory: less than the sample's KV pages need.
  const auto& profiles = sim::builtin_profiles();
  const auto h200 = std::find_if(profiles.begin(), profiles.end(),
                                 [](const auto& p) { return std::string(p.name) == "h200-pcie5"; });
  ASSERT_NE(h200, profiles.end());
  auto o = boost::json::parse(h200->json).as_object();
  const std::string profile = ::testing::TempDir() + "/tiny-card.json";
  std::FILE* f = std::fopen(profile.c_str(), "w");
  ASSERT_NE(f, nullptr);
  o["name"] = "tiny-card";
  o["params"].as_object()["device_memory_gib"].as_object()["value"] = 1.0;
  const std::string out = boost::json::serialize(o);
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
  const auto r =
      testing::run_kvtier_split("plan --trace " + sample_trace() + " --json --profile " + profile);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto d = boost::json::parse(r.out).as_object();
  EXPECT_FALSE(d.at("device").as_object().at("fits_device").as_bool());
  const std::string rec(d.at("recommendation").as_string());
  EXPECT_EQ(rec.find("device:"), std::string::npos) << rec;
  for (const auto& uv : d.at("mirror").as_array()) {
    const auto& u = uv.as_object();
    const std::int64_t chosen = u.at("within_slots").as_int64();
    for (const auto& pv : u.at("points").as_array()) {
      const auto& p = pv.as_object();
      if (p.at("slots").as_int64() == chosen) {
        EXPECT_TRUE(p.at("fits_device").as_bool());
      }
    }
  }
}

TEST(CliPlan, BadInputIsAClearError) {
  const auto small = run_kvtier("plan --trace " + sample_trace() + " --sizes 3");
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_NE(small.out.find("the planner's minimum is 379 slots"), std::string::npos) << small.out;
  const auto profile = run_kvtier("plan --trace " + sample_trace() + " --profile no-such-card");
  EXPECT_EQ(profile.exit_code, 1);
  EXPECT_NE(profile.out.find("unknown hardware profile 'no-such-card'"), std::string::npos);
  const auto pct = run_kvtier("plan --trace " + sample_trace() + " --within 150");
  EXPECT_EQ(pct.exit_code, 1);
  EXPECT_NE(pct.out.find("between 0 and 100"), std::string::npos) << pct.out;
  const auto slots = run_kvtier("sim --trace " + sample_trace() + " --slots -5");
  EXPECT_EQ(slots.exit_code, 1);
  EXPECT_NE(slots.out.find("pool size must be positive, got -5"), std::string::npos) << slots.out;
  const auto missing = run_kvtier("plan --trace /nonexistent/trace.ktr");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("/nonexistent/trace.ktr"), std::string::npos) << missing.out;
}

TEST(CliSim, OneConfigurationAsJson) {
  const auto r =
      run_kvtier("sim --trace " + sample_trace() + " --placement mirror --slots 816 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto d = boost::json::parse(r.out).as_object();
  EXPECT_EQ(d.at("drops").as_int64(), 0);
  EXPECT_GT(d.at("decode_tokens_per_s").to_number<double>(), 0.0);
}

}  // namespace
}  // namespace kvtier
