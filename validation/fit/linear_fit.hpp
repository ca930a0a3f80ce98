#pragma once
#include <span>
#include <string>
#include <vector>

#include "validation/fit/fit_quality.hpp"

namespace kvtier::fit {

// Points of y over k inputs: x[i] holds point i's k inputs.
struct Samples {
  std::vector<std::string> inputs;  // k names, for messages and reports
  std::vector<std::vector<double>> x;
  std::vector<double> y;
};

// y = intercept + sum_j slopes[j] * x_j, by least squares.
struct LinearFit {
  double intercept = 0;
  std::vector<double> slopes;  // one per input, in the inputs' order
  FitQuality quality;

  double predict(std::span<const double> x) const;
};

// Least squares through Eigen's column-pivoting Householder QR on centred and scaled columns
// (inputs span bytes to counts: 10^0 .. 10^10; unscaled normal equations would square that).
// Throws FitError with fewer than k + 2 points, non-finite values, a point of the wrong
// length, or inputs that do not vary independently of each other and of the intercept (the
// message names the input that adds no information).
//
// `relative`: least squares of the residuals relative to y (each point weighted 1 / y²), for
// series whose y spans orders of magnitude (a store of 1 token and of 16,384): the small points
// count as much as the large ones. y must then be positive.
LinearFit fit_linear(const Samples& s, bool relative = false);

}  // namespace kvtier::fit
