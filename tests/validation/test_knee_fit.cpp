// The two-piece fit: the knee found among the points' x, both slopes back from seeded noise,
// and no knee claimed on a straight line.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "validation/fit/fit_error.hpp"
#include "validation/fit/knee_fit.hpp"

namespace kvtier::fit {
namespace {

constexpr std::uint64_t kSeed = 20261202;

// A kernel flat at 5 us + 0.001 us per block up to 1,320 blocks (one wave of 132 SMs x 10),
// then 0.02 us per block.
double wave(double x) {
  return x <= 1320 ? 5 + 0.001 * x : 5 + 0.001 * 1320 + 0.02 * (x - 1320);
}

TEST(KneeFit, FindsTheKneeAndBothSlopes) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<double> noise(0.0, 0.05);
  Samples s{{"row_blocks"}, {}, {}};
  for (int i = 1; i <= 30; ++i) {
    const double x = 132.0 * i;  // 1,320 is the 10th point
    s.x.push_back({x});
    s.y.push_back(wave(x) + noise(rng));
  }
  const KneeFit k = fit_knee(s);
  EXPECT_EQ(k.knee, 1320.0);
  EXPECT_NEAR(k.slope_below, 0.001, 2e-4);
  EXPECT_NEAR(k.slope_above, 0.02, 2e-4);
  EXPECT_NEAR(k.intercept, 5.0, 0.1);
  EXPECT_GT(k.quality.r2, 0.999);
  EXPECT_NEAR(k.predict(2640), wave(2640), 0.1);
  // The straight line over the same points explains less.
  EXPECT_LT(fit_linear(s).quality.r2, k.quality.r2);
}

TEST(KneeFit, AStraightLineGainsNothingFromAKnee) {
  Samples s{{"bytes"}, {}, {}};
  for (int i = 1; i <= 12; ++i) {
    s.x.push_back({1024.0 * i});
    s.y.push_back(3 + 0.02 * 1024.0 * i);
  }
  const KneeFit k = fit_knee(s);
  EXPECT_NEAR(k.slope_below, k.slope_above, 1e-9);
  EXPECT_NEAR(k.quality.r2, 1.0, 1e-12);
}

TEST(KneeFit, NeedsOneInputAndFourDistinctValues) {
  Samples s{{"x"}, {{1}, {2}, {3}, {3}, {2}}, {1, 2, 3, 3, 2}};
  EXPECT_THROW(fit_knee(s), FitError);
  Samples two{{"x", "y"}, {{1, 1}}, {1}};
  EXPECT_THROW(fit_knee(two), FitError);
}

}  // namespace
}  // namespace kvtier::fit

namespace kvtier::fit {
namespace {

// The host bank's store: 2.4 us + 3.4 ns per KiB up to 128 KiB (the link absorbs small
// writes), then 52 GB/s; points at 1 .. 16,384 tokens of 2 KiB with 1 % noise relative to y.
// By relative residuals the knee and the small stores' fixed part come back.
TEST(KneeFit, RelativeResidualsFindTheHostStoresKnee) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<double> noise(0.0, 0.01);
  const auto store = [](double x) {
    return 2.4 + std::min(x, 131072.0) * 3.4 / 1024e3 + std::max(0.0, x - 131072) / 52000;
  };
  Samples s{{"bytes"}, {}, {}};
  for (double tokens = 1; tokens <= 16384; tokens *= 4) {
    s.x.push_back({tokens * 2048});
    s.y.push_back(store(tokens * 2048) * (1 + noise(rng)));
  }
  const KneeFit k = fit_knee(s, true);
  EXPECT_EQ(k.knee, 131072.0);
  EXPECT_NEAR(k.intercept, 2.4, 0.1);
  EXPECT_NEAR(k.slope_above * 52000, 1.0, 0.03);
  for (std::size_t i = 0; i < s.x.size(); ++i)
    EXPECT_NEAR(k.predict(s.x[i][0]) / s.y[i], 1.0, 0.04) << s.x[i][0];
}

}  // namespace
}  // namespace kvtier::fit
