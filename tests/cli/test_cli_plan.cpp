// `kvtier plan` and `kvtier sim` end to end on the small bundled shared-prefix sample.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

const std::string kTrace = std::string(KVTIER_SAMPLES_DIR) + "/prefill-shared-prefix.ktr";

TEST(CliPlan, JsonIsDeterministicAndThresholdsHold) {
  const auto a = run_kvtier("plan --trace " + kTrace + " --json --threads 2");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_EQ(run_kvtier("plan --trace " + kTrace + " --json --threads 1").out, a.out);
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
  EXPECT_NE(d.at("recommendation").as_string().find("mirror"), std::string::npos);
}

TEST(CliPlan, BadInputIsAClearError) {
  const auto small = run_kvtier("plan --trace " + kTrace + " --sizes 3");
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_NE(small.out.find("the planner's minimum is 379 slots"), std::string::npos) << small.out;
  const auto profile = run_kvtier("plan --trace " + kTrace + " --profile no-such-card");
  EXPECT_EQ(profile.exit_code, 1);
  EXPECT_NE(profile.out.find("unknown hardware profile 'no-such-card'"), std::string::npos);
  const auto pct = run_kvtier("plan --trace " + kTrace + " --within 150");
  EXPECT_EQ(pct.exit_code, 1);
  EXPECT_NE(pct.out.find("between 0 and 100"), std::string::npos) << pct.out;
  const auto slots = run_kvtier("sim --trace " + kTrace + " --slots -5");
  EXPECT_EQ(slots.exit_code, 1);
  EXPECT_NE(slots.out.find("pool size must be positive, got -5"), std::string::npos) << slots.out;
  const auto missing = run_kvtier("plan --trace /nonexistent/trace.ktr");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("/nonexistent/trace.ktr"), std::string::npos) << missing.out;
}

TEST(CliSim, OneConfigurationAsJson) {
  const auto r = run_kvtier("sim --trace " + kTrace + " --placement mirror --slots 816 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto d = boost::json::parse(r.out).as_object();
  EXPECT_EQ(d.at("drops").as_int64(), 0);
  EXPECT_GT(d.at("decode_tokens_per_s").to_number<double>(), 0.0);
}

}  // namespace
}  // namespace kvtier
