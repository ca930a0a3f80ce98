#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier {

// Where a request's KV pages live (docs/architecture.md, "Placements").
enum class Placement : std::uint8_t {
  device,  // every page in GPU memory
  mirror,  // pages in a pinned host bank; the GPU caches N of them, write-through
  host,    // the pool is pinned host memory, read in place over PCIe
};

// What one cached slot holds: one page of one QSA layer (each layer caches on its own), or
// the same page of every QSA layer (one miss brings all layers' K/V of it).
enum class ResidencyUnit : std::uint8_t { layer_page, all_layers_page };

std::string_view to_string(Placement p);
std::string_view to_string(ResidencyUnit u);
// Both throw ConfigError naming `field` and the accepted values.
Placement parse_placement(std::string_view text, std::string_view field = "placement");
ResidencyUnit parse_residency_unit(std::string_view text, std::string_view field = "unit");

}  // namespace kvtier
