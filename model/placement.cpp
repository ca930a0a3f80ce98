#include "model/placement.hpp"

#include "model/config_error.hpp"

namespace kvtier {

std::string_view to_string(Placement p) {
  switch (p) {
    case Placement::device:
      return "device";
    case Placement::mirror:
      return "mirror";
    case Placement::host:
      return "host";
  }
  return "?";
}

std::string_view to_string(ResidencyUnit u) {
  return u == ResidencyUnit::layer_page ? "layer" : "all-layers";
}

Placement parse_placement(std::string_view text, std::string_view field) {
  if (text == "device") return Placement::device;
  if (text == "mirror") return Placement::mirror;
  if (text == "host") return Placement::host;
  throw ConfigError(std::string(field) + ": expected device, mirror or host, got '" +
                    std::string(text) + "'");
}

ResidencyUnit parse_residency_unit(std::string_view text, std::string_view field) {
  if (text == "layer") return ResidencyUnit::layer_page;
  if (text == "all-layers") return ResidencyUnit::all_layers_page;
  throw ConfigError(std::string(field) + ": expected layer or all-layers, got '" +
                    std::string(text) + "'");
}

}  // namespace kvtier
