#include "validation/fit/fit_quality.hpp"

#include <cmath>

namespace kvtier::fit {

FitQuality fit_quality(std::span<const double> measured, std::span<const double> predicted) {
  FitQuality q;
  const std::size_t n = measured.size();
  double mean = 0;
  for (double y : measured)
    mean += y;
  mean /= static_cast<double>(n);
  double ss_res = 0, ss_tot = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = measured[i] - predicted[i];
    const double rel = measured[i] != 0 ? r / std::fabs(measured[i]) : 0.0;
    ss_res += r * r;
    ss_tot += (measured[i] - mean) * (measured[i] - mean);
    if (std::fabs(r) > std::fabs(q.worst_abs)) {
      q.worst_abs = r;
      q.worst_abs_rel = rel;
      q.worst_abs_at = i;
    }
    if (std::fabs(rel) > std::fabs(q.worst_rel)) {
      q.worst_rel = rel;
      q.worst_rel_at = i;
    }
  }
  q.rms = std::sqrt(ss_res / static_cast<double>(n));
  if (ss_tot > 0) {
    q.r2 = 1.0 - ss_res / ss_tot;
  } else {
    q.r2 = ss_res == 0 ? 1.0 : 0.0;
  }
  return q;
}

}  // namespace kvtier::fit
