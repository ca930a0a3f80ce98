// The L2 reuse's fit (fit_plateau): a level that holds, then falls to nothing, found among the
// points' x with the level back from seeded noise; clear errors where nothing is saved.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "model/cost_model.hpp"
#include "validation/fit/fit_error.hpp"
#include "validation/fit/plateau_fit.hpp"

namespace kvtier::fit {
namespace {

constexpr std::uint64_t kSeed = 20261203;

TEST(PlateauFit, FindsTheLevelAndWhereItFalls) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<double> noise(0.0, 0.02);
  // 1.4 us saved up to 24 MB of working set, nothing from 96 MB: one row's layers at 4.2 MB.
  const double level = 1.4, full = 24e6, none = 96e6;
  std::vector<double> x, y;
  for (int layers = 1; layers <= 32; ++layers) {
    x.push_back(3e6 * layers);
    y.push_back(level * CostModel::l2_reuse_reach(x.back(), full, none) + noise(rng));
  }
  const PlateauFit f = fit_plateau(x, y);
  EXPECT_EQ(f.full, full);
  EXPECT_EQ(f.none, none);
  EXPECT_NEAR(f.level, level, 0.02);
  EXPECT_GT(f.quality.r2, 0.99);
  EXPECT_NEAR(f.predict(60e6), level * 0.5, 0.02);
  EXPECT_EQ(f.predict(200e6), 0.0);
}

TEST(PlateauFit, ALevelStillHeldAtTheLastPointFallsPastIt) {
  // Falling from 10 MB to nothing at 120 MB, measured up to 60 MB: `none` beyond the points.
  std::vector<double> x, y;
  for (int i = 1; i <= 6; ++i) {
    x.push_back(10e6 * i);
    y.push_back(2.0 * CostModel::l2_reuse_reach(x.back(), 10e6, 120e6));
  }
  const PlateauFit f = fit_plateau(x, y);
  EXPECT_EQ(f.full, 10e6);
  EXPECT_EQ(f.none, 120e6);  // twice the last x
  EXPECT_NEAR(f.level, 2.0, 1e-9);
}

TEST(PlateauFit, NothingSavedOrTooFewPointsIsAnError) {
  EXPECT_THROW(fit_plateau(std::vector<double>{1, 2, 3}, std::vector<double>{-1, -1, -1}),
               FitError);
  EXPECT_THROW(fit_plateau(std::vector<double>{1, 2}, std::vector<double>{1, 1}), FitError);
  EXPECT_THROW(fit_plateau(std::vector<double>{5, 5, 5}, std::vector<double>{1, 1, 1}), FitError);
  EXPECT_THROW(fit_plateau(std::vector<double>{1, 2, 3}, std::vector<double>{1, 1}), FitError);
}

}  // namespace
}  // namespace kvtier::fit
