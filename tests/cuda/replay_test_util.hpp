#pragma once
// Generated traces for the trace replay's tests: a small geometry (rows touch at most 17
// pages) and the records a TraceGenerator yields, in memory.
#include <vector>

#include "model/geometry.hpp"
#include "traces/generator.hpp"
#include "traces/trace_record.hpp"

namespace kvtier::cuda::test {

inline Geometry small_replay_geometry() {
  Geometry g;
  g.total_layers = 6;
  g.qsa_layer_ids = {1, 3, 5};
  g.kv_heads = 1;
  g.head_dim = 64;
  g.compress_ratio = 4;
  g.select_budget = 64;  // 16 blocks: rows touch at most 17 pages
  g.page_size = 16;
  return g;
}

inline std::vector<traces::Record> generated_records(const Geometry& g,
                                                     const traces::GenParams& p) {
  traces::TraceGenerator gen(g, p);
  std::vector<traces::Record> recs;
  traces::Record r;
  while (gen.next(r))
    recs.push_back(r);
  return recs;
}

}  // namespace kvtier::cuda::test
