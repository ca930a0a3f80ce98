#include "sim/profiles.hpp"

#include <fstream>
#include <sstream>

#include "model/config_error.hpp"

namespace kvtier::sim {

HardwareProfile load_profile(const std::string& name_or_path) {
  if (name_or_path.size() > 5 && name_or_path.ends_with(".json")) {
    std::ifstream in(name_or_path);
    if (!in) throw ConfigError("cannot read hardware profile '" + name_or_path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return hardware_profile_from_json(ss.str());
  }
  std::string known;
  for (const auto& p : builtin_profiles()) {
    if (name_or_path == p.name) return hardware_profile_from_json(p.json);
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw ConfigError("unknown hardware profile '" + name_or_path + "' (known: " + known +
                    "; or give a path to a .json profile)");
}

}  // namespace kvtier::sim
