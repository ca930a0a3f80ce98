#include "validation/compare/error_stats.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvtier::validation {

double nearest_rank(std::span<const double> values, double p) {
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(p * n - 1e-9)));
  return v[std::min(rank, v.size()) - 1];
}

double median(std::span<const double> values) {
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

ErrorStats error_stats(std::span<const double> sim, std::span<const double> gpu) {
  ErrorStats s;
  s.forwards = static_cast<std::int64_t>(gpu.size());
  if (gpu.empty()) return s;
  std::vector<double> err(gpu.size()), abs(gpu.size());
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    err[i] = (sim[i] - gpu[i]) / gpu[i];
    abs[i] = std::fabs(err[i]);
    s.gpu_total_us += gpu[i];
    s.sim_total_us += sim[i];
    if (abs[i] > s.max_abs) {
      s.max_abs = abs[i];
      s.worst = err[i];
      s.worst_at = static_cast<std::int64_t>(i);
    }
  }
  s.median_abs = median(abs);
  s.p95_abs = nearest_rank(abs, 0.95);
  s.median = median(err);
  s.total = (s.sim_total_us - s.gpu_total_us) / s.gpu_total_us;
  return s;
}

}  // namespace kvtier::validation
