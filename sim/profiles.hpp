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

// The most profile files one profile may stand on (the file itself and its bases).
inline constexpr int kMaxProfileBaseDepth = 8;

// A built-in profile by name, or a profile file when `name_or_path` ends in ".json": a
// complete profile, or one over a base (model/profile_override.hpp) whose "base" is a
// built-in name or another .json file (a relative path is taken from the directory of the
// file that names it). Throws ConfigError listing the known names when there is no such
// profile, and naming the file (and each base file on the way) and the field for a file at
// fault, a cycle of bases, or more than kMaxProfileBaseDepth files.
HardwareProfile load_profile(const std::string& name_or_path);

}  // namespace kvtier::sim
