#pragma once
#include <string_view>
#include <vector>

namespace kvtier::fit {

// One series of the calibration points file: a term of model/cost_model.cpp and the inputs
// its points sweep, in the order the points give them (docs/validation.md, "Series").
struct CalibrationTerm {
  std::string_view term;
  std::vector<std::string_view> inputs;
};

// Every term, in the order of docs/validation.md's table.
const std::vector<CalibrationTerm>& calibration_terms();
// nullptr when `term` is not one of them.
const CalibrationTerm* find_calibration_term(std::string_view term);

}  // namespace kvtier::fit
