// simulate_together (one pass, one front end, each layer compacted once for every
// configuration) gives each configuration exactly what simulate gives it alone: every figure,
// every layer's counts and every forward's time, over placements, units, policies, dtypes and
// pool sizes from truncating to everything resident.
#include <gtest/gtest.h>

#include <vector>

#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "traces/trace_io.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {
namespace {

void expect_same(const SimResult& a, const SimResult& b, std::size_t i) {
  EXPECT_EQ(a.forwards, b.forwards) << i;
  EXPECT_EQ(a.decode_tokens, b.decode_tokens) << i;
  EXPECT_EQ(a.prefill_tokens, b.prefill_tokens) << i;
  EXPECT_EQ(a.compute_end_ns, b.compute_end_ns) << i;
  EXPECT_EQ(a.makespan_ns, b.makespan_ns) << i;
  EXPECT_EQ(a.decode_time_ns, b.decode_time_ns) << i;
  EXPECT_EQ(a.prefill_time_ns, b.prefill_time_ns) << i;
  EXPECT_EQ(a.h2d_bytes, b.h2d_bytes) << i;
  EXPECT_EQ(a.d2h_bytes, b.d2h_bytes) << i;
  EXPECT_EQ(a.copy_bytes, b.copy_bytes) << i;
  EXPECT_EQ(a.in_place_bytes, b.in_place_bytes) << i;
  EXPECT_EQ(a.hbm_read_bytes, b.hbm_read_bytes) << i;
  for (int r = 0; r < kResources; ++r)
    EXPECT_EQ(a.busy_ns[r], b.busy_ns[r]) << i << " resource " << r;
  EXPECT_EQ(a.device_bytes, b.device_bytes) << i;
  EXPECT_EQ(a.host_bytes, b.host_bytes) << i;
  EXPECT_EQ(a.select_width_min, b.select_width_min) << i;
  ASSERT_EQ(a.layers.size(), b.layers.size()) << i;
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const LayerStats &x = a.layers[l], &y = b.layers[l];
    EXPECT_EQ(x.lookups, y.lookups) << i << " layer " << l;
    EXPECT_EQ(x.hits, y.hits) << i << " layer " << l;
    EXPECT_EQ(x.misses, y.misses) << i << " layer " << l;
    EXPECT_EQ(x.bypassed, y.bypassed) << i << " layer " << l;
    EXPECT_EQ(x.evictions, y.evictions) << i << " layer " << l;
    EXPECT_EQ(x.drops, y.drops) << i << " layer " << l;
    EXPECT_EQ(x.prefetched, y.prefetched) << i << " layer " << l;
  }
  ASSERT_EQ(a.forwards_detail.size(), b.forwards_detail.size()) << i;
  for (std::size_t f = 0; f < a.forwards_detail.size(); ++f) {
    EXPECT_EQ(a.forwards_detail[f].span_ns, b.forwards_detail[f].span_ns) << i << " fwd " << f;
    EXPECT_EQ(a.forwards_detail[f].misses, b.forwards_detail[f].misses) << i << " fwd " << f;
  }
}

TEST(SimulateTogether, EachConfigurationAsAlone) {
  const traces::TraceInput input =
      traces::file_trace(traces::samples_dir() + "/prefill-shared-prefix.ktr");
  const frontend::TraceBounds bounds = frontend::scan_trace(input);
  const CostModel cost(load_profile("h200-pcie5"));
  std::vector<SimConfig> cfgs;
  auto add = [&](Placement p, ResidencyUnit u, std::int64_t slots, MirrorPolicy policy,
                 KvDtype dtype) {
    SimConfig c;
    c.placement = p;
    c.unit = u;
    c.pool_slots = slots;
    c.policy = policy;
    c.dtype = dtype;
    c.check_memory = false;
    c.record_forwards = true;
    cfgs.push_back(c);
  };
  add(Placement::device, ResidencyUnit::layer_page, 0, MirrorPolicy::lru, KvDtype::bf16);
  add(Placement::host, ResidencyUnit::layer_page, 0, MirrorPolicy::lru, KvDtype::bf16);
  // From below the no-truncation size (rows cut to the width, pages dropped) to every page.
  for (std::int64_t slots : {379, 500, 816, 3000}) {
    add(Placement::mirror, ResidencyUnit::layer_page, slots, MirrorPolicy::lru, KvDtype::bf16);
    add(Placement::mirror, ResidencyUnit::all_layers_page, slots, MirrorPolicy::lru, KvDtype::bf16);
  }
  add(Placement::mirror, ResidencyUnit::layer_page, 500, MirrorPolicy::hybrid, KvDtype::bf16);
  add(Placement::mirror, ResidencyUnit::layer_page, 500, MirrorPolicy::prefetch, KvDtype::bf16);
  add(Placement::mirror, ResidencyUnit::layer_page, 500, MirrorPolicy::lru, KvDtype::fp8);
  std::int64_t reported = 0;
  const std::vector<SimResult> together =
      simulate_together(input, bounds, cost, cfgs, [&](std::int64_t f) { reported = f; });
  ASSERT_EQ(together.size(), cfgs.size());
  EXPECT_EQ(reported, bounds.forwards);
  for (std::size_t i = 0; i < cfgs.size(); ++i)
    expect_same(together[i], simulate(input, bounds, cost, cfgs[i]), i);
  EXPECT_GT(together[2].total().drops, 0);  // the narrowest pool truncates rows
}

}  // namespace
}  // namespace kvtier::sim
