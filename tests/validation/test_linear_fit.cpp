// The least-squares fitter: known coefficients back from seeded noisy points, exact data
// exactly, a poor R² where the form does not fit, the worst residual's point, and the
// rank-deficient sweeps it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "validation/fit/fit_error.hpp"
#include "validation/fit/linear_fit.hpp"

namespace kvtier::fit {
namespace {

constexpr std::uint64_t kSeed = 20261201;

// y = 3 + 2e-5 * bytes + 2.9 * transfers: an h2d copy at 50 GB/s with 2.9 us per transfer.
Samples copy_sweep(double noise_us, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, noise_us);
  Samples s{{"bytes", "transfers"}, {}, {}};
  for (double bytes : {2048.0, 65536.0, 1.0e6, 4.0e6, 1.6e7, 6.4e7}) {
    for (double transfers : {1.0, 3.0, 17.0, 64.0}) {
      s.x.push_back({bytes, transfers});
      s.y.push_back(3 + 2e-5 * bytes + 2.9 * transfers + noise(rng));
    }
  }
  return s;
}

TEST(LinearFit, RecoversKnownCoefficientsFromNoisyPoints) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const LinearFit f = fit_linear(copy_sweep(0.5, kSeed));
  ASSERT_EQ(f.slopes.size(), 2u);
  // 24 points, noise 0.5 us against y up to 1,470 us: a few tenths of a us on the intercept.
  EXPECT_NEAR(f.intercept, 3.0, 0.5);
  EXPECT_NEAR(f.slopes[0], 2e-5, 2e-5 * 1e-3);
  EXPECT_NEAR(f.slopes[1], 2.9, 0.03);
  EXPECT_GT(f.quality.r2, 0.9999);
  EXPECT_LT(std::fabs(f.quality.worst_abs), 2.0);  // 4 sigma
}

TEST(LinearFit, ExactDataGivesExactCoefficientsAndNoResidual) {
  const LinearFit f = fit_linear(copy_sweep(0.0, kSeed));
  EXPECT_NEAR(f.intercept, 3.0, 1e-7);
  EXPECT_NEAR(f.slopes[0] / 2e-5, 1.0, 1e-10);
  EXPECT_NEAR(f.slopes[1], 2.9, 1e-9);
  EXPECT_NEAR(f.quality.r2, 1.0, 1e-12);
  EXPECT_LT(std::fabs(f.quality.worst_abs), 1e-7);
}

TEST(LinearFit, ReportsAPoorR2WhereTheFormDoesNotFit) {
  // A parabola seen as a line: the residuals follow x^2, and R² says so.
  Samples s{{"x"}, {}, {}};
  for (int i = -10; i <= 10; ++i) {
    s.x.push_back({static_cast<double>(i)});
    s.y.push_back(static_cast<double>(i * i));
  }
  const LinearFit f = fit_linear(s);
  EXPECT_NEAR(f.slopes[0], 0.0, 1e-12);  // symmetric: no trend at all
  EXPECT_LT(f.quality.r2, 0.01);
  // Noise alone: y independent of x.
  std::mt19937_64 rng(kSeed);
  std::uniform_real_distribution<double> u(10, 20);
  Samples n{{"x"}, {}, {}};
  for (int i = 0; i < 50; ++i) {
    n.x.push_back({static_cast<double>(i)});
    n.y.push_back(u(rng));
  }
  EXPECT_LT(fit_linear(n).quality.r2, 0.2) << "seed " << kSeed;
}

TEST(LinearFit, WorstResidualNamesItsPointSignAndRelativeSize) {
  Samples s{{"x"}, {}, {}};
  for (int i = 0; i < 11; ++i) {
    s.x.push_back({static_cast<double>(i)});
    s.y.push_back(10.0 + 2.0 * i + (i == 7 ? 6.0 : 0.0));  // one slow point
  }
  const LinearFit f = fit_linear(s);
  EXPECT_EQ(f.quality.worst_abs_at, 7u);
  EXPECT_GT(f.quality.worst_abs, 0) << "measured above the line: a positive residual";
  EXPECT_NEAR(f.quality.worst_abs_rel, f.quality.worst_abs / 30.0, 1e-12);  // y[7] = 30
  // The largest relative residual is where y is small, not necessarily the largest absolute.
  EXPECT_GE(std::fabs(f.quality.worst_rel), std::fabs(f.quality.worst_abs_rel));
}

TEST(LinearFit, RefusesSweepsThatCannotSeparateTheRates) {
  Samples s{{"bytes", "transfers"}, {}, {}};
  for (int i = 1; i <= 6; ++i) {
    s.x.push_back({4096.0 * i, 2.0 * i});  // transfers move with bytes
    s.y.push_back(1.0 + i);
  }
  try {
    fit_linear(s);
    FAIL();
  } catch (const FitError& e) {
    EXPECT_NE(std::string(e.what()).find("does not vary independently"), std::string::npos)
        << e.what();
  }
  for (auto& x : s.x)
    x[1] = 1;  // one transfer per point: the fixed part absorbs it
  try {
    fit_linear(s);
    FAIL();
  } catch (const FitError& e) {
    EXPECT_NE(std::string(e.what()).find("'transfers' is the same at every point"),
              std::string::npos)
        << e.what();
  }
  s.x.resize(3);
  s.y.resize(3);
  EXPECT_THROW(fit_linear(s), FitError);  // 3 points for 2 inputs and an intercept
}

}  // namespace
}  // namespace kvtier::fit

namespace kvtier::fit {
namespace {

// A store over 1 .. 16,384 tokens: y = 2 + bytes / 52,000 (2 us fixed, 52 GB/s), 1 % noise
// relative to y. Relative residuals keep the small points' say: the fixed part comes back to
// a few percent; absolute residuals leave it to the large points' noise.
TEST(LinearFit, RelativeResidualsWeighTheSmallPointsAsMuchAsTheLargeOnes) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<double> noise(0.0, 0.01);
  Samples s{{"bytes"}, {}, {}};
  for (double tokens = 1; tokens <= 16384; tokens *= 2) {
    const double x = tokens * 2048;
    s.x.push_back({x});
    s.y.push_back((2 + x / 52000) * (1 + noise(rng)));
  }
  const LinearFit rel = fit_linear(s, true);
  EXPECT_NEAR(rel.intercept, 2.0, 0.1);
  EXPECT_NEAR(rel.slopes[0] * 52000, 1.0, 0.02);
  const LinearFit abs = fit_linear(s);
  EXPECT_GT(std::fabs(abs.intercept - 2.0), std::fabs(rel.intercept - 2.0));
  // exact points: exact either way; a y that is not positive has no relative residual
  Samples exact{{"bytes"}, {{1.0}, {2.0}, {5.0}}, {3.0, 5.0, 11.0}};
  const LinearFit e = fit_linear(exact, true);
  EXPECT_NEAR(e.intercept, 1.0, 1e-9);
  EXPECT_NEAR(e.slopes[0], 2.0, 1e-9);
  exact.y[0] = 0;
  EXPECT_THROW(fit_linear(exact, true), FitError);
}

}  // namespace
}  // namespace kvtier::fit
