#pragma once
// For the trace replay's tests: a small geometry (rows touch at most 17 pages), the records a
// TraceGenerator yields, in memory, and the simulator's decision lines for a mirror pool.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/geometry.hpp"
#include "model/placement.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
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

// The simulator's --decisions lines for the mirror placement with `pool` slots per layer.
inline std::string simulator_decisions(const traces::TraceInput& in, std::int64_t pool,
                                       MirrorPolicy policy = MirrorPolicy::lru) {
  const frontend::TraceBounds stats = frontend::scan_trace(in);
  const CostModel cost(sim::load_profile("h200-pcie5"));
  std::ostringstream out;
  sim::SimConfig c;
  c.placement = Placement::mirror;
  c.pool_slots = pool;
  c.policy = policy;
  c.check_memory = false;
  c.decisions = &out;
  sim::simulate(in, stats, cost, c);
  return out.str();
}

}  // namespace kvtier::cuda::test
