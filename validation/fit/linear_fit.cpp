#include "validation/fit/linear_fit.hpp"

#include <Eigen/Dense>
#include <cmath>
#include <string>
#include <vector>

#include "validation/fit/fit_error.hpp"

namespace kvtier::fit {

double LinearFit::predict(std::span<const double> x) const {
  double y = intercept;
  for (std::size_t j = 0; j < slopes.size() && j < x.size(); ++j)
    y += slopes[j] * x[j];
  return y;
}

namespace {

// Relative least squares: the rows [1, x] / y against 1, the intercept a column like the
// others (scaled, not centred).
LinearFit fit_relative(const Samples& s, const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  const Eigen::Index rows = x.rows(), cols = x.cols() + 1;
  Eigen::MatrixXd a(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i) {
    if (!(y(i) > 0))
      throw FitError("fit: point " + std::to_string(i) + ": y must be positive for a relative fit");
    a(i, 0) = 1.0 / y(i);
    for (Eigen::Index j = 1; j < cols; ++j)
      a(i, j) = x(i, j - 1) / y(i);
  }
  Eigen::VectorXd scale(cols);
  for (Eigen::Index j = 0; j < cols; ++j) {
    scale(j) = a.col(j).norm();
    if (!(scale(j) > 0)) {
      throw FitError("fit: input '" + s.inputs[static_cast<std::size_t>(j - 1)] +
                     "' is 0 at every point: its rate cannot be told");
    }
    a.col(j) /= scale(j);
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
  qr.setThreshold(1e-9);
  if (qr.rank() < cols) {
    const Eigen::Index dependent = qr.colsPermutation().indices()(qr.rank());
    const std::string name = dependent == 0 ? std::string("the fixed part")
                                            : s.inputs[static_cast<std::size_t>(dependent - 1)];
    throw FitError("fit: '" + name + "' does not vary independently of the other inputs (rank " +
                   std::to_string(qr.rank()) + " of " + std::to_string(cols) +
                   "): sweep it on its own");
  }
  const Eigen::VectorXd beta = qr.solve(Eigen::VectorXd::Ones(rows));
  LinearFit f;
  f.intercept = beta(0) / scale(0);
  for (Eigen::Index j = 1; j < cols; ++j)
    f.slopes.push_back(beta(j) / scale(j));
  return f;
}

}  // namespace

LinearFit fit_linear(const Samples& s, bool relative) {
  const std::size_t k = s.inputs.size();
  const std::size_t n = s.y.size();
  if (s.x.size() != n)
    throw FitError("fit: " + std::to_string(s.x.size()) + " inputs rows for " + std::to_string(n) +
                   " measured values");
  if (n < k + 2) {
    throw FitError("fit: " + std::to_string(n) + " points for " + std::to_string(k) +
                   " inputs and an intercept; at least " + std::to_string(k + 2) + " needed");
  }
  const Eigen::Index rows = static_cast<Eigen::Index>(n);
  const Eigen::Index cols = static_cast<Eigen::Index>(k);
  Eigen::MatrixXd a(rows, cols);
  Eigen::VectorXd y(rows);
  for (std::size_t i = 0; i < n; ++i) {
    if (s.x[i].size() != k) {
      throw FitError("fit: point " + std::to_string(i) + " has " + std::to_string(s.x[i].size()) +
                     " inputs, expected " + std::to_string(k));
    }
    if (!std::isfinite(s.y[i]))
      throw FitError("fit: point " + std::to_string(i) + ": y not finite");
    y(static_cast<Eigen::Index>(i)) = s.y[i];
    for (std::size_t j = 0; j < k; ++j) {
      if (!std::isfinite(s.x[i][j])) {
        throw FitError("fit: point " + std::to_string(i) + ": " + s.inputs[j] + " not finite");
      }
      a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = s.x[i][j];
    }
  }
  if (relative) {
    LinearFit f = fit_relative(s, a, y);
    std::vector<double> predicted(n);
    for (std::size_t i = 0; i < n; ++i)
      predicted[i] = f.predict(s.x[i]);
    f.quality = fit_quality(s.y, predicted);
    return f;
  }
  // Centring takes the intercept out of the system; scaling makes the columns comparable so
  // that the QR's rank threshold means the same for bytes and for counts.
  const Eigen::RowVectorXd mean = a.colwise().mean();
  a.rowwise() -= mean;
  Eigen::VectorXd scale(cols);
  for (Eigen::Index j = 0; j < cols; ++j) {
    scale(j) = a.col(j).norm();
    if (!(scale(j) > 0)) {
      throw FitError("fit: input '" + s.inputs[static_cast<std::size_t>(j)] +
                     "' is the same at every point: its rate cannot be told from the fixed part");
    }
    a.col(j) /= scale(j);
  }
  const double y_mean = y.mean();
  const Eigen::VectorXd yc = y.array() - y_mean;
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
  qr.setThreshold(1e-9);
  if (qr.rank() < cols) {
    // The pivots past the rank are the columns that the others already explain.
    const Eigen::Index dependent = qr.colsPermutation().indices()(qr.rank());
    throw FitError("fit: input '" + s.inputs[static_cast<std::size_t>(dependent)] +
                   "' does not vary independently of the other inputs (rank " +
                   std::to_string(qr.rank()) + " of " + std::to_string(cols) +
                   "): sweep it on its own");
  }
  const Eigen::VectorXd beta = qr.solve(yc);
  LinearFit f;
  f.slopes.resize(k);
  f.intercept = y_mean;
  for (std::size_t j = 0; j < k; ++j) {
    const Eigen::Index jj = static_cast<Eigen::Index>(j);
    f.slopes[j] = beta(jj) / scale(jj);
    f.intercept -= f.slopes[j] * mean(jj);
  }
  std::vector<double> predicted(n);
  for (std::size_t i = 0; i < n; ++i)
    predicted[i] = f.predict(s.x[i]);
  f.quality = fit_quality(s.y, predicted);
  return f;
}

}  // namespace kvtier::fit
