#pragma once
#include <string>
#include <vector>

#include "model/hardware_profile.hpp"

namespace kvtier::sim {

struct BuiltinProfile {
  const char* name;
  const char* json;
};
// The profiles of sim/profiles/, built in (sorted by name).
const std::vector<BuiltinProfile>& builtin_profiles();

// A built-in profile by name, or a profile file when `name_or_path` ends in ".json".
// Throws ConfigError listing the known names when there is no such profile.
HardwareProfile load_profile(const std::string& name_or_path);

}  // namespace kvtier::sim
