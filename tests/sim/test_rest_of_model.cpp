// The rest of the model as an input with a source, and the trust line of a profile.
#include <gtest/gtest.h>

#include "model/config_error.hpp"
#include "model/profile_trust.hpp"
#include "sim/profiles.hpp"
#include "sim/rest_of_model.hpp"

namespace kvtier::sim {
namespace {

TEST(RestOfModel, TheProfilesFiguresAreLabelledAnEstimate) {
  const RestOfModel r = rest_of_model(load_profile("h200-pcie5"));
  EXPECT_EQ(r.forward_us, 1500);
  EXPECT_EQ(r.token_us, 10);
  EXPECT_EQ(r.label, "estimate from profile h200-pcie5");
  EXPECT_NE(r.forward_source.find("estimate"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.total_us(3, 100), 3 * 1500.0 + 100 * 10.0);
}

TEST(RestOfModel, GivenFiguresReplaceTheEstimateAndSaySo) {
  HardwareProfile p = load_profile("h200-pcie5");
  give_rest_of_model(p, 900.0, std::nullopt);
  RestOfModel r = rest_of_model(p);
  EXPECT_EQ(r.forward_us, 900);
  EXPECT_EQ(r.token_us, 10);
  EXPECT_EQ(r.forward_source, kGivenForward);
  EXPECT_EQ(r.label,
            "per forward: given (--non-qsa-forward-us); per token: estimate from profile "
            "h200-pcie5");
  give_rest_of_model(p, std::nullopt, 0.0);  // 0: the QSA stack alone
  r = rest_of_model(p);
  EXPECT_EQ(r.label, "given (--non-qsa-forward-us, --non-qsa-token-us)");
  EXPECT_NO_THROW(p.validate());
  EXPECT_THROW(give_rest_of_model(p, -1.0, std::nullopt), ConfigError);
  p.set("non_qsa_token_us", 4.0, "fitted (least squares, non_qsa: 12 points, R² 0.9990) by ...");
  EXPECT_EQ(rest_of_model(p).label,
            "per forward: given (--non-qsa-forward-us); per token: fitted in profile h200-pcie5");
}

TEST(TrustLine, ValidatedScaledOrNot) {
  HardwareProfile p = load_profile("h200-pcie5");
  EXPECT_EQ(trust_line(p).rfind("validated on NVIDIA H200", 0), 0u) << trust_line(p);
  p.validation.reset();
  EXPECT_EQ(trust_line(p), "not validated");
  p.validation =
      ProfileValidation{"NVIDIA H200", "2026-12-03", 0.0213, 0.0649, std::nullopt, {}, {}, {}, {}};
  EXPECT_EQ(trust_line(p),
            "validated on NVIDIA H200 2026-12-03 against the GPU trace replay: decode median error "
            "2.1 %, p95 6.5 %");
  p.validation->prefill_median_error = 0.031;
  EXPECT_EQ(trust_line(p),
            "validated on NVIDIA H200 2026-12-03 against the GPU trace replay: decode median error "
            "2.1 %, p95 6.5 %, prefill "
            "median error 3.1 %");
  p.validation->model_decode_median_error = 0.032;
  EXPECT_EQ(trust_line(p).find("model forward"), std::string::npos);  // needs the worst too
  p.validation->model_decode_worst_error = 0.104;
  p.validation->model_prefill_worst_error = 0.128;
  EXPECT_EQ(trust_line(p),
            "validated on NVIDIA H200 2026-12-03 against the GPU trace replay: decode median error "
            "2.1 %, p95 6.5 %, prefill median error 3.1 %; the model forward against the runner: "
            "decode median error 3.2 %, worst 10.4 %, prefill worst 12.8 %");
  for (const char* scaled : {"a100-80gb-pcie4", "h100-sxm5-pcie5", "l40s-pcie4"}) {
    EXPECT_EQ(trust_line(load_profile(scaled)), "scaled from datasheets, not validated") << scaled;
  }
}

}  // namespace
}  // namespace kvtier::sim
