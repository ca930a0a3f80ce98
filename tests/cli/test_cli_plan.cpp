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
using testing::run_kvtier_split;

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
  const auto& decision = d.at("decision").as_object();
  // The within sizes are measured against the recommendation's figure (it fits the budget).
  const double ref = decision.at("within_reference_figure").to_number<double>();
  EXPECT_EQ(ref, decision.at("figure").to_number<double>());
  bool any = false;
  for (const auto& uv : d.at("mirror").as_array()) {
    const auto& u = uv.as_object();
    const auto& pts = u.at("points").as_array();
    ASSERT_FALSE(pts.empty());
    const std::int64_t chosen = u.at("within_slots").as_int64();
    any = any || chosen != 0;
    for (const auto& pv : pts) {
      const auto& p = pv.as_object();
      const std::int64_t slots = p.at("slots").as_int64();
      const bool qualifies = p.at("drops").as_int64() == 0 && p.at("fits_device").as_bool() &&
                             p.at("decode_tokens_per_s").to_number<double>() >= ref * (1 - within);
      // The reported size is the smallest that qualifies: none below it does.
      if (chosen == 0 || slots < chosen) {
        EXPECT_FALSE(qualifies) << "slots " << slots;
      }
      if (slots == chosen) {
        EXPECT_TRUE(qualifies);
      }
      // Belady never exceeds LRU.
      if (p.contains("belady_misses") && !p.at("belady_misses").is_null()) {
        EXPECT_LE(p.at("belady_misses").as_int64(), p.at("classic_lru_misses").as_int64());
      }
    }
  }
  EXPECT_TRUE(any);
  // The sample is small: every page fits the H200, and the device placement (the ideal)
  // decodes fastest, so the plan recommends it.
  const auto& dev = d.at("device").as_object();
  EXPECT_TRUE(dev.at("fits_device").as_bool());
  EXPECT_GT(dev.at("device_bytes").as_int64(), 0);
  EXPECT_LE(dev.at("device_bytes").as_int64(), d.at("device_kv_budget_bytes").as_int64());
  EXPECT_EQ(d.at("device_kv_budget_bytes"), d.at("device_capacity_bytes"));
  EXPECT_EQ(decision.at("chosen").as_object().at("placement").as_string(), "device");
  EXPECT_EQ(d.at("recommendation").as_string().find("device: "), 0u)
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
  EXPECT_NE(small.out.find("the planner's minimum is 364 slots"), std::string::npos) << small.out;
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

// --device-kv-gib below what device needs: device is over the budget, never recommended; the
// plan prints what B leaves for the weights and activations.
TEST(CliPlan, ADeviceBudgetBelowDeviceRecommendsWhatFits) {
  const auto t = run_kvtier("plan --trace " + sample_trace() + " --device-kv-gib 1");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("card 131.0 GiB, KV budget 1.0 GiB, 130.0 GiB left for weights and "
                       "activations"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("recommendation: host (in place)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("(over budget)"), std::string::npos) << t.out;
  const auto j = run_kvtier_split("plan --trace " + sample_trace() + " --device-kv-gib 1 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto d = boost::json::parse(j.out).as_object();
  EXPECT_EQ(d.at("device_kv_budget_bytes").as_int64(), std::int64_t{1} << 30);
  EXPECT_FALSE(d.at("device_kv_budget_is_card").as_bool());
  EXPECT_FALSE(d.at("device").as_object().at("fits_device").as_bool());
  const auto& dec = d.at("decision").as_object();
  EXPECT_EQ(dec.at("chosen").as_object().at("placement").as_string(), "host");
  EXPECT_FALSE(dec.at("ideal_fits").as_bool());
  EXPECT_GT(dec.at("vs_ideal").to_number<double>(), 0.0);
}

// Nothing fits: the plan says the smallest budget that would, and that budget works.
TEST(CliPlan, NothingFitsSaysTheSmallestBudget) {
  const auto j = run_kvtier_split("plan --trace " + sample_trace() + " --device-kv-gib 0.1 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto d = boost::json::parse(j.out).as_object();
  const auto& dec = d.at("decision").as_object();
  EXPECT_FALSE(dec.at("found").as_bool());
  const std::string sentence(dec.at("sentence").as_string());
  const auto at = sentence.find("--device-kv-gib ");
  ASSERT_NE(at, std::string::npos) << sentence;
  const std::string b = sentence.substr(at + 16, sentence.find(' ', at + 16) - at - 16);
  const auto again = run_kvtier("plan --trace " + sample_trace() + " --device-kv-gib " + b);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(again.out.find("Nothing fits"), std::string::npos) << again.out;
}

TEST(CliPlan, ObjectivesPrefillAndTpot) {
  const auto p = run_kvtier_split("plan --trace " + sample_trace() + " --objective prefill --json");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto pd = boost::json::parse(p.out).as_object().at("decision").as_object();
  EXPECT_EQ(pd.at("objective").as_string(), "prefill");
  EXPECT_EQ(pd.at("figure").to_number<double>(),
            pd.at("chosen").as_object().at("prefill_tokens_per_s").to_number<double>());
  // A target every configuration meets, and one none meets.
  const auto met = run_kvtier_split("plan --trace " + sample_trace() + " --tpot-ms 10000 --json");
  ASSERT_EQ(met.exit_code, 0) << met.err;
  const auto md = boost::json::parse(met.out).as_object().at("decision").as_object();
  EXPECT_EQ(md.at("objective").as_string(), "tpot");
  EXPECT_TRUE(md.at("meets_target").as_bool());
  const auto unmet = run_kvtier("plan --trace " + sample_trace() + " --tpot-ms 0.001");
  ASSERT_EQ(unmet.exit_code, 0) << unmet.out;
  EXPECT_NE(unmet.out.find("meets the TPOT target of 0.00 ms"), std::string::npos) << unmet.out;
  EXPECT_NE(unmet.out.find("step ms"), std::string::npos) << unmet.out;
}

// A bad B is refused before any work, naming the option and the card's size.
TEST(CliPlan, BadDeviceBudgetIsAClearError) {
  for (const char* v : {"0", "-1", "nan", "inf", "200"}) {
    for (const char* cmd : {"plan", "sim --placement device"}) {
      const auto r =
          run_kvtier(std::string(cmd) + " --trace " + sample_trace() + " --device-kv-gib " + v);
      EXPECT_EQ(r.exit_code, 1) << cmd << " " << v << ": " << r.out;
      EXPECT_NE(r.out.find("--device-kv-gib"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("at most the card's 131 GiB (profile h200-pcie5)"), std::string::npos)
          << r.out;
    }
  }
  const auto obj = run_kvtier("plan --trace " + sample_trace() + " --objective speed");
  EXPECT_EQ(obj.exit_code, 1);
  EXPECT_NE(obj.out.find("--objective"), std::string::npos) << obj.out;
}

// sim and budget refuse a configuration over B, naming the smallest B that fits it.
TEST(CliSim, AConfigurationOverTheBudgetIsRefusedWithTheSmallestThatFits) {
  const auto r =
      run_kvtier("sim --trace " + sample_trace() + " --placement device --device-kv-gib 1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("the smallest device budget that fits it is 1.34 GiB"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("KV budget 1.0 GiB"), std::string::npos) << r.out;
  const auto ok =
      run_kvtier("sim --trace " + sample_trace() + " --placement device --device-kv-gib 1.34");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("card 131.0 GiB, KV budget 1.3 GiB"), std::string::npos) << ok.out;

  const auto b = run_kvtier("budget --placement device --context 131072 --device-kv-gib 0.5");
  EXPECT_EQ(b.exit_code, 1) << b.out;
  EXPECT_NE(b.out.find("the smallest device budget that fits it is"), std::string::npos) << b.out;
  const auto card = run_kvtier("budget --device-gib 80 --device-kv-gib 100");
  EXPECT_EQ(card.exit_code, 1) << card.out;
  EXPECT_NE(card.out.find("at most the card's 80 GiB (--device-gib)"), std::string::npos)
      << card.out;
  const auto fits = run_kvtier("budget --device-gib 80 --device-kv-gib 24");
  EXPECT_EQ(fits.exit_code, 0) << fits.out;
  EXPECT_NE(fits.out.find("card 80.0 GiB, KV budget 24.0 GiB, 56.0 GiB left"), std::string::npos)
      << fits.out;
}

TEST(CliPlan, HtmlReportSaysWhereItWasWritten) {
  const std::string file = ::testing::TempDir() + "/plan-report.html";
  const auto r = run_kvtier("plan --trace " + sample_trace() + " --device-kv-gib 1 --html " + file);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote report to " + file), std::string::npos) << r.out;
  std::FILE* f = std::fopen(file.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string html(1 << 20, '\0');
  html.resize(std::fread(html.data(), 1, html.size(), f));
  std::fclose(f);
  EXPECT_NE(html.find("KV budget 1.0 GiB"), std::string::npos);
  EXPECT_NE(html.find("id='latency'"), std::string::npos);
  std::remove(file.c_str());
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
