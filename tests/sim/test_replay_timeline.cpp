// Hand-computed timelines of one tiny forward for each placement and residency unit. The
// unit profile prices every byte at 1 ns and every fixed cost at 1 ns (sim_fixtures.hpp).
#include <gtest/gtest.h>

#include <sstream>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "sim/replay.hpp"
#include "tests/sim/sim_fixtures.hpp"

namespace kvtier::sim {
namespace {

using testing::add_forward;
using testing::tiny_geometry;
using testing::unit_profile;

// One request of 8 prompt tokens, one decode row at position 8 (page 2 is written).
// Layer 0 selects blocks {0, 3} (pages 0, 1) + tail page 2: 5 tokens, query [2 | 0 1 2].
// Layer 1 selects block {1} (page 0) + tail page 2: 3 tokens, query [2 | 0 2 -].
traces::TraceInput one_forward() {
  const Geometry g = tiny_geometry();
  std::vector<traces::Record> r;
  r.emplace_back(traces::RequestBegin{1, 8, 0, 0});
  add_forward(r, g, {{1, 8, 1, traces::RowKind::decode}}, {{{0, 3}}, {{1}}});
  r.emplace_back(traces::RequestEnd{1});
  traces::TraceHeader h;
  h.geometry = g;
  return traces::memory_trace("one", h, std::move(r));
}

struct Span {
  std::string name;
  int layer;
  TimeNs start, end;
  bool operator==(const Span&) const = default;
};

std::vector<Span> spans(const SimResult& r, Resource res) {
  std::vector<Span> out;
  for (const auto& o : r.timeline) {
    if (o.resource == res) out.push_back({o.name, o.layer, o.start, o.end});
  }
  return out;
}

SimResult run(Placement p, ResidencyUnit u, std::int64_t slots, KvDtype d = KvDtype::bf16) {
  const traces::TraceInput t = one_forward();
  SimConfig c;
  c.placement = p;
  c.unit = u;
  c.pool_slots = slots;
  c.dtype = d;
  c.record_timeline = true;
  return simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
}

// non-QSA: 10 + 1 ns over 2 layers -> 5 ns before each QSA layer (integer share), 0 after.
// index: 3 launches + 4 visible blocks scored + 4 in top-k = 11 ns.
TEST(ReplayTimeline, Device) {
  const SimResult r = run(Placement::device, ResidencyUnit::layer_page, 0);
  // attention: 2 launches + 1 fixed + 5 tokens x 16 B = 83 ns; layer 1: 3 tokens -> 51 ns.
  const std::vector<Span> want = {
      {"non-QSA layers", 0, 0, 5},        {"store+index+top-k", 0, 5, 16},
      {"attention", 0, 16, 99},           {"non-QSA layers", 1, 99, 104},
      {"store+index+top-k", 1, 104, 115}, {"attention", 1, 115, 166}};
  EXPECT_EQ(spans(r, Resource::compute), want);
  EXPECT_EQ(r.compute_end_ns, 166);
  EXPECT_EQ(r.h2d_bytes, 0);
  EXPECT_EQ(r.d2h_bytes, 0);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s(), 1e9 / 166);
}

TEST(ReplayTimeline, MirrorLayerUnit) {
  const SimResult r = run(Placement::mirror, ResidencyUnit::layer_page, 4);
  // ensure: 3 launches + 1 fixed + 4 entries + 4 slots + misses; copy: 1 + misses x 64 B.
  const std::vector<Span> compute = {{"non-QSA layers", 0, 0, 5},
                                     {"store+index+top-k", 0, 5, 16},
                                     {"compact+ensure+translate", 0, 16, 31},
                                     {"attention", 0, 224, 307},
                                     {"non-QSA layers", 1, 307, 312},
                                     {"store+index+top-k", 1, 312, 323},
                                     {"compact+ensure+translate", 1, 323, 337},
                                     {"attention", 1, 466, 517}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  const std::vector<Span> h2d = {{"miss copy", 0, 31, 224}, {"miss copy", 1, 337, 466}};
  EXPECT_EQ(spans(r, Resource::h2d), h2d);
  const std::vector<Span> d2h = {{"mirror store", 0, 16, 33}, {"mirror store", 1, 323, 340}};
  EXPECT_EQ(spans(r, Resource::d2h), d2h);
  EXPECT_EQ(r.copy_bytes, 5 * 64);
  EXPECT_EQ(r.d2h_bytes, 2 * 16);
  EXPECT_EQ(r.total().misses, 5);
  EXPECT_EQ(r.total().hits, 0);
  EXPECT_EQ(r.total().drops, 0);
}

TEST(ReplayTimeline, MirrorAllLayersUnit) {
  const SimResult r = run(Placement::mirror, ResidencyUnit::all_layers_page, 4);
  // One miss copies both layers' K/V (128 B); layer 1 finds pages 0 and 2 resident.
  const std::vector<Span> compute = {{"non-QSA layers", 0, 0, 5},
                                     {"store+index+top-k", 0, 5, 16},
                                     {"compact+ensure+translate", 0, 16, 31},
                                     {"attention", 0, 416, 499},
                                     {"non-QSA layers", 1, 499, 504},
                                     {"store+index+top-k", 1, 504, 515},
                                     {"compact+ensure+translate", 1, 515, 527},
                                     {"attention", 1, 527, 578}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  EXPECT_EQ(r.copy_bytes, 3 * 128);
  EXPECT_EQ(r.layers[1].hits, 2);
  EXPECT_EQ(r.layers[1].misses, 0);
}

TEST(ReplayTimeline, HostInPlace) {
  const SimResult r = run(Placement::host, ResidencyUnit::layer_page, 0);
  // in-place read of 5 (3) tokens: 1 + 80 (48) ns on the H2D link; attention 2 + 1 ns.
  const std::vector<Span> compute = {
      {"non-QSA layers", 0, 0, 5},        {"store+index+top-k", 0, 5, 16},
      {"attention", 0, 97, 100},          {"non-QSA layers", 1, 100, 105},
      {"store+index+top-k", 1, 105, 116}, {"attention", 1, 165, 168}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  const std::vector<Span> h2d = {{"in-place read", 0, 16, 97}, {"in-place read", 1, 116, 165}};
  EXPECT_EQ(spans(r, Resource::h2d), h2d);
  EXPECT_EQ(r.in_place_bytes, 8 * 16);
}

// Both layers select blocks {0, 3} (pages 0, 1) + tail page 2: layer 1's query equals layer 0's,
// [2 | 0 1 2], so what prefetch copies for layer 1 during layer 0 is exactly what it needs.
SimResult run_same_selection(MirrorPolicy policy) {
  const Geometry g = tiny_geometry();
  std::vector<traces::Record> rec;
  rec.emplace_back(traces::RequestBegin{1, 8, 0, 0});
  add_forward(rec, g, {{1, 8, 1, traces::RowKind::decode}}, {{{0, 3}}, {{0, 3}}});
  rec.emplace_back(traces::RequestEnd{1});
  traces::TraceHeader h;
  h.geometry = g;
  const traces::TraceInput t = traces::memory_trace("same", h, std::move(rec));
  SimConfig c;
  c.placement = Placement::mirror;
  c.unit = ResidencyUnit::layer_page;
  c.pool_slots = 4;
  c.policy = policy;
  c.record_timeline = true;
  return simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
}

TEST(ReplayTimeline, LruWithEqualSelectionsMissesInEveryLayer) {
  const SimResult r = run_same_selection(MirrorPolicy::lru);
  // Layer 1 misses its 3 pages again: ensure 3 + 1 + 4 + 4 + 3 = 15 ns, copy 1 + 3 x 64 ns,
  // then attention 83 ns.
  const std::vector<Span> compute = {{"non-QSA layers", 0, 0, 5},
                                     {"store+index+top-k", 0, 5, 16},
                                     {"compact+ensure+translate", 0, 16, 31},
                                     {"attention", 0, 224, 307},
                                     {"non-QSA layers", 1, 307, 312},
                                     {"store+index+top-k", 1, 312, 323},
                                     {"compact+ensure+translate", 1, 323, 338},
                                     {"attention", 1, 531, 614}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  const std::vector<Span> h2d = {{"miss copy", 0, 31, 224}, {"miss copy", 1, 338, 531}};
  EXPECT_EQ(spans(r, Resource::h2d), h2d);
  EXPECT_EQ(r.compute_end_ns, 614);
  EXPECT_EQ(r.layers[1].misses, 3);
}

TEST(ReplayTimeline, PrefetchTurnsTheNextLayersMissesIntoOverlappedCopies) {
  const SimResult r = run_same_selection(MirrorPolicy::prefetch);
  // After layer 0's ensure (ends at 31) its 3 pages are ensured into layer 1's pool and copied
  // on the H2D link behind layer 0's demand copy: 224 .. 417, while the GPU runs layer 0's
  // attention and layer 1's non-QSA, index and ensure (all hits: 3 + 1 + 4 + 4 = 12 ns).
  // Layer 1 copies nothing on demand; its attention waits for the prefetch copy only.
  const std::vector<Span> compute = {{"non-QSA layers", 0, 0, 5},
                                     {"store+index+top-k", 0, 5, 16},
                                     {"compact+ensure+translate", 0, 16, 31},
                                     {"attention", 0, 224, 307},
                                     {"non-QSA layers", 1, 307, 312},
                                     {"store+index+top-k", 1, 312, 323},
                                     {"compact+ensure+translate", 1, 323, 335},
                                     {"attention", 1, 417, 500}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  const std::vector<Span> h2d = {{"miss copy", 0, 31, 224}, {"prefetch copy", 1, 224, 417}};
  EXPECT_EQ(spans(r, Resource::h2d), h2d);
  // The step is 614 - 500 = 114 ns shorter than lru's: layer 1's ensure misses (3 ns) and its
  // serial copy wait (531 - 338 = 193 ns) are replaced by the part of the prefetch copy that
  // outlasts the compute it overlaps (417 - 335 = 82 ns).
  EXPECT_EQ(r.compute_end_ns, 500);
  EXPECT_EQ(r.layers[0].misses, 3);
  EXPECT_EQ(r.layers[1].misses, 0);
  EXPECT_EQ(r.layers[1].hits, 3);
  EXPECT_EQ(r.layers[1].prefetched, 3);
  EXPECT_EQ(r.copy_bytes, 6 * 64);  // the same bytes as lru, moved earlier
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s(), 1e9 / 500);
}

TEST(ReplayTimeline, Fp8MovesCodesAndScales) {
  Geometry g = tiny_geometry();
  // fp8: 2 x (4 B codes + 4 B scale) = 16 B per token, like bf16 in this geometry.
  EXPECT_EQ(g.kv_bytes_per_token(KvDtype::fp8), 16);
  const SimResult r = run(Placement::mirror, ResidencyUnit::layer_page, 4, KvDtype::fp8);
  EXPECT_EQ(r.copy_bytes, 5 * 64);
}

TEST(ReplayTimeline, PoolBelowOneBatchSaysTheMinimum) {
  try {
    run(Placement::mirror, ResidencyUnit::layer_page, 1);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("minimum is 2"), std::string::npos) << e.what();
  }
}

TEST(ReplayTimeline, ChromeTraceIsWellFormed) {
  const SimResult r = run(Placement::mirror, ResidencyUnit::layer_page, 4);
  std::ostringstream os;
  write_chrome_trace(os, r.timeline, tiny_geometry());
  const std::string s = os.str();
  EXPECT_EQ(s.rfind("{\"displayTimeUnit\"", 0), 0u);
  EXPECT_NE(s.find("\"name\":\"miss copy\""), std::string::npos);
  EXPECT_EQ(s.substr(s.size() - 3), "]}\n");
}

}  // namespace
}  // namespace kvtier::sim
