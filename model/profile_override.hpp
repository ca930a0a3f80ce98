#pragma once
#include <optional>
#include <string>

#include "model/hardware_profile.hpp"

namespace kvtier {

// A profile file that gives only what it changes over a base (docs/planner.md, "Writing a
// profile"):
//   {"name": "my-card", "base": "h200-pcie5", ["description": "...",]
//    "params": {"<field>": {"value": x, "source": "..."}, ...}}
// Every given field needs its own non-empty source: a figure nobody can trace back is what
// this format exists to prevent. "params" may be empty (a renamed copy of the base). Not
// allowed: "validation" and "scaled_from_datasheets" (a validation belongs to the values it
// was measured with; write a complete profile to carry one), and any other key.
//
// The result is the base with the given fields (and their sources) replaced, named
// "<name> (over <base name>)", the base's description unless one is given, and
// `derived_from` set. A given field counts as changed even at the base's value. When the
// base is validated and a changed field is one its validation covers (validation_covers in
// model/profile_trust.hpp), the validation is dropped; changing only fields it does not cover
// (device_memory_gib, the rest of the model) keeps it.

// The file's "base" when it is an override, nullopt for a complete profile. ConfigError when
// the text is not a JSON object or "base" is not a non-empty string.
std::optional<std::string> profile_override_base(const std::string& json_text);

// The override in `json_text` applied to `base`. ConfigError naming the field at fault: an
// unknown key or parameter, a wrong type, a value without a source, a value out of range.
HardwareProfile apply_profile_override(const HardwareProfile& base, const std::string& json_text);

}  // namespace kvtier
