// Hand-computed timelines of one tiny forward for each placement and residency unit. The
// unit profile prices every byte at 1 ns and every fixed cost at 1 ns (sim_fixtures.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

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

// one_forward() after a decode forward of another request that missed one page per layer: the
// model forward then reads in place (frontend::decode_reads_in_place), as the runner does in
// its steady state; the first forward of a run (a cold pool) runs the step first.
traces::TraceInput warm_one_forward() {
  const Geometry g = tiny_geometry();
  std::vector<traces::Record> r;
  r.emplace_back(traces::RequestBegin{2, 1, 0, 0});
  add_forward(r, g, {{2, 0, 1, traces::RowKind::decode}}, {{{}}, {{}}});
  r.emplace_back(traces::RequestEnd{2});
  r.emplace_back(traces::RequestBegin{1, 8, 0, 0});
  add_forward(r, g, {{1, 8, 1, traces::RowKind::decode}}, {{{0, 3}}, {{1}}});
  r.emplace_back(traces::RequestEnd{1});
  traces::TraceHeader h;
  h.geometry = g;
  return traces::memory_trace("warm", h, std::move(r));
}

struct Span {
  std::string name;
  int layer;
  TimeNs start, end;
  bool operator==(const Span&) const = default;
};

void PrintTo(const Span& x, std::ostream* os) {
  *os << "{\"" << x.name << "\", " << x.layer << ", " << x.start << ", " << x.end << "}";
}

std::vector<Span> spans(const SimResult& r, Resource res) {
  std::vector<Span> out;
  for (const auto& o : r.timeline) {
    if (o.resource == res) out.push_back({o.name, o.layer, o.start, o.end});
  }
  return out;
}

// The spans of forward `forward` on `res`, in time from that forward's start.
std::vector<Span> spans_of(const SimResult& r, Resource res, std::int64_t forward) {
  TimeNs start = -1;
  for (const auto& o : r.timeline)
    if (o.forward == forward && (start < 0 || o.start < start)) start = o.start;
  std::vector<Span> out;
  for (const auto& o : r.timeline) {
    if (o.resource == res && o.forward == forward)
      out.push_back({o.name, o.layer, o.start - start, o.end - start});
  }
  return out;
}

TimeNs forward_start(const SimResult& r, std::int64_t forward) {
  TimeNs start = -1;
  for (const auto& o : r.timeline)
    if (o.forward == forward && (start < 0 || o.start < start)) start = o.start;
  return start;
}

SimResult run(Placement p, ResidencyUnit u, std::int64_t slots, KvDtype d = KvDtype::bf16,
              const HardwareProfile& profile = unit_profile(), bool warm = false) {
  const traces::TraceInput t = warm ? warm_one_forward() : one_forward();
  SimConfig c;
  c.placement = p;
  c.unit = u;
  c.pool_slots = slots;
  c.dtype = d;
  c.record_timeline = true;
  return simulate(t, frontend::scan_trace(t), CostModel(profile), c);
}

// The model forward as the runner launches it (frontend::layer_schedule): per QSA layer the
// non-QSA layers before it, projections + index + top-k, [mirror copy-first: the residency
// step], the store, [mirror in place: the residency step beside], the attention, the gate and
// output projection. non-QSA: 10 + 1 ns over 2 layers -> 5 ns before each QSA layer (integer
// share), 0 after. projections, index, top-k: the input projections' call 1 ns + the index 1 fixed
// + 4 visible blocks scored + top-k 1 fixed + 4 = 11 ns (the layer's small kernels priced at 0
// here); gate, output projection: its call, 1 ns. store: into the pool 1 fixed + 16 B per token;
// into the host bank 1 fixed + 16 B per token, + 16 B per token into the pool where it writes both
// (no knee in the unit profile). The store, the step and the attention add no launch: their terms
// hold their graph nodes.
TEST(ReplayTimeline, Device) {
  const SimResult r = run(Placement::device, ResidencyUnit::layer_page, 0);
  // store: 1 + 16 = 17 ns. attention: 1 fixed + 1 CTA + 5 tokens x 16 B = 82 ns; layer 1:
  // 3 tokens -> 50 ns.
  const std::vector<Span> want = {{"non-QSA layers", 0, 0, 5},
                                  {"projections, index, top-k", 0, 5, 16},
                                  {"store", 0, 16, 33},
                                  {"attend", 0, 33, 115},
                                  {"gate, output projection", 0, 115, 116},
                                  {"non-QSA layers", 1, 116, 121},
                                  {"projections, index, top-k", 1, 121, 132},
                                  {"store", 1, 132, 149},
                                  {"attend", 1, 149, 199},
                                  {"gate, output projection", 1, 199, 200}};
  EXPECT_EQ(spans(r, Resource::compute), want);
  EXPECT_EQ(r.compute_end_ns, 200);
  EXPECT_EQ(r.h2d_bytes, 0);
  EXPECT_EQ(r.d2h_bytes, 0);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s(), 1e9 / 200);
}

// The model forward prices the runner's projections and small kernels: the input projections'
// call and the layer's small kernels before the index, the output projection's call after the
// attend, each by its term (here: their fixed parts raised).
TEST(ReplayTimeline, TheModelForwardPricesItsProjectionsAndSmallKernels) {
  HardwareProfile p = unit_profile();
  p.projection_fixed_us += 0.1;  // + 100 ns a projection call
  p.layer_ops_fixed_us += 0.05;  // + 50 ns a layer-step
  const SimResult base = run(Placement::device, ResidencyUnit::layer_page, 0);
  const SimResult r = run(Placement::device, ResidencyUnit::layer_page, 0, KvDtype::bf16, p);
  const std::vector<Span> a = spans(base, Resource::compute), b = spans(r, Resource::compute);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const TimeNs grew = (b[i].end - b[i].start) - (a[i].end - a[i].start);
    const TimeNs want = a[i].name == "projections, index, top-k" ? 150
                        : a[i].name == "gate, output projection" ? 100
                                                                 : 0;
    EXPECT_EQ(grew, want) << a[i].name << " of layer " << a[i].layer;
  }
  EXPECT_EQ(r.compute_end_ns - base.compute_end_ns, 2 * 250);
}

// bf16 mirror, layer unit: the backend's default, the attention reading its misses in place
// while the residency step runs beside it.
TEST(ReplayTimeline, MirrorLayerUnit) {
  const SimResult r =
      run(Placement::mirror, ResidencyUnit::layer_page, 4, KvDtype::bf16, unit_profile(), true);
  // The forward after the warm one (times from its start):
  // One launch locates every layer's table first. Layer 0: the store writes the host bank only
  // (page 2 is not resident yet): 1 + 16 = 17 ns, the link's share beside it. The step beside
  // (1 fixed + 4 page entries + 4 slots + 3 misses = 12 ns, 34 .. 46; layer 1's query has 3
  // pages and a padding entry: 10 ns); the attention reads its 5
  // tokens in place (80 ns on the link from 34: the attend's reads, no latency of their own)
  // and then runs 1 + 1 CTA = 2 ns; the step's copy (1 + 3 x 64 ns) queues behind that read on
  // the link (114 .. 307). Layer 1's top-k waits for layer 0's step.
  const std::vector<Span> compute = {{"locate tables", -1, 0, 1},
                                     {"non-QSA layers", 0, 1, 6},
                                     {"projections, index, top-k", 0, 6, 17},
                                     {"store", 0, 17, 34},
                                     {"attend", 0, 114, 116},
                                     {"gate, output projection", 0, 116, 117},
                                     {"non-QSA layers", 1, 117, 122},
                                     {"projections, index, top-k", 1, 307, 318},
                                     {"store", 1, 318, 335},
                                     {"attend", 1, 383, 385},
                                     {"gate, output projection", 1, 385, 386}};
  EXPECT_EQ(spans_of(r, Resource::compute, 1), compute);
  const std::vector<Span> beside = {{"residency step", 0, 34, 46}, {"residency step", 1, 335, 345}};
  EXPECT_EQ(spans_of(r, Resource::beside, 1), beside);
  // The store's write into the host bank shares the link with the step's copy and the reads.
  const std::vector<Span> h2d = {{"write-through", 0, 17, 34},   {"in-place read", 0, 34, 114},
                                 {"miss copy", 0, 114, 307},     {"write-through", 1, 318, 335},
                                 {"in-place read", 1, 335, 383}, {"miss copy", 1, 383, 512}};
  EXPECT_EQ(spans_of(r, Resource::h2d, 1), h2d);
  EXPECT_TRUE(spans_of(r, Resource::d2h, 1).empty());  // (the warm forward's write: step first)
  // the forward ends with layer 1's step (its copy)
  EXPECT_EQ(r.compute_end_ns - forward_start(r, 1), 512);
  // The warm forward ran its step first (cold pool): 1 page copied per layer, none in place,
  // its token written through in each layer.
  EXPECT_EQ(r.copy_bytes, (2 + 5) * 64);
  EXPECT_EQ(r.in_place_bytes, 8 * 16);
  EXPECT_EQ(r.d2h_bytes, (2 + 2) * 16);
  EXPECT_EQ(r.total().misses, 2 + 5);
  EXPECT_EQ(r.total().hits, 0);
  EXPECT_EQ(r.total().drops, 0);
}

// The step beside is priced by its own terms (step_beside: MirrorEngine::
// residency_beside_async), not the full-grid step's; the decisions do not move.
TEST(ReplayTimeline, TheStepBesideIsPricedByItsOwnTerms) {
  HardwareProfile p = unit_profile();
  p.step_beside_fixed_us = 0.101;  // 101 ns where the full-grid step's is 1
  const SimResult base =
      run(Placement::mirror, ResidencyUnit::layer_page, 4, KvDtype::bf16, unit_profile(), true);
  const SimResult r = run(Placement::mirror, ResidencyUnit::layer_page, 4, KvDtype::bf16, p, true);
  const std::vector<Span> b0 = spans_of(base, Resource::beside, 1),
                          b1 = spans_of(r, Resource::beside, 1);
  ASSERT_EQ(b0.size(), 2u);
  ASSERT_EQ(b1.size(), 2u);
  EXPECT_EQ(b1[0].start, b0[0].start);
  EXPECT_EQ(b1[0].end - b1[0].start, b0[0].end - b0[0].start + 100);
  EXPECT_EQ(r.total().misses, base.total().misses);
  EXPECT_EQ(r.total().hits, base.total().hits);
  EXPECT_EQ(r.total().evictions, base.total().evictions);
  // A full-grid step (the fp8 mirror runs its step first, on the forward's stream) keeps
  // ensure_*'s price.
  const SimResult f0 = run(Placement::mirror, ResidencyUnit::layer_page, 4, KvDtype::fp8);
  const SimResult f1 = run(Placement::mirror, ResidencyUnit::layer_page, 4, KvDtype::fp8, p);
  EXPECT_EQ(f1.compute_end_ns, f0.compute_end_ns);
}

// The trace replay's bf16 mirror in place (no join within two layers): each layer's step
// beside is one kernel (compaction, ensure, miss copy) on one stream, so layer 1's step starts
// once layer 0's copy is done, not beside it; and the stores' writes into the host bank queue
// on the link with the copies and the in-place reads (the H200's mirror prefill forwards took
// the writes and the copies one after the other).
// Locate 0 .. 1. Layer 0: store into the host bank 1 .. 18 (its write on the link), step
// 18 .. 30 (1 + 4 page entries + 4 slots + 3 misses), the attend's in-place read of 5 tokens
// 18 .. 98, then the copy (1 + 3 x 64) 98 .. 291; attend 98 .. 100. Layer 1: store 100 .. 117,
// its write on the link 291 .. 308; the step (1 + 3 page entries, its 4th is padding, + 4 +
// 2 misses) after layer 0's copy, 291 .. 301; the read of 3 tokens 308 .. 356; the copy
// (1 + 2 x 64) 356 .. 485.
TEST(ReplayTimeline, TraceReplayMirrorStepsBesideRunOneAfterAnother) {
  const traces::TraceInput t = warm_one_forward();  // forward 1 reads in place
  SimConfig c;
  c.placement = Placement::mirror;
  c.forward = frontend::ForwardKind::trace_replay;
  c.pool_slots = 4;
  c.record_timeline = true;
  const SimResult r = simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
  const std::vector<Span> beside = {{"residency step", 0, 18, 30}, {"residency step", 1, 291, 301}};
  EXPECT_EQ(spans_of(r, Resource::beside, 1), beside);
  const std::vector<Span> h2d = {{"write-through", 0, 1, 18},    {"in-place read", 0, 18, 98},
                                 {"miss copy", 0, 98, 291},      {"write-through", 1, 291, 308},
                                 {"in-place read", 1, 308, 356}, {"miss copy", 1, 356, 485}};
  EXPECT_EQ(spans_of(r, Resource::h2d, 1), h2d);
  EXPECT_EQ(r.compute_end_ns - forward_start(r, 1), 485);
}

// The same forward on a card whose attend leaves the SMs of two steps beside
// (frontend::beside_steps: one CTA a row and KV head here, 132 SMs): layer 1's step takes the
// second lane, so it starts once its store is done (100 .. 117), beside layer 0's step and copy,
// not after that copy (291); it costs what it cost on the one lane (10 ns). The link still ends
// this forward (its copies and in-place reads queue there, as on one lane: 485 ns).
TEST(ReplayTimeline, TraceReplayMirrorStepsBesideTakeTwoLanesWhereTheAttendLeavesRoom) {
  const traces::TraceInput t = warm_one_forward();
  SimConfig c;
  c.placement = Placement::mirror;
  c.forward = frontend::ForwardKind::trace_replay;
  c.pool_slots = 4;
  c.record_timeline = true;
  HardwareProfile p = unit_profile();
  p.sm_count = 132;
  const SimResult r = simulate(t, frontend::scan_trace(t), CostModel(p), c);
  const std::vector<Span> first = {{"residency step", 0, 18, 30}};
  const std::vector<Span> second = {{"residency step", 1, 117, 127}};
  EXPECT_EQ(spans_of(r, Resource::beside, 1), first);
  EXPECT_EQ(spans_of(r, Resource::beside_second, 1), second);
  EXPECT_EQ(r.compute_end_ns - forward_start(r, 1), 485);
  // the decisions do not depend on the lanes
  const SimResult one = simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
  EXPECT_EQ(r.total().hits, one.total().hits);
  EXPECT_EQ(r.total().misses, one.total().misses);
  EXPECT_EQ(r.total().evictions, one.total().evictions);
  // the model forward keeps one lane
  c.forward = frontend::ForwardKind::model;
  EXPECT_TRUE(spans(simulate(t, frontend::scan_trace(t), CostModel(p), c), Resource::beside_second)
                  .empty());
}

// The all-layers unit runs the step first (the backend locates per layer only): the step
// (1 + 4 + 4 + 3 = 12 ns), its copy (1 + 3 x 128 ns: one miss brings both layers' K/V), the
// store into the pool (its page installed) and the host bank (16 + 1 + 16 = 33 ns), then
// the attention reading the pool. Layer 1 finds pages 0 and 2 resident: an all-hit step
// searches no slot (1 + 4 entries = 5 ns).
TEST(ReplayTimeline, MirrorAllLayersUnit) {
  const SimResult r = run(Placement::mirror, ResidencyUnit::all_layers_page, 4);
  const std::vector<Span> compute = {
      {"non-QSA layers", 0, 0, 5},     {"projections, index, top-k", 0, 5, 16},
      {"residency step", 0, 16, 28},   {"store", 0, 413, 446},
      {"attend", 0, 446, 528},         {"gate, output projection", 0, 528, 529},
      {"non-QSA layers", 1, 529, 534}, {"projections, index, top-k", 1, 534, 545},
      {"residency step", 1, 545, 550}, {"store", 1, 550, 583},
      {"attend", 1, 583, 633},         {"gate, output projection", 1, 633, 634}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  EXPECT_EQ(r.copy_bytes, 3 * 128);
  EXPECT_EQ(r.layers[1].hits, 2);
  EXPECT_EQ(r.layers[1].misses, 0);
}

TEST(ReplayTimeline, HostInPlace) {
  const SimResult r = run(Placement::host, ResidencyUnit::layer_page, 0);
  // store into the host bank: 1 + 16 = 17 ns; in-place read of 5 (3) tokens: 80 (48) ns
  // on the H2D link; attention 1 fixed + 1 CTA.
  const std::vector<Span> compute = {{"non-QSA layers", 0, 0, 5},
                                     {"projections, index, top-k", 0, 5, 16},
                                     {"store", 0, 16, 33},
                                     {"attend", 0, 113, 115},
                                     {"gate, output projection", 0, 115, 116},
                                     {"non-QSA layers", 1, 116, 121},
                                     {"projections, index, top-k", 1, 121, 132},
                                     {"store", 1, 132, 149},
                                     {"attend", 1, 197, 199},
                                     {"gate, output projection", 1, 199, 200}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  const std::vector<Span> h2d = {{"in-place read", 0, 33, 113}, {"in-place read", 1, 149, 197}};
  EXPECT_EQ(spans(r, Resource::h2d), h2d);
  EXPECT_EQ(r.in_place_bytes, 8 * 16);
}

// The trace replay's forward (kvtier run --trace): no non-QSA layers and no indexer, the
// layers back to back; the span per forward is what the GPU replay times.
TEST(ReplayTimeline, TraceReplayForwardIsTheReplaysSpan) {
  const traces::TraceInput t = one_forward();
  SimConfig c;
  c.placement = Placement::device;
  c.forward = frontend::ForwardKind::trace_replay;
  c.record_timeline = true;
  c.record_forwards = true;
  const SimResult r = simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
  const std::vector<Span> want = {
      {"store", 0, 0, 17}, {"attend", 0, 17, 99}, {"store", 1, 99, 116}, {"attend", 1, 116, 166}};
  EXPECT_EQ(spans(r, Resource::compute), want);
  ASSERT_EQ(r.forwards_detail.size(), 1u);
  EXPECT_EQ(r.forwards_detail[0].span_ns, 166);
  EXPECT_EQ(r.forwards_detail[0].decode_tokens, 1);
}

// The simulator prices the list the backend launches from: per layer, the ops on the
// forward's stream and on the stream beside it are frontend::layer_schedule's, in its order
// (plus the locate before the first layer; the link's reads and copies those ops cause run on
// the link's own resources).
TEST(ReplayTimeline, OpsFollowTheBackendsSchedule) {
  using frontend::ForwardKind;
  for (Placement p : {Placement::device, Placement::host, Placement::mirror}) {
    for (ForwardKind k : {ForwardKind::model, ForwardKind::trace_replay}) {
      for (int order = 0; order < 3; ++order) {  // in place, --copy-first, prefetch policy
        const bool copy_first = order == 1;
        const bool prefetch = order == 2 && p == Placement::mirror;
        // the forward after a warm one: the model's decode reads in place there
        const traces::TraceInput t = warm_one_forward();
        SimConfig c;
        c.placement = p;
        c.forward = k;
        c.copy_first = copy_first;
        c.policy = prefetch ? MirrorPolicy::prefetch : MirrorPolicy::lru;
        c.pool_slots = p == Placement::mirror ? 4 : 0;
        c.record_timeline = true;
        const SimResult r = simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
        const frontend::ScheduleShape shape{p, k, !copy_first && !prefetch, prefetch};
        for (Resource lane : {Resource::compute, Resource::beside}) {
          std::vector<std::string> want, got;
          if (lane == Resource::compute && frontend::locates_first(shape))
            want.emplace_back("locate tables");
          for (int l = 0; l < 2; ++l)
            for (const frontend::ScheduledOp& op : frontend::layer_schedule(shape))
              if ((op.lane == frontend::Lane::beside) == (lane == Resource::beside) &&
                  (op.op != frontend::LayerOp::prefetch || l + 1 < 2))  // none after the last
                want.emplace_back(frontend::to_string(op.op));
          for (const Span& x : spans_of(r, lane, 1))
            got.push_back(x.name);  // a resource runs its ops in order: by start time
          EXPECT_EQ(got, want) << to_string(p) << (k == ForwardKind::model ? " model" : " replay")
                               << (copy_first ? " copy-first" : "") << (prefetch ? " prefetch" : "")
                               << " on " << resource_name(lane);
        }
      }
    }
  }
}

// Both forwards (the runner's and the trace replay's) read a decode forward's misses in place
// only in the steady state of decode: the first forward (a cold pool) runs its step first, on
// the forward's stream; the next one, after a forward that missed a page per row and layer,
// runs it beside.
TEST(ReplayTimeline, DecodeReadsInPlaceOnlyInTheSteadyState) {
  const traces::TraceInput t = warm_one_forward();
  for (frontend::ForwardKind k :
       {frontend::ForwardKind::model, frontend::ForwardKind::trace_replay}) {
    SimConfig c;
    c.placement = Placement::mirror;
    c.forward = k;
    c.pool_slots = 4;
    c.record_timeline = true;
    const SimResult r = simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
    EXPECT_TRUE(spans_of(r, Resource::beside, 0).empty());
    EXPECT_FALSE(spans_of(r, Resource::beside, 1).empty());
    int steps_on_main = 0;
    for (const Span& x : spans_of(r, Resource::compute, 0))
      steps_on_main += x.name == "residency step" ? 1 : 0;
    EXPECT_EQ(steps_on_main, 2);
  }
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
  c.copy_first = true;  // the policies' comparison, with the step before the attention
  c.record_timeline = true;
  return simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
}

TEST(ReplayTimeline, LruWithEqualSelectionsMissesInEveryLayer) {
  const SimResult r = run_same_selection(MirrorPolicy::lru);
  // Layer 1 misses its 3 pages again: step 1 + 4 + 4 + 3 = 12 ns, copy 1 + 3 x 64 ns, store
  // into the pool and the host bank 33 ns, then attention 82 ns.
  const std::vector<Span> compute = {
      {"non-QSA layers", 0, 0, 5},     {"projections, index, top-k", 0, 5, 16},
      {"residency step", 0, 16, 28},   {"store", 0, 221, 254},
      {"attend", 0, 254, 336},         {"gate, output projection", 0, 336, 337},
      {"non-QSA layers", 1, 337, 342}, {"projections, index, top-k", 1, 342, 353},
      {"residency step", 1, 353, 365}, {"store", 1, 558, 591},
      {"attend", 1, 591, 673},         {"gate, output projection", 1, 673, 674}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  const std::vector<Span> h2d = {{"miss copy", 0, 28, 221}, {"miss copy", 1, 365, 558}};
  EXPECT_EQ(spans(r, Resource::h2d), h2d);
  EXPECT_EQ(r.compute_end_ns, 674);
  EXPECT_EQ(r.layers[1].misses, 3);
}

TEST(ReplayTimeline, PrefetchTurnsTheNextLayersMissesIntoOverlappedCopies) {
  const SimResult r = run_same_selection(MirrorPolicy::prefetch);
  // Once layer 0's step is done (its copy ends at 221), its query is ensured into layer 1's
  // pool beside the main stream (1 + 4 + 4 + 3 = 12 ns: 221 .. 233) and its 3 pages copied on
  // the H2D link (233 .. 426), while the GPU runs layer 0's store and attention and layer 1's
  // non-QSA layers and index. Layer 1's step waits for the prefetch (the backend orders the
  // ensures of a pool, and the store must not write a page its copy is still filling), then
  // finds only hits (no slot search: 1 + 4 = 5 ns) and copies nothing.
  const std::vector<Span> compute = {
      {"non-QSA layers", 0, 0, 5},     {"projections, index, top-k", 0, 5, 16},
      {"residency step", 0, 16, 28},   {"store", 0, 221, 254},
      {"attend", 0, 254, 336},         {"gate, output projection", 0, 336, 337},
      {"non-QSA layers", 1, 337, 342}, {"projections, index, top-k", 1, 342, 353},
      {"residency step", 1, 426, 431}, {"store", 1, 431, 464},
      {"attend", 1, 464, 546},         {"gate, output projection", 1, 546, 547}};
  EXPECT_EQ(spans(r, Resource::compute), compute);
  const std::vector<Span> beside = {{"prefetch next layer", 1, 221, 233}};
  EXPECT_EQ(spans(r, Resource::beside), beside);
  const std::vector<Span> h2d = {{"miss copy", 0, 28, 221}, {"prefetch copy", 1, 233, 426}};
  EXPECT_EQ(spans(r, Resource::h2d), h2d);
  // The step is 674 - 547 = 127 ns shorter than lru's: layer 1's misses and slot search (7 ns
  // of its step) and its serial copy (193 ns) are replaced by the part of the prefetch that
  // outlasts the compute it overlaps (426 - 353 = 73 ns).
  EXPECT_EQ(r.compute_end_ns, 547);
  EXPECT_EQ(r.layers[0].misses, 3);
  EXPECT_EQ(r.layers[1].misses, 0);
  EXPECT_EQ(r.layers[1].hits, 3);
  EXPECT_EQ(r.layers[1].prefetched, 3);
  EXPECT_EQ(r.copy_bytes, 6 * 64);  // the same bytes as lru, moved earlier
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s(), 1e9 / 547);
}

TEST(ReplayTimeline, Fp8MovesCodesAndScales) {
  Geometry g = tiny_geometry();
  // fp8: 2 x (4 B codes + 4 B scale) = 16 B per token, like bf16 in this geometry.
  EXPECT_EQ(g.kv_bytes_per_token(KvDtype::fp8), 16);
  const SimResult r = run(Placement::mirror, ResidencyUnit::layer_page, 4, KvDtype::fp8);
  EXPECT_EQ(r.copy_bytes, 5 * 64);
}

// fp8 on the host bank: the SIMT attend reading in place is compute-bound, one term for its
// reads and work (1 fixed + 1 row + 80 B = 82 ns), right after the store; the link's read is
// drawn beside it, not waited for.
TEST(ReplayTimeline, Fp8HostAttendIsItsOwnTerm) {
  const SimResult r = run(Placement::host, ResidencyUnit::layer_page, 0, KvDtype::fp8);
  const std::vector<Span> compute = spans(r, Resource::compute);
  ASSERT_EQ(compute.size(), 10u);
  EXPECT_EQ(compute[2], (Span{"store", 0, 16, 33}));
  EXPECT_EQ(compute[3], (Span{"attend", 0, 33, 115}));
  EXPECT_EQ(spans(r, Resource::h2d)[0], (Span{"in-place read", 0, 33, 113}));
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

namespace kvtier::sim {
namespace {

// One decode row after a forward of that row alone finds the pages the forward before read in
// the L2 (attention_l2_reuse_*): in the trace replay's device placement, bf16, each of its
// attends costs the saving less. Not after a forward of another shape, nor in fp8, the host
// placement or the model forward (whose weights pass through the L2 between forwards).
TEST(ReplayTimeline, OneDecodeRowReusesTheL2OfTheForwardBefore) {
  const Geometry g = tiny_geometry();
  std::vector<traces::Record> r;
  r.emplace_back(traces::RequestBegin{1, 8, 0, 0});
  r.emplace_back(traces::RequestBegin{2, 8, 0, 0});
  const auto one = [&](RequestId req, std::int64_t pos) {
    add_forward(r, g, {{req, pos, 1, traces::RowKind::decode}}, {{{0, 3}}, {{1}}});
  };
  one(1, 8);  // 0: nothing before it
  one(1, 9);  // 1: reuses
  add_forward(r, g, {{1, 10, 1, traces::RowKind::decode}, {2, 8, 1, traces::RowKind::decode}},
              {{{0, 3}, {0, 3}}, {{1}, {1}}});  // 2: two rows
  one(2, 9);                                    // 3: the forward before had two rows
  one(2, 10);                                   // 4: reuses
  one(1, 11);                                   // 5: another request's row before it
  r.emplace_back(traces::RequestEnd{1});
  r.emplace_back(traces::RequestEnd{2});
  traces::TraceHeader h;
  h.geometry = g;
  const traces::TraceInput t = traces::memory_trace("reuse", h, std::move(r));

  HardwareProfile reuse = unit_profile();
  reuse.attention_l2_reuse_us = 0.001;  // 1 ns off each attend, the forward's pages fitting
  reuse.attention_l2_reuse_full_bytes = 1e9;
  reuse.attention_l2_reuse_none_bytes = 2e9;
  const auto forward_spans = [&](const HardwareProfile& p, Placement pl, KvDtype d,
                                 frontend::ForwardKind k) {
    SimConfig c;
    c.placement = pl;
    c.dtype = d;
    c.forward = k;
    c.record_forwards = true;
    const SimResult s = simulate(t, frontend::scan_trace(t), CostModel(p), c);
    std::vector<TimeNs> out;
    for (const ForwardTime& f : s.forwards_detail)
      out.push_back(f.span_ns);
    return out;
  };
  const auto replay = frontend::ForwardKind::trace_replay;
  const std::vector<TimeNs> base =
      forward_spans(unit_profile(), Placement::device, KvDtype::bf16, replay);
  const std::vector<TimeNs> with = forward_spans(reuse, Placement::device, KvDtype::bf16, replay);
  ASSERT_EQ(base.size(), 6u);
  const TimeNs layers = g.qsa_layers();
  const std::vector<TimeNs> saved = {0, layers, 0, 0, layers, 0};
  for (std::size_t i = 0; i < base.size(); ++i)
    EXPECT_EQ(base[i] - with[i], saved[i]) << "forward " << i;
  // Past the working set where nothing is left: no saving.
  HardwareProfile far = reuse;
  far.attention_l2_reuse_full_bytes = 1;
  far.attention_l2_reuse_none_bytes = 2;
  EXPECT_EQ(forward_spans(far, Placement::device, KvDtype::bf16, replay), base);
  for (const auto& [pl, d, k] :
       {std::tuple{Placement::device, KvDtype::fp8, replay},
        std::tuple{Placement::host, KvDtype::bf16, replay},
        std::tuple{Placement::device, KvDtype::bf16, frontend::ForwardKind::model}}) {
    EXPECT_EQ(forward_spans(reuse, pl, d, k), forward_spans(unit_profile(), pl, d, k));
  }
}

}  // namespace
}  // namespace kvtier::sim
