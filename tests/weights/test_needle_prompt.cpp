// The needle prompt and the cosine the needle proofs report (cuda/weights/needle.hpp): plain
// C++, label cpu.
#include <gtest/gtest.h>

#include <algorithm>

#include "cuda/weights/needle.hpp"
#include "model/config_error.hpp"

namespace kvtier::weights {
namespace {

TEST(NeedlePrompt, FillerAvoidsTheReservedTokensAndTheNeedleSitsWhereAsked) {
  const Geometry g;
  const NeedlePlan plan = needle_plan(g, 64);
  const auto p = needle_prompt(plan, 64, 5000, 1234, 9);
  ASSERT_EQ(p.size(), 5000u);
  EXPECT_EQ(p[1234], plan.needle_token);
  EXPECT_EQ(p.back(), plan.query_token);
  EXPECT_EQ(std::count(p.begin(), p.end(), static_cast<std::int32_t>(plan.needle_token)), 1);
  EXPECT_EQ(std::count(p.begin(), p.end(), static_cast<std::int32_t>(plan.query_token)), 1);
  for (std::int32_t t : p)
    EXPECT_TRUE(t >= 0 && t < 64);
  EXPECT_EQ(p, needle_prompt(plan, 64, 5000, 1234, 9));  // deterministic
  EXPECT_NE(p, needle_prompt(plan, 64, 5000, 1234, 10));
  EXPECT_EQ(needle_prompt(plan, 64, 2, 0, 1)[0], plan.needle_token);
}

TEST(NeedlePrompt, PositionsOutsideThePromptAreRefused) {
  const NeedlePlan plan = needle_plan(Geometry{}, 64);
  EXPECT_THROW(needle_prompt(plan, 64, 100, 99, 1), ConfigError);  // the query token's place
  EXPECT_THROW(needle_prompt(plan, 64, 100, -1, 1), ConfigError);
  EXPECT_THROW(needle_prompt(plan, 64, 1, 0, 1), ConfigError);
}

TEST(NeedleCosine, RepeatsTheValueOverEachKvHeadsQueryHeads) {
  // 4 query heads over 2 KV heads of dim 3: heads 0, 1 see value head 0; heads 2, 3 head 1.
  const std::vector<float> v = {1, 2, 0, -2, 1, 5};  // the two value heads are orthogonal
  std::vector<float> a = {1, 2, 0, 1, 2, 0, -2, 1, 5, -2, 1, 5};
  EXPECT_NEAR(needle_cosine(a, v, 4, 2, 3), 1.0, 1e-12);
  for (auto& x : a)
    x *= 7.5f;  // scale does not matter
  EXPECT_NEAR(needle_cosine(a, v, 4, 2, 3), 1.0, 1e-12);
  const std::vector<float> swapped = {-2, 1, 5, -2, 1, 5, 1, 2, 0, 1, 2, 0};
  EXPECT_NEAR(needle_cosine(swapped, v, 4, 2, 3), 0.0, 1e-12);
  for (auto& x : a)
    x = -x;
  EXPECT_NEAR(needle_cosine(a, v, 4, 2, 3), -1.0, 1e-12);
  EXPECT_EQ(needle_cosine(std::vector<float>(12, 0.0f), v, 4, 2, 3), 0.0);
  EXPECT_THROW(needle_cosine(a, v, 4, 3, 3), ConfigError);
  EXPECT_THROW(needle_cosine(std::vector<float>(11), v, 4, 2, 3), ConfigError);
}

}  // namespace
}  // namespace kvtier::weights
