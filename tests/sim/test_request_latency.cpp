// Per-request latency on a hand-built trace whose forward times add up by hand (the unit
// profile of sim_fixtures.hpp: 1 byte per ns, 1 ns per fixed cost), with a mixed forward;
// nearest-rank percentiles on known data; the link's bytes charged to the requests.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "sim/replay.hpp"
#include "tests/sim/sim_fixtures.hpp"

namespace kvtier::sim {
namespace {

using testing::add_forward;
using testing::tiny_geometry;
using testing::unit_profile;
using traces::RowKind;

// tiny_geometry: blocks of 2 tokens, pages of 4, 16 B per token. A row at `last` reads its
// blocks x 2 tokens + the causal tail (1 token when `last` is even).
//  F0: request 1 prefills 8 tokens (its whole prompt).       layer 0 {0,3}: 4 tokens; 1 {1}: 2
//  request 2 begins (prompt 4).
//  F1: request 1 decodes at 8 (tail 1); request 2 prefills 4 tokens (its whole prompt): mixed.
//      layer 0: r1 {0,3} 5 + r2 {0,1} 4 = 9 tokens; layer 1: r1 {1} 3 + r2 {0} 2 = 5 tokens
//  F2: request 1 decodes at 9 (no tail), request 2 at 4 (tail 1).
//      layer 0: r1 {3,4} 4 + r2 {0,1} 5 = 9; layer 1: r1 {3,4} 4 + r2 {1} 3 = 7
//  request 2 ends.
//  F3: request 1 decodes at 10 (tail 1). layer 0 {4} 3; layer 1 {4} 3.
traces::TraceInput mixed_trace() {
  const Geometry g = tiny_geometry();
  std::vector<traces::Record> r;
  r.emplace_back(traces::RequestBegin{1, 8, 0, 0});
  add_forward(r, g, {{1, 0, 8, RowKind::prefill}}, {{{0, 3}}, {{1}}});
  r.emplace_back(traces::RequestBegin{2, 4, 0, 0});
  add_forward(r, g, {{1, 8, 1, RowKind::decode}, {2, 0, 4, RowKind::prefill}},
              {{{0, 3}, {0, 1}}, {{1}, {0}}});
  add_forward(r, g, {{1, 9, 1, RowKind::decode}, {2, 4, 1, RowKind::decode}},
              {{{3, 4}, {0, 1}}, {{3, 4}, {1}}});
  r.emplace_back(traces::RequestEnd{2});
  add_forward(r, g, {{1, 10, 1, RowKind::decode}}, {{{4}}, {{4}}});
  r.emplace_back(traces::RequestEnd{1});
  traces::TraceHeader h;
  h.geometry = g;
  return traces::memory_trace("mixed", h, std::move(r));
}

SimResult run_mixed(Placement p, std::int64_t slots = 0) {
  const traces::TraceInput t = mixed_trace();
  SimConfig c;
  c.placement = p;
  c.pool_slots = slots;
  // The trace replay's forward: per layer the store (1 fixed + 16 B per stored token) and the
  // attention (1 fixed + 1 per CTA, here one per row, + 16 B per token), nothing else (graph
  // nodes are in the kernels' terms), so each span is a short sum.
  c.forward = frontend::ForwardKind::trace_replay;
  c.record_forwards = true;
  return simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
}

// A layer on the device storing S tokens and attending T tokens over R rows:
// store 1 + 16 S ns, attention 1 + R + 16 T ns.
constexpr TimeNs layer_ns(int stored, int rows, int tokens) {
  return 1 + 16 * stored + 1 + rows + 16 * tokens;
}

TEST(RequestLatency, HandComputedTimesWithAMixedForward) {
  const SimResult r = run_mixed(Placement::device);
  const TimeNs f0 = layer_ns(8, 1, 4) + layer_ns(8, 1, 2);  // 358
  const TimeNs f1 = layer_ns(5, 2, 9) + layer_ns(5, 2, 5);  // 392
  const TimeNs f2 = layer_ns(2, 2, 9) + layer_ns(2, 2, 7);  // 328
  const TimeNs f3 = layer_ns(1, 1, 3) + layer_ns(1, 1, 3);  // 134
  ASSERT_EQ(r.forwards_detail.size(), 4u);
  const TimeNs want_end[] = {f0, f0 + f1, f0 + f1 + f2, f0 + f1 + f2 + f3};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.forwards_detail[i].end_ns, want_end[i]) << i;
    EXPECT_EQ(r.forwards_detail[i].start_ns, i == 0 ? 0 : want_end[i - 1]) << i;
  }

  ASSERT_EQ(r.requests.size(), 2u);
  const RequestTimes& a = r.requests[0];
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(a.arrival_ns, 0);
  EXPECT_EQ(a.first_forward, 0);
  EXPECT_EQ(a.first_token_ns, f0);  // the forward that completes its prompt
  EXPECT_EQ(a.ttft_ns(), f0);
  EXPECT_EQ(a.prefill_tokens, 8);
  EXPECT_EQ(a.decode_tokens, 3);
  // Its decode row in the mixed F1 waits for the whole forward: the gap is F1's span.
  EXPECT_EQ(a.tpot_ns.count, 3);
  EXPECT_DOUBLE_EQ(a.tpot_ns.p50, static_cast<double>(f2));  // {134, 328, 392}
  EXPECT_DOUBLE_EQ(a.tpot_ns.p95, static_cast<double>(f1));
  EXPECT_DOUBLE_EQ(a.tpot_ns.p99, static_cast<double>(f1));
  EXPECT_DOUBLE_EQ(a.tpot_ns.max, static_cast<double>(f1));
  EXPECT_DOUBLE_EQ(a.tpot_ns.mean, static_cast<double>(f1 + f2 + f3) / 3);
  EXPECT_EQ(a.last_token_ns, want_end[3]);

  const RequestTimes& b = r.requests[1];
  EXPECT_EQ(b.id, 2u);
  EXPECT_EQ(b.arrival_ns, f0);  // its RequestBegin comes after F0
  EXPECT_EQ(b.first_forward, 1);
  EXPECT_EQ(b.first_forward_start_ns, f0);
  EXPECT_EQ(b.ttft_ns(), f1);  // its prefill completes in F1
  EXPECT_EQ(b.tpot_ns.count, 1);
  EXPECT_DOUBLE_EQ(b.tpot_ns.p50, static_cast<double>(f2));

  // Across requests: TTFT {358, 392}; TPOT pooled over the 4 decode tokens {134, 328, 328, 392}.
  EXPECT_EQ(r.latency.requests, 2);
  EXPECT_EQ(r.latency.without_first_token, 0);
  EXPECT_DOUBLE_EQ(r.latency.ttft_ns.p50, static_cast<double>(f0));
  EXPECT_DOUBLE_EQ(r.latency.ttft_ns.p95, static_cast<double>(f1));
  EXPECT_EQ(r.latency.tpot_ns.count, 4);
  EXPECT_DOUBLE_EQ(r.latency.tpot_ns.p50, static_cast<double>(f2));
  EXPECT_DOUBLE_EQ(r.latency.tpot_ns.p95, static_cast<double>(f1));
  EXPECT_DOUBLE_EQ(r.latency.tpot_ns.mean, static_cast<double>(f1 + 2 * f2 + f3) / 4);

  // The aggregate keeps its meaning: F1's time is split 1 : 4 between its decode and prefill
  // tokens, so decode is charged a fifth of the forward its token waited for.
  EXPECT_DOUBLE_EQ(r.decode_time_ns, static_cast<double>(f1) / 5 + static_cast<double>(f2 + f3));
  EXPECT_DOUBLE_EQ(r.prefill_time_ns, static_cast<double>(f0) + 4.0 * static_cast<double>(f1) / 5);
}

// Host placement reads each row's selection in place: each row's bytes are its request's.
TEST(RequestLatency, HostLinkBytesAreChargedRowByRow) {
  const SimResult r = run_mixed(Placement::host);
  // request 1: F0 (4 + 2) + F1 (5 + 3) + F2 (4 + 4) + F3 (3 + 3) = 28 tokens x 16 B;
  // request 2: F1 (4 + 2) + F2 (5 + 3) = 14 tokens.
  ASSERT_EQ(r.h2d_bytes, 42 * 16);
  ASSERT_EQ(r.requests.size(), 2u);
  EXPECT_DOUBLE_EQ(r.requests[0].h2d_bytes, 28 * 16);
  EXPECT_DOUBLE_EQ(r.requests[1].h2d_bytes, 14 * 16);
  EXPECT_DOUBLE_EQ(r.latency.h2d_bytes, 42 * 16);
  EXPECT_DOUBLE_EQ(r.latency.unattributed_h2d_bytes, 0);
  EXPECT_DOUBLE_EQ(r.latency.link_share.max, 2.0 / 3);
}

// Mirror: every page the link carries (miss copies, pages read in place, prefetches) is
// charged to the request that wrote it, and nothing is left over, on random traces and every
// policy and unit.
TEST(RequestLatency, MirrorChargesEveryLinkByte) {
  const Geometry g = tiny_geometry();
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const traces::TraceInput t = testing::random_trace(seed, g, 60, 3);
    const frontend::TraceBounds st = frontend::scan_trace(t);
    for (MirrorPolicy policy : {MirrorPolicy::lru, MirrorPolicy::hybrid, MirrorPolicy::prefetch}) {
      for (ResidencyUnit unit : {ResidencyUnit::layer_page, ResidencyUnit::all_layers_page}) {
        if (policy == MirrorPolicy::prefetch && unit == ResidencyUnit::all_layers_page) continue;
        SimConfig c;
        c.placement = Placement::mirror;
        c.policy = policy;
        c.unit = unit;
        c.pool_slots = std::max<std::int64_t>(st.max_step_pages, 12);
        c.check_memory = false;
        const SimResult r = simulate(t, st, CostModel(unit_profile()), c);
        double charged = 0;
        for (const RequestTimes& x : r.requests)
          charged += x.h2d_bytes;
        EXPECT_GT(r.h2d_bytes, 0);
        EXPECT_NEAR(charged, static_cast<double>(r.h2d_bytes),
                    1e-6 * static_cast<double>(r.h2d_bytes))
            << "seed " << seed << " " << to_string(policy) << " " << to_string(unit);
        EXPECT_DOUBLE_EQ(r.latency.unattributed_h2d_bytes, 0);
        EXPECT_EQ(r.latency.requests, st.requests);
        // Every decode token has a gap, but a request's first token (here its first decode
        // row: these traces start requests at their prompt's end); the pool holds them all.
        std::int64_t gaps = 0;
        for (const RequestTimes& x : r.requests) {
          gaps += x.tpot_ns.count;
          EXPECT_LE(x.tpot_ns.count, x.decode_tokens);
          EXPECT_GE(x.tpot_ns.count, x.decode_tokens - 1);
        }
        EXPECT_EQ(r.latency.tpot_ns.count, gaps);
      }
    }
  }
}

// A request whose prompt is never finished within the trace has no first token: it is counted,
// not given a TTFT.
TEST(RequestLatency, UnfinishedPrefillHasNoFirstToken) {
  const Geometry g = tiny_geometry();
  std::vector<traces::Record> rec;
  rec.emplace_back(traces::RequestBegin{7, 16, 0, 0});
  add_forward(rec, g, {{7, 0, 8, RowKind::prefill}}, {{{0, 3}}, {{1}}});
  rec.emplace_back(traces::RequestEnd{7});
  traces::TraceHeader h;
  h.geometry = g;
  const traces::TraceInput t = traces::memory_trace("cut", h, std::move(rec));
  SimConfig c;
  c.placement = Placement::device;
  const SimResult r = simulate(t, frontend::scan_trace(t), CostModel(unit_profile()), c);
  ASSERT_EQ(r.requests.size(), 1u);
  EXPECT_FALSE(r.requests[0].has_first_token());
  EXPECT_EQ(r.latency.without_first_token, 1);
  EXPECT_EQ(r.latency.ttft_ns.count, 0);
  EXPECT_EQ(r.latency.tpot_ns.count, 0);
}

TEST(Percentiles, NearestRankOnKnownData) {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);  // 1 .. 100
  std::vector<double> shuffled(v.rbegin(), v.rend());
  const Percentiles p = percentiles(shuffled);
  EXPECT_EQ(p.count, 100);
  EXPECT_DOUBLE_EQ(p.p50, 50);
  EXPECT_DOUBLE_EQ(p.p95, 95);
  EXPECT_DOUBLE_EQ(p.p99, 99);
  EXPECT_DOUBLE_EQ(p.max, 100);
  EXPECT_DOUBLE_EQ(p.mean, 50.5);

  std::vector<double> twenty(20);
  std::iota(twenty.begin(), twenty.end(), 1.0);
  EXPECT_DOUBLE_EQ(nearest_rank(twenty, 95), 19);  // 95 % of 20 is exactly rank 19
  EXPECT_DOUBLE_EQ(nearest_rank(twenty, 50), 10);
  EXPECT_DOUBLE_EQ(nearest_rank(twenty, 99), 20);

  std::vector<double> three = {30, 10, 20};
  const Percentiles q = percentiles(three);
  EXPECT_DOUBLE_EQ(q.p50, 20);  // rank ceil(1.5) = 2
  EXPECT_DOUBLE_EQ(q.p95, 30);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(percentiles(one).p99, 7);
  std::vector<double> none;
  const Percentiles e = percentiles(none);
  EXPECT_EQ(e.count, 0);
  EXPECT_DOUBLE_EQ(e.p50, 0);
}

}  // namespace
}  // namespace kvtier::sim
