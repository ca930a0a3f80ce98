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

TEST(KneeFit, NeedsFourDistinctValuesOfItsFirstInput) {
  Samples s{{"x"}, {{1}, {2}, {3}, {3}, {2}}, {1, 2, 3, 3, 2}};
  EXPECT_THROW(fit_knee(s), FitError);
  Samples two{{"x", "y"}, {{1, 1}}, {1}};
  EXPECT_THROW(fit_knee(two), FitError);
  Samples short_point{{"x", "y"}, {{1, 1}, {2}, {3, 1}, {4, 1}}, {1, 2, 3, 4}};
  EXPECT_THROW(fit_knee(short_point), FitError);
}

// The fp8 attend: 25 us flat-ish (1.2 ns per KiB) up to 4 MB of bytes, then 300 GB/s, plus
// 0.35 us per row; its points rows x tokens as the calibration sweeps them, 1 % noise relative
// to y. The knee is on the bytes, the rows a line beside it; by relative residuals.
TEST(KneeFit, ASecondInputIsALineBesideTheKnee) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<double> noise(0.0, 0.01);
  auto truth = [](double bytes, double rows) {
    const double knee = 4259840;
    return 25 + std::min(bytes, knee) * 1.2e-3 / 1024 + std::max(0.0, bytes - knee) / 300e3 +
           0.35 * rows;
  };
  Samples s{{"hbm_bytes", "rows"}, {}, {}};
  for (int rows : {1, 2, 4, 8, 16, 32})
    for (int tokens : {512, 1024, 2051}) {
      const double bytes = rows * tokens * 1040.0;
      s.x.push_back({bytes, static_cast<double>(rows)});
      s.y.push_back(truth(bytes, rows) * (1 + noise(rng)));
    }
  const KneeFit k = fit_knee(s, true);
  EXPECT_EQ(k.knee, 4259840.0);
  ASSERT_EQ(k.other_slopes.size(), 1u);
  EXPECT_NEAR(k.other_slopes[0], 0.35, 0.1);
  EXPECT_NEAR(1.0 / (1000 * k.slope_above), 300.0, 15.0);
  EXPECT_NEAR(k.intercept, 25.0, 1.0);
  const std::vector<double> at{17039360.0, 16.0};
  EXPECT_NEAR(k.predict(at) / truth(at[0], at[1]), 1.0, 0.02);
  // Exact points: every coefficient back.
  Samples exact = s;
  for (std::size_t i = 0; i < exact.y.size(); ++i)
    exact.y[i] = truth(exact.x[i][0], exact.x[i][1]);
  const KneeFit e = fit_knee(exact, true);
  EXPECT_EQ(e.knee, 4259840.0);
  EXPECT_NEAR(e.intercept, 25.0, 1e-6);
  EXPECT_NEAR(e.slope_below, 1.2e-3 / 1024, 1e-12);
  EXPECT_NEAR(e.slope_above, 1.0 / 300e3, 1e-12);
  EXPECT_NEAR(e.other_slopes[0], 0.35, 1e-9);
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
