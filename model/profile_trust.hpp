#pragma once
#include <string>

#include "model/hardware_profile.hpp"

namespace kvtier {

// How far to trust figures priced with `p`, in one line for plan and sim output:
//   "validated on <card> <date>: decode median error x %, p95 y %[, prefill median error z %]"
//   "scaled from datasheets, not validated"   (profiles derived from another card's figures)
//   "not validated"
std::string trust_line(const HardwareProfile& p);

}  // namespace kvtier
