#pragma once
// The GPU calibration of the cost model (issue 15, item 2; docs/validation.md): times the real
// kernels and copies the CUDA backend runs, swept over what each cost depends on, on device 0.
#include <cstdint>
#include <functional>
#include <string>

#include "cuda/calibrate/points.hpp"

namespace kvtier::calibrate {

struct CalibrationOptions {
  bool quick = false;  // the small grid (tests): a few seconds
  int repeats = 11;    // timed repetitions per point; the median is kept
  std::string command = "kvtier validate calibrate";  // recorded in the points file
  std::uint64_t seed = 20261202;                      // selections, page tables, misses
};

// Called after each sweep with the sweep, how many are done and how many there are.
using CalibrationProgress = std::function<void(const Series& s, int done, int total)>;

// Runs every sweep (calibration_grid(o.quick)) and returns their points with the card, driver,
// date and command. Throws ConfigError when there is no CUDA device ("needs a GPU"), CudaError
// for a failing CUDA call, std::logic_error when a benchmark's inputs did not do what they were
// built to (a residency step with errors, say).
Points run_calibration(const CalibrationOptions& o, const CalibrationProgress& progress = {});

}  // namespace kvtier::calibrate
