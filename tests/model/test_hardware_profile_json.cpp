// hardware_profile_to_json next to the reader: every built-in profile, and one carrying a
// validation, comes back from write -> read with the same values, sources, flag and
// validation; the reader refuses a malformed validation object.
#include <gtest/gtest.h>

#include "model/config_error.hpp"
#include "model/hardware_profile.hpp"
#include "sim/profiles.hpp"

namespace kvtier {
namespace {

void expect_same(const HardwareProfile& a, const HardwareProfile& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  for (std::string_view f : hardware_profile_params()) {
    EXPECT_EQ(a.param(f), b.param(f)) << f;  // bit-exact: shortest round-trip doubles
    EXPECT_EQ(a.source(f), b.source(f)) << f;
  }
  EXPECT_EQ(a.scaled_from_datasheets, b.scaled_from_datasheets);
  ASSERT_EQ(a.validation.has_value(), b.validation.has_value());
  if (a.validation) {
    EXPECT_EQ(a.validation->card, b.validation->card);
    EXPECT_EQ(a.validation->date, b.validation->date);
    EXPECT_EQ(a.validation->decode_median_error, b.validation->decode_median_error);
    EXPECT_EQ(a.validation->decode_p95_error, b.validation->decode_p95_error);
    EXPECT_EQ(a.validation->prefill_median_error, b.validation->prefill_median_error);
    EXPECT_EQ(a.validation->traces, b.validation->traces);
    EXPECT_EQ(a.validation->model_decode_median_error, b.validation->model_decode_median_error);
    EXPECT_EQ(a.validation->model_decode_worst_error, b.validation->model_decode_worst_error);
    EXPECT_EQ(a.validation->model_prefill_worst_error, b.validation->model_prefill_worst_error);
  }
}

TEST(ProfileJson, EveryBuiltinProfileRoundTrips) {
  for (const auto& b : sim::builtin_profiles()) {
    const HardwareProfile p = sim::load_profile(b.name);
    const HardwareProfile back = hardware_profile_from_json(hardware_profile_to_json(p));
    SCOPED_TRACE(b.name);
    expect_same(p, back);
    EXPECT_EQ(p.scaled_from_datasheets, std::string(b.name) != "h200-pcie5");
  }
}

TEST(ProfileJson, ValidationAndAwkwardValuesRoundTrip) {
  HardwareProfile p = sim::load_profile("h200-pcie5");
  p.set("hbm_gbps", 2345.678901234567, "fitted (least squares, attention: 9 points, R² 0.9991)");
  p.set("ensure_ns_per_slot", 1.0 / 3.0, "a \"quoted\" source with a \\ and ü");
  p.set("non_qsa_token_us", 1e-7, "given");
  p.validation = ProfileValidation{"NVIDIA H200",
                                   "2026-12-03",
                                   0.021,
                                   0.064,
                                   0.033,
                                   {"single-32k-decode1000.ktr", "concurrent8-16k-128k.ktr"},
                                   {},
                                   {},
                                   {}};
  const std::string text = hardware_profile_to_json(p);
  const HardwareProfile back = hardware_profile_from_json(text);
  expect_same(p, back);
  EXPECT_EQ(back.param("ensure_ns_per_slot"), 1.0 / 3.0);
  // Without prefill: the field is left out and stays absent.
  p.validation->prefill_median_error.reset();
  expect_same(p, hardware_profile_from_json(hardware_profile_to_json(p)));
  EXPECT_EQ(hardware_profile_to_json(p).find("prefill_median_error"), std::string::npos);
  // The model forward's figures, when held, come back; absent, they stay absent.
  p.validation->model_decode_median_error = 0.032;
  p.validation->model_decode_worst_error = 0.104;
  p.validation->model_prefill_worst_error = 0.128;
  expect_same(p, hardware_profile_from_json(hardware_profile_to_json(p)));
  p.validation->model_prefill_worst_error.reset();
  expect_same(p, hardware_profile_from_json(hardware_profile_to_json(p)));
  EXPECT_EQ(hardware_profile_to_json(p).find("model_prefill_worst_error"), std::string::npos);
}

TEST(ProfileJson, WritingAFieldWithoutASourceIsRefused) {
  HardwareProfile p = sim::load_profile("h200-pcie5");
  p.sources.erase(p.sources.begin() + 3);
  try {
    hardware_profile_to_json(p);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("h200-pcie5.pcie_latency_us"), std::string::npos)
        << e.what();
  }
}

TEST(ProfileJson, MalformedValidationIsRefused) {
  HardwareProfile p = sim::load_profile("h200-pcie5");
  p.validation =
      ProfileValidation{"H200", "2026-12-03", 0.02, 0.06, std::nullopt, {"t.ktr"}, {}, {}, {}};
  const std::string good = hardware_profile_to_json(p);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_NO_THROW(hardware_profile_from_json(good));
  EXPECT_THROW(hardware_profile_from_json(with("\"card\": \"H200\", ", "")), ConfigError);
  EXPECT_THROW(hardware_profile_from_json(with("\"decode_p95_error\": ", "\"p95\": ")),
               ConfigError);
  EXPECT_THROW(hardware_profile_from_json(with("0.02", "-0.02")), ConfigError);
  EXPECT_THROW(hardware_profile_from_json(
                   with("\"validation\"", "\"scaled_from_datasheets\": true, \"validation\"")),
               ConfigError);  // a datasheet-scaled profile is never validated
}

}  // namespace
}  // namespace kvtier
