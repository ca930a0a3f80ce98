#include "validation/fit/plateau_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "validation/fit/fit_error.hpp"

namespace kvtier::fit {

double PlateauFit::predict(double x) const {
  return level * CostModel::l2_reuse_reach(x, full, none);
}

PlateauFit fit_plateau(std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size() || x.size() < 3)
    throw FitError("plateau fit: at least 3 points of x and y, got " + std::to_string(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]) || x[i] < 0)
      throw FitError("plateau fit: point " + std::to_string(i) + " is not finite or x < 0");
  }
  std::vector<double> xs(x.begin(), x.end());
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  if (xs.size() < 2) throw FitError("plateau fit: at least 2 distinct x");
  std::vector<double> fulls{0.0};
  fulls.insert(fulls.end(), xs.begin(), xs.end());
  std::vector<double> nones = xs;
  for (const double k : {1.25, 1.5, 2.0, 3.0})
    nones.push_back(k * xs.back());
  PlateauFit best;
  double best_ss = std::numeric_limits<double>::infinity();
  for (const double full : fulls) {
    for (const double none : nones) {
      if (none <= full) continue;
      double hy = 0, hh = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double h = CostModel::l2_reuse_reach(x[i], full, none);
        hy += h * y[i];
        hh += h * h;
      }
      if (hh <= 0) continue;
      const double level = hy / hh;
      double ss = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double r = y[i] - level * CostModel::l2_reuse_reach(x[i], full, none);
        ss += r * r;
      }
      if (ss < best_ss) {
        best_ss = ss;
        best.level = level;
        best.full = full;
        best.none = none;
      }
    }
  }
  if (!(best.level > 0)) throw FitError("plateau fit: no positive level (the points save nothing)");
  std::vector<double> predicted(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    predicted[i] = best.predict(x[i]);
  best.quality = fit_quality(y, predicted);
  return best;
}

}  // namespace kvtier::fit
