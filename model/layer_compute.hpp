#pragma once
// What a QSA layer of the model forward (the runner's qsa_layer) costs besides the KV tier's own
// ops (store, residency step, attend), in the runner's launch order: before the store, RMSNorm,
// the six input projections (one call), RoPE of q and k, index queries, compress, index scoring
// (the kernel IndexPath picks), top-k (TopkPath's) and expand; after the attend, the sigmoid
// gate and the output projection. The layer's small kernels are priced together by layer_ops.
// The simulator's model forward and kvtier run's micro-batch choice both price it here.
#include <cstdint>

#include "model/cost_model.hpp"
#include "model/geometry.hpp"

namespace kvtier {

// One layer-step of a forward of `rows` query rows whose rows see `row_blocks` indexer blocks
// in all, at most `max_blocks` a row, and at most `rows_per_request` rows a request.
struct LayerShape {
  std::int64_t rows = 0;
  std::int64_t row_blocks = 0;
  std::int64_t max_blocks = 0;
  std::int64_t rows_per_request = 0;
};

struct LayerCompute {
  std::int64_t before_store_ns = 0;       // the op "projections, index, top-k"
  std::int64_t output_projection_ns = 0;  // the op "gate, output projection"
  std::int64_t total_ns() const { return before_store_ns + output_projection_ns; }
};

// Every term is a kernel term (its graph nodes included): eager (a CostModel without graphs)
// adds each launch's extra over a graph node.
LayerCompute layer_compute(const CostModel& cost, const Geometry& g, const LayerShape& s);

}  // namespace kvtier
