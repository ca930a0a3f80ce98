#pragma once
#include <string>

#include "validation/compare/forward_compare.hpp"

namespace kvtier::validation {

// Every figure of a comparison as JSON (docs/validation.md, "Compare"): errors as fractions;
// a set without forwards (e.g. no prefill forwards) is null.
std::string comparison_to_json(const Comparison& c);

}  // namespace kvtier::validation
