#pragma once
#include <span>

#include "validation/fit/linear_fit.hpp"

namespace kvtier::fit {

// Two linear pieces of one input joined at a knee (continuous there):
//   y = intercept + slope_below * x                          for x <= knee
//   y = intercept + slope_below * knee + slope_above * (x - knee)  for x >= knee
// The GPU's knees: waves of SMs (a kernel's time steps up when its blocks outgrow one wave),
// small transfers (a fixed latency until the link is busy).
struct KneeFit {
  double knee = 0;
  double intercept = 0;
  double slope_below = 0;
  double slope_above = 0;
  FitQuality quality;

  double predict(double x) const;
};

// Searches the knee over the points' distinct x values, keeping at least two distinct x at or
// below it and two at or above it, and keeps the knee with the smallest sum of squared
// residuals (ties: the smallest knee). One input only; needs at least 4 distinct x (FitError
// otherwise).
// `relative`: each candidate knee fitted, and the knee chosen, by relative residuals
// (fit_linear's relative mode).
KneeFit fit_knee(const Samples& s, bool relative = false);

}  // namespace kvtier::fit
