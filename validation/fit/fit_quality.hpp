#pragma once
#include <cstddef>
#include <span>

namespace kvtier::fit {

// How well a fit's predictions match the measured y: R² and the worst residuals, each with the
// index of the point where it occurs. A residual is measured - predicted; its relative form
// divides by |measured| (0 where the measured value is 0).
struct FitQuality {
  double r2 = 0;             // 1 - SS_res / SS_tot; 1 when both are 0 (an exact constant)
  double rms = 0;            // root mean square residual, y's unit
  double worst_abs = 0;      // the residual of largest magnitude, signed
  double worst_abs_rel = 0;  // that residual relative to its point's y
  std::size_t worst_abs_at = 0;
  double worst_rel = 0;  // the largest relative residual, signed
  std::size_t worst_rel_at = 0;
};

// `measured` and `predicted` have the same length, at least 1.
FitQuality fit_quality(std::span<const double> measured, std::span<const double> predicted);

}  // namespace kvtier::fit
