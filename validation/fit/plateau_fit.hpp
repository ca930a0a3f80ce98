#pragma once
#include <span>

#include "validation/fit/fit_quality.hpp"

namespace kvtier::fit {

// A level that holds up to `full` and falls linearly to 0 at `none` (0 beyond):
//   y = level * CostModel::l2_reuse_reach(x, full, none).
// What a decode attend saves when the pages the forward before read are still in the L2: all
// of its saving while the forward's working set fits, none once it is far past the cache.
struct PlateauFit {
  double level = 0;
  double full = 0;  // x up to which the whole level holds (0: it falls from the start)
  double none = 0;  // x from which nothing is left
  FitQuality quality;

  double predict(double x) const;
};

// Searches `full` over 0 and the points' distinct x, and `none` over the distinct x above it
// and 1.25, 1.5, 2 and 3 times the largest x (the level may still hold some at the last point),
// the level by least squares for each pair; keeps the pair of the smallest sum of squared
// residuals (ties: the smallest `full`, then `none`). Needs at least 3 points and 2 distinct
// x, finite values and a positive level (FitError otherwise: no saving to price).
PlateauFit fit_plateau(std::span<const double> x, std::span<const double> y);

}  // namespace kvtier::fit
