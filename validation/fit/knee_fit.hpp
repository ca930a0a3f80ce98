#pragma once
#include <span>
#include <vector>

#include "validation/fit/linear_fit.hpp"

namespace kvtier::fit {

// Two linear pieces of the first input joined at a knee (continuous there), plus a line in any
// further inputs (the fp8 attend's rows):
//   y = intercept + slope_below * x                          + sum others   for x <= knee
//   y = intercept + slope_below * knee + slope_above * (x - knee) + sum others  for x >= knee
// where others = other_slopes[j] * x_{j+1}.
// The GPU's knees: waves of SMs (a kernel's time steps up when its blocks outgrow one wave),
// small transfers (a fixed latency until the link is busy).
struct KneeFit {
  double knee = 0;
  double intercept = 0;
  double slope_below = 0;
  double slope_above = 0;
  std::vector<double> other_slopes;  // one per input after the first
  FitQuality quality;

  double predict(double x) const;                   // one input
  double predict(std::span<const double> x) const;  // all inputs
};

// Searches the knee over the points' distinct x values, keeping at least two distinct x at or
// below it and two at or above it, and keeps the knee with the smallest sum of squared
// residuals (ties: the smallest knee). The knee is on the first input; needs at least 4 distinct
// values of it (FitError otherwise).
// `relative`: each candidate knee fitted, and the knee chosen, by relative residuals
// (fit_linear's relative mode).
KneeFit fit_knee(const Samples& s, bool relative = false);

}  // namespace kvtier::fit
