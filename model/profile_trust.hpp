#pragma once
#include <string>
#include <string_view>

#include "model/hardware_profile.hpp"

namespace kvtier {

// How far to trust figures priced with `p`, in one line for plan and sim output:
//   "validated on <card> <date>: decode median error x %, p95 y %[, prefill median error z %]"
//   "scaled from datasheets, not validated"   (profiles derived from another card's figures)
//   "not validated"
// A profile written over a base (model/profile_override.hpp) says what became of the base's
// validation: kept, with the changed fields it does not cover named, or
//   "not validated: <fields> changed over <base>, whose validation does not carry over".
std::string trust_line(const HardwareProfile& p);

// Whether a profile's validation (`kvtier validate compare`, docs/validation.md) speaks for
// this field, so that changing it voids the validation. It compares the QSA layers' forward
// (`sim --forward trace-replay`) with the GPU's, so it covers every priced QSA term, and not
// device_memory_gib (a capacity, never a time) nor non_qsa_forward_us / non_qsa_token_us (the
// rest of the model: outside the compared forward, printed apart with its own source).
bool validation_covers(std::string_view field);

}  // namespace kvtier
