#pragma once
#include <string_view>
#include <vector>

namespace kvtier {

// One series of the calibration points file: a term of the cost model and the inputs its
// points sweep, in the order the points give them (docs/validation.md, "Series"). The GPU
// calibration writes these series and the fitter reads them: both take the list from here.
struct CalibrationTerm {
  std::string_view term;
  std::vector<std::string_view> inputs;
};

// Every term, in the order of docs/validation.md's table.
const std::vector<CalibrationTerm>& calibration_terms();
// nullptr when `term` is not one of them.
const CalibrationTerm* find_calibration_term(std::string_view term);

}  // namespace kvtier
