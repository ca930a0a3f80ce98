#pragma once
#include <cstdint>

#include "model/hd.hpp"

namespace kvtier {

// Step stamps order every ensure of a replay: the victims are the slots of the smallest
// stamp, so every backend must stamp the same ensure alike to make the same decisions.
// A layer-step (one QSA layer of one forward) owns two stamps: its demand ensure takes the
// odd one, and a prefetch issued while the layer runs takes the next, so that it lies strictly
// between this layer's and the next layer's demand ensures.
inline constexpr std::int64_t kStampsPerLayerStep = 2;

// The layer-step index of QSA layer `layer` in forward `forward` of a stack of `layers`.
KVT_HD constexpr std::int64_t layer_step(std::int64_t forward, int layers, int layer) {
  return forward * layers + layer;
}
KVT_HD constexpr std::int64_t demand_stamp(std::int64_t layer_step_index) {
  return layer_step_index * kStampsPerLayerStep + 1;
}
KVT_HD constexpr std::int64_t prefetch_stamp(std::int64_t layer_step_index) {
  return demand_stamp(layer_step_index) + 1;
}

}  // namespace kvtier
