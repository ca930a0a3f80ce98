#include "validation/fit/knee_fit.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "validation/fit/fit_error.hpp"

namespace kvtier::fit {

double KneeFit::predict(double x) const {
  return x <= knee ? intercept + slope_below * x
                   : intercept + slope_below * knee + slope_above * (x - knee);
}

double KneeFit::predict(std::span<const double> x) const {
  double y = predict(x[0]);
  for (std::size_t j = 0; j < other_slopes.size(); ++j)
    y += other_slopes[j] * x[j + 1];
  return y;
}

namespace {

// The distinct values of a series' first input, ascending; FitError unless there are at least
// `need`.
std::vector<double> distinct_x(const Samples& s, std::size_t need) {
  if (s.inputs.empty()) throw FitError("knee fit: no input");
  std::vector<double> xs;
  xs.reserve(s.x.size());
  for (const auto& p : s.x) {
    if (p.size() != s.inputs.size())
      throw FitError("knee fit: a point without exactly " + std::to_string(s.inputs.size()) +
                     " inputs");
    xs.push_back(p[0]);
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  if (xs.size() < need) {
    throw FitError("knee fit of '" + s.inputs[0] + "': " + std::to_string(xs.size()) +
                   " distinct values, at least " + std::to_string(need) + " needed");
  }
  return xs;
}

}  // namespace

KneeFit fit_knee(const Samples& s, bool relative) {
  const std::vector<double> xs = distinct_x(s, 4);
  KneeFit best;
  double best_ss = std::numeric_limits<double>::infinity();
  // The hinge max(0, x - knee) as a second column, the other inputs after it: an ordinary
  // linear fit for each knee.
  Samples hinge{{s.inputs[0], s.inputs[0] + " past the knee"}, {}, s.y};
  hinge.inputs.insert(hinge.inputs.end(), s.inputs.begin() + 1, s.inputs.end());
  hinge.x.resize(s.x.size());
  for (std::size_t c = 1; c + 1 < xs.size(); ++c) {
    const double knee = xs[c];
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      hinge.x[i] = {s.x[i][0], std::max(0.0, s.x[i][0] - knee)};
      hinge.x[i].insert(hinge.x[i].end(), s.x[i].begin() + 1, s.x[i].end());
    }
    LinearFit f;
    try {
      f = fit_linear(hinge, relative);
    } catch (const FitError&) {
      continue;  // the hinge at this knee adds nothing the other inputs do not (rank-deficient)
    }
    double ss = 0;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      const double r = s.y[i] - f.predict(hinge.x[i]);
      ss += relative ? (r / s.y[i]) * (r / s.y[i]) : r * r;
    }
    if (ss < best_ss) {
      best_ss = ss;
      best.knee = knee;
      best.intercept = f.intercept;
      best.slope_below = f.slopes[0];
      best.slope_above = f.slopes[0] + f.slopes[1];
      best.other_slopes.assign(f.slopes.begin() + 2, f.slopes.end());
      best.quality = f.quality;
    }
  }
  if (!(best_ss < std::numeric_limits<double>::infinity()))
    throw FitError("knee fit of '" + s.inputs[0] + "': no knee gives a full-rank fit");
  return best;
}

}  // namespace kvtier::fit
