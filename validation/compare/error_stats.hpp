#pragma once
#include <cstdint>
#include <span>

namespace kvtier::validation {

// The relative error of the simulator against the GPU over a set of forwards: per forward
// e = (sim - gpu) / gpu (positive: the simulator predicts slower than the GPU ran), and of
// the totals. Percentiles of |e| by nearest rank over the sorted values: the p-th is the
// value at 1-based rank ceil(p * n); the median of an even count is the mean of the two
// middle values.
struct ErrorStats {
  std::int64_t forwards = 0;
  double median_abs = 0;
  double p95_abs = 0;
  double max_abs = 0;
  double worst = 0;           // the signed error of largest magnitude
  std::int64_t worst_at = 0;  // its index in the set
  double median = 0;          // signed: the bias
  double gpu_total_us = 0;
  double sim_total_us = 0;
  double total = 0;  // (sim total - gpu total) / gpu total
};

// `sim` and `gpu` are the same length; every gpu value > 0. Zero forwards: all zeros.
ErrorStats error_stats(std::span<const double> sim, std::span<const double> gpu);

// The nearest-rank p-quantile (0 < p <= 1) and the median, as ErrorStats defines them, of
// `values` (sorted here; not empty).
double nearest_rank(std::span<const double> values, double p);
double median(std::span<const double> values);

}  // namespace kvtier::validation
