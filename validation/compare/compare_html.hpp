#pragma once
#include <string>

#include "validation/compare/forward_compare.hpp"

namespace kvtier::validation {

// One self-contained page (inline SVG, no script, no network): predicted against measured per
// forward (log-log scatter, one colour per placement, decode filled and prefill hollow, the
// diagonal and the +-3 % target band), the error distribution of each placement (a histogram
// of (sim - gpu) / gpu), and the figures as tables.
std::string comparison_to_html(const Comparison& c);

}  // namespace kvtier::validation
