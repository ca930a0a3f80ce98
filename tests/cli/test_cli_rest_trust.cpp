// Issue 15, items 4 and 5, end to end: plan and sim print the QSA stack's time and the rest of
// the model apart, with the rest's source, and the profile's validation status.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <sstream>

#include "model/hardware_profile.hpp"
#include "sim/profiles.hpp"
#include "tests/cli/cli_runner.hpp"
#include "traces/trace_io.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

std::string sample_trace() {
  return traces::samples_dir() + "/prefill-shared-prefix.ktr";
}

std::string sim_args() {
  return "sim --trace " + sample_trace() + " --placement device ";
}

// stdout alone: plan prints a line per stage on stderr when it is not a terminal.
boost::json::object json_of(const std::string& args) {
  const auto r = testing::run_kvtier_split(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return boost::json::parse(r.out).as_object();
}

double num(const boost::json::object& o, const char* key) {
  return o.at(key).to_number<double>();
}

std::string validated_profile() {
  HardwareProfile p = sim::load_profile("h200-pcie5");
  p.validation = ProfileValidation{"NVIDIA H200",
                                   "2026-12-03",
                                   0.021,
                                   0.064,
                                   std::nullopt,
                                   {"single-32k-decode1000.ktr"},
                                   {},
                                   {},
                                   {}};
  const std::string file = ::testing::TempDir() + "/h200-validated.json";
  std::ofstream(file) << hardware_profile_to_json(p);
  return file;
}

// The shipped profile without its validation: what the planner says of a profile nobody held
// to a card.
std::string unvalidated_profile() {
  HardwareProfile p = sim::load_profile("h200-pcie5");
  p.validation.reset();
  const std::string file = ::testing::TempDir() + "/h200-unvalidated.json";
  std::ofstream(file) << hardware_profile_to_json(p);
  return file;
}

TEST(CliRestOfModel, SimSplitsTheQsaStackFromTheRest) {
  const auto d = json_of(sim_args() + "--json");
  const auto& rest = d.at("rest_of_model").as_object();
  EXPECT_EQ(rest.at("label").as_string(), "estimate from profile h200-pcie5");
  EXPECT_EQ(num(rest, "forward_us"), 1500);
  const double forwards = num(d, "forwards");
  EXPECT_GT(num(d, "qsa_stack_us"), 0);
  EXPECT_NEAR(num(d, "qsa_stack_us") + num(rest, "us"), num(d, "forward_us"), 1e-6);

  // A figure the user gives replaces the estimate: the QSA stack's time stays, the rest moves.
  const auto g = json_of(sim_args() + "--json --non-qsa-forward-us 500 --non-qsa-token-us 0");
  const auto& grest = g.at("rest_of_model").as_object();
  EXPECT_EQ(grest.at("label").as_string(), "given (--non-qsa-forward-us, --non-qsa-token-us)");
  EXPECT_NEAR(num(grest, "us"), 500 * forwards, 1e-6);
  // The rest only sits between the QSA ops, so the stack's share is the same within the
  // rounding of the per-layer gaps (<= one ns per layer and forward).
  EXPECT_NEAR(num(g, "qsa_stack_us"), num(d, "qsa_stack_us"), forwards * 49 * 1e-3);
  EXPECT_GT(num(g, "decode_tokens_per_s"), num(d, "decode_tokens_per_s"));

  const auto t = run_kvtier(sim_args() + "--non-qsa-token-us 2");
  EXPECT_NE(t.out.find("QSA stack time"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("per token: given (--non-qsa-token-us)"), std::string::npos) << t.out;
  EXPECT_NE(run_kvtier(sim_args() + "--non-qsa-forward-us -1").out.find("--non-qsa-forward-us"),
            std::string::npos);
}

TEST(CliRestOfModel, PlanPrintsTheQsaStackPerPointAndTheRestOnce) {
  const auto d = json_of("plan --trace " + sample_trace() +
                         " --placement device --json --threads 2 --non-qsa-forward-us 700");
  const auto& rest = d.at("rest_of_model").as_object();
  EXPECT_NE(rest.at("label").as_string().find("per forward: given"), std::string::npos);
  const auto& dev = d.at("device").as_object();
  EXPECT_NEAR(num(dev, "qsa_stack_us") + num(rest, "us"), num(dev, "forward_us"), 1e-6);
  const auto t = run_kvtier("plan --trace " + sample_trace() + " --placement device --threads 2");
  EXPECT_NE(t.out.find("rest of the model (non-QSA layers, not simulated)"), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("QSA ms"), std::string::npos) << t.out;
}

TEST(CliTrust, NotValidatedValidatedAndScaled) {
  // The shipped h200-pcie5 profile carries the validation of its calibration on the H200.
  EXPECT_EQ(
      json_of(sim_args() + "--json").at("trust").as_string().rfind("validated on NVIDIA H200", 0),
      0u);
  EXPECT_EQ(
      json_of(sim_args() + "--json --profile " + unvalidated_profile()).at("trust").as_string(),
      "not validated");
  const std::string validated = validated_profile();
  const std::string line =
      "validated on NVIDIA H200 2026-12-03 against the GPU trace replay: decode median error 2.1 "
      "%, p95 6.4 %";
  EXPECT_EQ(json_of(sim_args() + "--json --profile " + validated).at("trust").as_string(), line);
  const auto table = run_kvtier(sim_args() + "--profile " + validated);
  EXPECT_NE(table.out.find("profile h200-pcie5: " + line), std::string::npos) << table.out;

  const std::string plan = "plan --trace " + sample_trace() + " --placement device --threads 2 ";
  EXPECT_EQ(json_of(plan + "--json --profile " + validated).at("trust").as_string(), line);
  EXPECT_NE(run_kvtier(plan + "--profile " + validated).out.find(line), std::string::npos);
  const std::string html = ::testing::TempDir() + "/plan-trust.html";
  ASSERT_EQ(run_kvtier(plan + "--profile " + validated + " --html " + html).exit_code, 0);
  std::stringstream page;
  page << std::ifstream(html).rdbuf();
  EXPECT_NE(page.str().find(line), std::string::npos);
  std::stringstream plain;
  ASSERT_EQ(run_kvtier(plan + "--profile " + unvalidated_profile() + " --html " + html).exit_code,
            0);
  plain << std::ifstream(html).rdbuf();
  EXPECT_NE(plain.str().find("not validated"), std::string::npos);

  EXPECT_EQ(json_of(plan + "--json --profile l40s-pcie4").at("trust").as_string(),
            "scaled from datasheets, not validated");
}

}  // namespace
}  // namespace kvtier
