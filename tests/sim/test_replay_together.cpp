// simulate_together (one pass, one front end, each layer compacted once for every
// configuration) gives each configuration exactly what simulate gives it alone: every figure,
// every layer's counts, every forward's time and every request's latency and link bytes, over
// placements, units, policies, dtypes and pool sizes from truncating to everything resident,
// on the bundled samples at pools where wide prefill rows bypass the pool (each pool its own
// rows, FrontEnd::plan_rows) and pools where none does.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "frontend/front_end.hpp"
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
    const ForwardTime &x = a.forwards_detail[f], &y = b.forwards_detail[f];
    EXPECT_EQ(x.start_ns, y.start_ns) << i << " fwd " << f;
    EXPECT_EQ(x.span_ns, y.span_ns) << i << " fwd " << f;
    EXPECT_EQ(x.hits, y.hits) << i << " fwd " << f;
    EXPECT_EQ(x.misses, y.misses) << i << " fwd " << f;
    EXPECT_EQ(x.evictions, y.evictions) << i << " fwd " << f;
    EXPECT_EQ(x.drops, y.drops) << i << " fwd " << f;
  }
  // Per request: its times and the link bytes charged to it (bypassed rows' reads included).
  ASSERT_EQ(a.requests.size(), b.requests.size()) << i;
  for (std::size_t r = 0; r < a.requests.size(); ++r) {
    const RequestTimes &x = a.requests[r], &y = b.requests[r];
    EXPECT_EQ(x.id, y.id) << i << " request " << r;
    EXPECT_EQ(x.first_token_ns, y.first_token_ns) << i << " request " << r;
    EXPECT_EQ(x.last_token_ns, y.last_token_ns) << i << " request " << r;
    EXPECT_EQ(x.tpot_ns.p95, y.tpot_ns.p95) << i << " request " << r;
    EXPECT_EQ(x.h2d_bytes, y.h2d_bytes) << i << " request " << r;
  }
  EXPECT_EQ(a.latency.ttft_ns.p95, b.latency.ttft_ns.p95) << i;
  EXPECT_EQ(a.latency.tpot_ns.p95, b.latency.tpot_ns.p95) << i;
  EXPECT_EQ(a.latency.h2d_bytes, b.latency.h2d_bytes) << i;
  EXPECT_EQ(a.latency.link_share.max, b.latency.link_share.max) << i;
}

SimConfig config(Placement p, ResidencyUnit u, std::int64_t slots,
                 MirrorPolicy policy = MirrorPolicy::lru, KvDtype dtype = KvDtype::bf16) {
  SimConfig c;
  c.placement = p;
  c.unit = u;
  c.pool_slots = slots;
  c.policy = policy;
  c.dtype = dtype;
  c.check_memory = false;
  c.record_forwards = true;
  return c;
}

// Forwards in which some row bypasses a mirror pool of `slots` (FrontEnd::plan_rows).
std::int64_t forwards_bypassing(const traces::TraceInput& input,
                                const frontend::TraceBounds& bounds, std::int64_t slots) {
  frontend::FrontEnd fe(input.header.geometry, bounds.peak_pages);
  auto stream = input.open();
  traces::Record rec;
  std::int64_t n = 0;
  while (stream->next(rec)) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      fe.begin(*b);
    } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      fe.end(*e);
    } else {
      fe.prepare(std::get<traces::Forward>(rec));
      fe.plan_rows(slots);
      if (fe.bypassed_rows() > 0) ++n;
    }
  }
  return n;
}

TEST(SimulateTogether, EachConfigurationAsAlone) {
  const traces::TraceInput input =
      traces::file_trace(traces::samples_dir() + "/prefill-shared-prefix.ktr");
  const frontend::TraceBounds bounds = frontend::scan_trace(input);
  const CostModel cost(load_profile("h200-pcie5"));
  std::vector<SimConfig> cfgs;
  auto add = [&](Placement p, ResidencyUnit u, std::int64_t slots, MirrorPolicy policy,
                 KvDtype dtype) { cfgs.push_back(config(p, u, slots, policy, dtype)); };
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
  // Micro-batches keep a front end of their own beside the shared one.
  add(Placement::host, ResidencyUnit::layer_page, 0, MirrorPolicy::lru, KvDtype::bf16);
  cfgs.back().micro_batches = 2;
  add(Placement::mirror, ResidencyUnit::layer_page, 3000, MirrorPolicy::lru, KvDtype::bf16);
  cfgs.back().micro_batches = 3;
  // Wide prefill rows bypass the smaller pools, not the largest.
  EXPECT_GT(forwards_bypassing(input, bounds, 379), 0);
  EXPECT_EQ(forwards_bypassing(input, bounds, 3000), 0);
  std::int64_t reported = 0;
  const std::vector<SimResult> together =
      simulate_together(input, bounds, cost, cfgs, [&](std::int64_t f) { reported = f; });
  ASSERT_EQ(together.size(), cfgs.size());
  EXPECT_EQ(reported, bounds.forwards);
  for (std::size_t i = 0; i < cfgs.size(); ++i)
    expect_same(together[i], simulate(input, bounds, cost, cfgs[i]), i);
  EXPECT_GT(together[2].total().drops, 0);  // the narrowest pool truncates rows
}

// Each bundled sample at pools from the planner's smallest (many prefill rows bypass) to
// every page resident (none does), both units, with device and host in the same pass.
class SimulateTogetherOnSamples : public ::testing::TestWithParam<const char*> {};

TEST_P(SimulateTogetherOnSamples, EachConfigurationAsAlone) {
  const traces::TraceInput input = traces::file_trace(traces::samples_dir() + "/" + GetParam());
  const frontend::TraceBounds bounds = frontend::scan_trace(input);
  const CostModel cost(load_profile("h100-sxm5-pcie5"));
  const std::int64_t smallest = std::int64_t{bounds.max_rows} + bounds.max_write_pages;
  // Every row of the widest forward whole, a prefill row's whole context included.
  const std::int64_t all =
      bounds.max_write_pages +
      std::int64_t{bounds.max_rows} * input.header.geometry.pages_for_context(bounds.max_context);
  std::vector<SimConfig> cfgs = {config(Placement::device, ResidencyUnit::layer_page, 0),
                                 config(Placement::host, ResidencyUnit::layer_page, 0)};
  const std::vector<std::int64_t> pools = {smallest, 3 * smallest, all / 4, all};
  std::int64_t bypassing = 0;
  for (const std::int64_t slots : pools) {
    bypassing += forwards_bypassing(input, bounds, slots);
    cfgs.push_back(config(Placement::mirror, ResidencyUnit::layer_page, slots));
    cfgs.push_back(config(Placement::mirror, ResidencyUnit::all_layers_page, slots));
  }
  EXPECT_GT(bypassing, 0) << "no pool size made a prefill row bypass";
  EXPECT_EQ(forwards_bypassing(input, bounds, all), 0);
  const std::vector<SimResult> together = simulate_together(input, bounds, cost, cfgs);
  ASSERT_EQ(together.size(), cfgs.size());
  for (std::size_t i = 0; i < cfgs.size(); ++i) {
    SCOPED_TRACE(std::string(GetParam()) + " configuration " + std::to_string(i));
    expect_same(together[i], simulate(input, bounds, cost, cfgs[i]), i);
  }
}

INSTANTIATE_TEST_SUITE_P(Samples, SimulateTogetherOnSamples,
                         ::testing::Values("prefill-shared-prefix.ktr", "single-32k-decode1000.ktr",
                                           "concurrent8-16k-128k.ktr"));

}  // namespace
}  // namespace kvtier::sim
