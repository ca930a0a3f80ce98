#include "sim/profiles.hpp"

#include <filesystem>
#include <stdexcept>

#include "io/input_file.hpp"
#include "model/config_error.hpp"
#include "model/profile_override.hpp"

namespace kvtier::sim {
namespace {

namespace fs = std::filesystem;

bool is_file_name(const std::string& name_or_path) {
  return name_or_path.size() > 5 && name_or_path.ends_with(".json");
}

HardwareProfile builtin(const std::string& name) {
  std::string known;
  for (const auto& p : builtin_profiles()) {
    if (name == p.name) return hardware_profile_from_json(p.json);
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw ConfigError("unknown hardware profile '" + name + "' (known: " + known +
                    "; or give a path to a .json profile)");
}

// `path` as given; `chain`: the files that led here, outermost first (canonical paths), so
// that a file naming itself through its bases is refused rather than recursing forever.
HardwareProfile load_file(const fs::path& path, std::vector<fs::path>& chain) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  const fs::path key = ec ? path : canonical;
  for (const fs::path& f : chain) {
    if (f == key) {
      std::string cycle;
      for (const fs::path& g : chain)
        cycle += g.string() + " -> ";
      throw ConfigError("hardware profile '" + path.string() + "': its bases form a cycle (" +
                        cycle + key.string() + ")");
    }
  }
  if (static_cast<int>(chain.size()) >= kMaxProfileBaseDepth) {
    throw ConfigError("hardware profile '" + path.string() + "': more than " +
                      std::to_string(kMaxProfileBaseDepth) + " profile files over one another");
  }
  std::string text;
  try {
    text = io::read_text_file(path.string(), "hardware profile");
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());  // a base file's is named after the file that names it
  }
  const std::string who = "hardware profile file '" + path.string() + "': ";
  std::optional<std::string> base_name;
  try {
    base_name = profile_override_base(text);
    if (!base_name) return hardware_profile_from_json(text);
  } catch (const ConfigError& e) {
    throw ConfigError(who + e.what());
  }
  HardwareProfile base;
  if (is_file_name(*base_name)) {
    // Relative to the file that names it, so a profile and its base travel together.
    fs::path b(*base_name);
    if (b.is_relative()) b = path.parent_path() / b;
    chain.push_back(key);
    try {
      base = load_file(b, chain);
    } catch (const ConfigError& e) {
      throw ConfigError(who + "base: " + e.what());
    }
    chain.pop_back();
  } else {
    try {
      base = builtin(*base_name);
    } catch (const ConfigError& e) {
      throw ConfigError(who + "base: " + e.what());
    }
  }
  try {
    return apply_profile_override(base, text);
  } catch (const ConfigError& e) {
    throw ConfigError(who + e.what());
  }
}

}  // namespace

HardwareProfile load_profile(const std::string& name_or_path) {
  if (!is_file_name(name_or_path)) return builtin(name_or_path);
  std::vector<fs::path> chain;
  return load_file(name_or_path, chain);
}

}  // namespace kvtier::sim
