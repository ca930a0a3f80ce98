#include "model/layer_compute.hpp"

namespace kvtier {
namespace {

// The launches of a projection call over `matrices` matrices: one up to the runner's own GEMMs'
// rows (a group is one launch), one per matrix past them (cuBLAS).
int projection_kernels(std::int64_t rows, int matrices) {
  return rows <= kNarrowProjectionRows ? 1 : matrices;
}

}  // namespace

LayerCompute layer_compute(const CostModel& cost, const Geometry& g, const LayerShape& s) {
  constexpr int kSmallKernels = 7;      // norm, RoPE x 2, index queries, compress, expand, gate
  constexpr int kSelectionKernels = 2;  // index scoring, top-k
  LayerCompute c;
  c.before_store_ns =
      cost.kernel_launch_ns(projection_kernels(s.rows, 6) + kSmallKernels + kSelectionKernels) +
      cost.projection_ns(g.input_projection_bytes(), s.rows) + cost.layer_ops_ns(s.rows) +
      cost.indexer_ns(s.row_blocks, index_path(s.rows, s.rows_per_request)) +
      cost.topk_ns(s.row_blocks, topk_path(s.rows, s.max_blocks), s.rows);
  c.output_projection_ns = cost.kernel_launch_ns(projection_kernels(s.rows, 1)) +
                           cost.projection_ns(g.output_projection_bytes(), s.rows);
  return c;
}

}  // namespace kvtier
