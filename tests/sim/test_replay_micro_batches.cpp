// Micro-batches in the simulator (SimConfig::micro_batches, sim/micro_batch_groups.hpp): which
// group a request joins, a forward's rows split by group, each group's residency decisions
// those of its requests alone in a pool of its share, one group's reads over the link beside
// the others' work in decode forwards, and the configurations refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/micro_batch_choice.hpp"
#include "sim/micro_batch_groups.hpp"
#include "sim/planner.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "sim/replay_config.hpp"
#include "tests/sim/sim_fixtures.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {
namespace {

using traces::ForwardRow;
using traces::RowKind;

TEST(MicroBatchGroups, ARequestJoinsTheGroupWithTheFewestOpen) {
  MicroBatchGroups g(3);
  EXPECT_EQ(g.begin(10), 0);
  EXPECT_EQ(g.begin(11), 1);
  EXPECT_EQ(g.begin(12), 2);
  EXPECT_EQ(g.begin(13), 0);
  EXPECT_EQ(g.end(11), 1);
  EXPECT_EQ(g.open(1), 0);
  EXPECT_EQ(g.begin(14), 1);  // the group the end left short
  EXPECT_EQ(g.begin(15), 1);  // 2, 1, 1 open: a tie of groups 1 and 2, the lowest
  EXPECT_EQ(g.group_of(13), 0);
  EXPECT_EQ(g.group_of(15), 1);
  EXPECT_THROW(g.begin(13), std::logic_error);
  EXPECT_THROW(g.end(99), std::logic_error);
  EXPECT_THROW(g.group_of(11), std::logic_error);
  EXPECT_THROW(MicroBatchGroups(0), ConfigError);
  EXPECT_THROW(MicroBatchGroups(kMaxSimMicroBatches + 1), ConfigError);
}

TEST(MicroBatchGroups, AForwardSplitKeepsEachRowAndItsSelections) {
  const Geometry g = testing::tiny_geometry();
  MicroBatchGroups groups(2);
  for (RequestId r : {1, 2, 3})
    groups.begin(r);  // 1 -> 0, 2 -> 1, 3 -> 0
  std::vector<traces::Record> recs;
  const std::vector<ForwardRow> rows = {
      {1, 8, 1, RowKind::decode}, {2, 5, 1, RowKind::decode}, {3, 0, 4, RowKind::prefill}};
  // [layer][row]
  const std::vector<std::vector<std::vector<std::int32_t>>> sel = {{{0, 3}, {1}, {0, 1}},
                                                                   {{2}, {0, 2}, {1}}};
  testing::add_forward(recs, g, rows, sel);
  const auto& f = std::get<traces::Forward>(recs[0]);
  std::vector<traces::Forward> out;
  groups.split(f, out);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].rows.size(), 2u);
  ASSERT_EQ(out[1].rows.size(), 1u);
  EXPECT_EQ(out[0].rows[0], rows[0]);
  EXPECT_EQ(out[0].rows[1], rows[2]);
  EXPECT_EQ(out[1].rows[0], rows[1]);
  for (int l = 0; l < 2; ++l) {
    const auto a = out[0].selection(l, 0), b = out[0].selection(l, 1), c = out[1].selection(l, 0);
    EXPECT_EQ(std::vector<std::int32_t>(a.begin(), a.end()), sel[l][0]) << l;
    EXPECT_EQ(std::vector<std::int32_t>(b.begin(), b.end()), sel[l][2]) << l;
    EXPECT_EQ(std::vector<std::int32_t>(c.begin(), c.end()), sel[l][1]) << l;
  }
  groups.end(2);
  EXPECT_THROW(groups.split(f, out), std::logic_error);  // a row of a request not open
}

// `requests` requests begun at once, each prefilled in one row, then `decodes` forwards of one
// decode row each, selections drawn with locality; every request ends after the last forward.
// No request ends early, so page ids grow in one order and a group's pages keep their order
// with or without the other groups' requests.
struct Batch {
  std::vector<traces::Record> records;
};

Batch batch_records(std::uint64_t seed, const Geometry& g, int requests, int decodes) {
  std::mt19937_64 rng(seed);
  Batch b;
  std::vector<std::int64_t> pos;
  for (int r = 0; r < requests; ++r) {
    const std::int64_t prompt = 6 + static_cast<std::int64_t>(rng() % 8);
    b.records.emplace_back(traces::RequestBegin{static_cast<RequestId>(r + 1), prompt, 0, 0});
    pos.push_back(prompt);
  }
  for (int d = -1; d < decodes; ++d) {
    std::vector<ForwardRow> rows;
    for (int r = 0; r < requests; ++r) {
      ForwardRow row;
      row.request = static_cast<RequestId>(r + 1);
      if (d < 0) {
        row.kind = RowKind::prefill;
        row.position = 0;
        row.count = static_cast<std::int32_t>(pos[static_cast<std::size_t>(r)]);
      } else {
        row.position = pos[static_cast<std::size_t>(r)]++;
      }
      rows.push_back(row);
    }
    std::vector<std::vector<std::vector<std::int32_t>>> sel(
        g.qsa_layers(), std::vector<std::vector<std::int32_t>>(rows.size()));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::int64_t last = rows[r].position + rows[r].count - 1;
      const auto visible = static_cast<std::int32_t>((last + 1) / g.compress_ratio);
      for (int l = 0; l < g.qsa_layers(); ++l) {
        std::set<std::int32_t> s;
        const int k = std::min<int>(visible, g.block_topk());
        while (static_cast<int>(s.size()) < k) {
          const auto span = std::max<std::int32_t>(1, std::min<std::int32_t>(visible, 10));
          s.insert(rng() % 4 != 0 ? visible - 1 - static_cast<std::int32_t>(rng() % span)
                                  : static_cast<std::int32_t>(rng() % visible));
        }
        sel[static_cast<std::size_t>(l)][r].assign(s.begin(), s.end());
      }
    }
    testing::add_forward(b.records, g, rows, sel);
  }
  for (int r = 0; r < requests; ++r)
    b.records.emplace_back(traces::RequestEnd{static_cast<RequestId>(r + 1)});
  return b;
}

traces::TraceInput input_of(const Geometry& g, std::vector<traces::Record> recs) {
  traces::TraceHeader h;
  h.geometry = g;
  h.producer = "tests/sim micro-batches";
  return traces::memory_trace("batch", h, std::move(recs));
}

// The records of group `k`'s requests alone when `groups` groups take the requests in the
// order they begin, each the one with the fewest open (the rule the simulator follows, written
// again here as the oracle); forwards without a row of the group are left out.
std::vector<traces::Record> group_records(const std::vector<traces::Record>& all, int groups,
                                          int k) {
  std::vector<int> open(static_cast<std::size_t>(groups), 0);
  std::map<RequestId, int> group;
  std::vector<traces::Record> out;
  for (const traces::Record& rec : all) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      const auto least = std::min_element(open.begin(), open.end()) - open.begin();
      group[b->id] = static_cast<int>(least);
      ++open[static_cast<std::size_t>(least)];
      if (least == k) out.push_back(rec);
    } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      --open[static_cast<std::size_t>(group[e->id])];
      if (group[e->id] == k) out.push_back(rec);
    } else {
      const auto& f = std::get<traces::Forward>(rec);
      traces::Forward sub;
      sub.layers = f.layers;
      sub.offsets.push_back(0);
      std::vector<std::size_t> mine;
      for (std::size_t r = 0; r < f.rows.size(); ++r)
        if (group[f.rows[r].request] == k) mine.push_back(r);
      for (std::size_t r : mine)
        sub.rows.push_back(f.rows[r]);
      for (int l = 0; l < f.layers; ++l) {
        for (std::size_t r : mine) {
          const auto s = f.selection(l, static_cast<int>(r));
          sub.ids.insert(sub.ids.end(), s.begin(), s.end());
          sub.offsets.push_back(static_cast<std::int64_t>(sub.ids.size()));
        }
      }
      if (!sub.rows.empty()) out.emplace_back(std::move(sub));
    }
  }
  return out;
}

SimConfig config(Placement p, int groups, std::int64_t slots = 0,
                 ResidencyUnit unit = ResidencyUnit::layer_page,
                 MirrorPolicy policy = MirrorPolicy::lru) {
  SimConfig c;
  c.placement = p;
  c.micro_batches = groups;
  c.pool_slots = slots;
  c.unit = unit;
  c.policy = policy;
  c.check_memory = false;
  c.record_forwards = true;
  return c;
}

SimResult run(const traces::TraceInput& in, const CostModel& cost, const SimConfig& c) {
  return simulate(in, frontend::scan_trace(in), cost, c);
}

// Each group decides alone: the layers' hits, misses, evictions and drops, and the bytes over
// the link, of K groups are the sums of each group's requests simulated alone with a pool of
// its share of the slots.
TEST(SimMicroBatches, EachGroupDecidesAsItsRequestsAlone) {
  const Geometry g = testing::tiny_geometry();
  const CostModel cost(load_profile("h200-pcie5"));
  int compared = 0;
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const Batch b = batch_records(seed, g, 5, 30);
    const traces::TraceInput all = input_of(g, b.records);
    for (const int k : {2, 3}) {
      for (const ResidencyUnit unit : {ResidencyUnit::layer_page, ResidencyUnit::all_layers_page}) {
        for (const MirrorPolicy policy : {MirrorPolicy::lru, MirrorPolicy::prefetch}) {
          if (policy == MirrorPolicy::prefetch && unit == ResidencyUnit::all_layers_page) continue;
          for (const std::int64_t slots : {30, 45, 80}) {
            const SimResult grouped =
                run(all, cost, config(Placement::mirror, k, slots, unit, policy));
            LayerStats sum;
            std::int64_t h2d = 0, copies = 0, decode = 0, prefill = 0;
            std::vector<LayerStats> layers(static_cast<std::size_t>(g.qsa_layers()));
            for (int i = 0; i < k; ++i) {
              const std::int64_t share = (i + 1) * slots / k - i * slots / k;
              const SimResult alone = run(input_of(g, group_records(b.records, k, i)), cost,
                                          config(Placement::mirror, 1, share, unit, policy));
              for (std::size_t l = 0; l < layers.size(); ++l)
                layers[l] += alone.layers[l];
              h2d += alone.h2d_bytes;
              copies += alone.copy_bytes;
              decode += alone.decode_tokens;
              prefill += alone.prefill_tokens;
            }
            for (std::size_t l = 0; l < layers.size(); ++l) {
              const LayerStats &x = grouped.layers[l], &y = layers[l];
              const std::string at = "seed " + std::to_string(seed) + " k " + std::to_string(k) +
                                     " slots " + std::to_string(slots) + " layer " +
                                     std::to_string(l);
              EXPECT_EQ(x.lookups, y.lookups) << at;
              EXPECT_EQ(x.hits, y.hits) << at;
              EXPECT_EQ(x.misses, y.misses) << at;
              EXPECT_EQ(x.evictions, y.evictions) << at;
              EXPECT_EQ(x.drops, y.drops) << at;
              EXPECT_EQ(x.prefetched, y.prefetched) << at;
              sum += x;
            }
            EXPECT_EQ(grouped.h2d_bytes, h2d);
            EXPECT_EQ(grouped.copy_bytes, copies);
            EXPECT_EQ(grouped.decode_tokens, decode);
            EXPECT_EQ(grouped.prefill_tokens, prefill);
            if (sum.evictions > 0) ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 10);  // the pools were small enough to evict
}

// A decode forward launches every group's forward at once: it ends no later than the groups
// one after another would, and no sooner than its longest group alone. Prefill forwards run
// the groups one after another. Every forward is one record, its rows all the groups'.
TEST(SimMicroBatches, DecodeForwardsOverlapTheGroupsAndPrefillRunsThemInTurn) {
  const Geometry g = testing::tiny_geometry();
  const CostModel cost(load_profile("h200-pcie5"));
  const Batch b = batch_records(7, g, 4, 12);
  const traces::TraceInput all = input_of(g, b.records);
  for (const Placement p : {Placement::host, Placement::mirror}) {
    const std::int64_t slots = p == Placement::mirror ? 40 : 0;
    const SimResult grouped = run(all, cost, config(p, 2, slots));
    std::vector<SimResult> alone;
    for (int i = 0; i < 2; ++i)
      alone.push_back(
          run(input_of(g, group_records(b.records, 2, i)), cost, config(p, 1, slots / 2)));
    ASSERT_EQ(grouped.forwards_detail.size(), 14u);  // the prefill forward as two, then 12
    ASSERT_EQ(alone[0].forwards_detail.size(), 13u);
    // the prefill: group 0, then group 1, each as alone (nothing ran before them)
    EXPECT_EQ(grouped.forwards_detail[0].rows, 2);
    EXPECT_EQ(grouped.forwards_detail[0].span_ns, alone[0].forwards_detail[0].span_ns);
    EXPECT_EQ(grouped.forwards_detail[1].start_ns, grouped.forwards_detail[0].end_ns);
    std::int64_t overlapped = 0;
    for (std::size_t f = 2; f < grouped.forwards_detail.size(); ++f) {
      const ForwardTime& x = grouped.forwards_detail[f];
      const TimeNs a = alone[0].forwards_detail[f - 1].span_ns;
      const TimeNs c = alone[1].forwards_detail[f - 1].span_ns;
      EXPECT_EQ(x.rows, 4) << f;
      EXPECT_EQ(x.decode_tokens, 4) << f;
      EXPECT_GE(x.span_ns, std::max(a, c)) << f;
      EXPECT_LE(x.span_ns, a + c) << f;
      if (x.span_ns < a + c) ++overlapped;
    }
    EXPECT_GT(overlapped, 0) << to_string(p);
    // the decode time is charged once per forward, not per group
    double spans = 0;
    for (std::size_t f = 2; f < grouped.forwards_detail.size(); ++f)
      spans += static_cast<double>(grouped.forwards_detail[f].span_ns);
    EXPECT_NEAR(grouped.decode_time_ns, spans, 1e-6 * spans);
    EXPECT_EQ(grouped.decode_tokens, 48);
    // every request's tokens and latency are there
    EXPECT_EQ(grouped.requests.size(), 4u);
    for (const RequestTimes& r : grouped.requests)
      EXPECT_EQ(r.decode_tokens, 12);
  }
}

// A group without requests takes no part: one request in two groups is one batch, to the ns.
TEST(SimMicroBatches, AGroupWithoutRequestsCostsNothing) {
  const Geometry g = testing::tiny_geometry();
  const CostModel cost(load_profile("h200-pcie5"));
  const traces::TraceInput all = input_of(g, batch_records(3, g, 1, 10).records);
  const SimResult one = run(all, cost, config(Placement::host, 1));
  const SimResult two = run(all, cost, config(Placement::host, 2));
  EXPECT_EQ(one.makespan_ns, two.makespan_ns);
  EXPECT_EQ(one.decode_time_ns, two.decode_time_ns);
  EXPECT_EQ(one.h2d_bytes, two.h2d_bytes);
  ASSERT_EQ(one.forwards_detail.size(), two.forwards_detail.size());
  for (std::size_t f = 0; f < one.forwards_detail.size(); ++f)
    EXPECT_EQ(one.forwards_detail[f].span_ns, two.forwards_detail[f].span_ns) << f;
}

TEST(SimMicroBatches, RefusedWhereTheRunnerHasNone) {
  const Geometry g = testing::tiny_geometry();
  const CostModel cost(load_profile("h200-pcie5"));
  const traces::TraceInput all = input_of(g, batch_records(3, g, 3, 4).records);
  EXPECT_THROW(run(all, cost, config(Placement::device, 2)), ConfigError);
  EXPECT_THROW(run(all, cost, config(Placement::host, 0)), ConfigError);
  EXPECT_THROW(run(all, cost, config(Placement::host, kMaxSimMicroBatches + 1)), ConfigError);
  EXPECT_THROW(run(all, cost, config(Placement::mirror, 4, 3)), ConfigError);  // a slot each
  SimConfig fp8 = config(Placement::host, 2);
  fp8.dtype = KvDtype::fp8;
  EXPECT_THROW(run(all, cost, fp8), ConfigError);  // its groups' attends are not priced
  SimConfig replay = config(Placement::host, 2);
  replay.forward = frontend::ForwardKind::trace_replay;
  EXPECT_THROW(run(all, cost, replay), ConfigError);
  // more groups than requests: the empty groups take no part
  EXPECT_NO_THROW(run(all, cost, config(Placement::host, 5)));
}

// Each group prices its share of the widest forward and its pool; the device bytes of two
// groups are those of two batches of half the rows and half the pool, the host bank once.
TEST(SimMicroBatches, TheDeviceBudgetIsEveryGroupsAndTheBankOnce) {
  const Geometry g = testing::tiny_geometry();
  const CostModel cost(load_profile("h200-pcie5"));
  const traces::TraceInput all = input_of(g, batch_records(5, g, 4, 4).records);
  const SimResult one = run(all, cost, config(Placement::mirror, 1, 40));
  const SimResult two = run(all, cost, config(Placement::mirror, 2, 40));
  EXPECT_EQ(two.host_bytes, one.host_bytes);
  EXPECT_GT(two.device_bytes, 0);
  // the pool's bytes are the same 40 slots; the per-group residency state and buffers add
  EXPECT_GE(two.device_bytes, one.device_bytes);
  SimConfig tight = config(Placement::mirror, 2, 40);
  tight.check_memory = true;
  tight.device_kv_bytes = two.device_bytes - 1;
  EXPECT_THROW(run(all, cost, tight), CapacityError);
  tight.device_kv_bytes = two.device_bytes;
  EXPECT_NO_THROW(run(all, cost, tight));
}

// A group's runner holds its own requests' page space: the indexer slab and the residency
// state of four groups together are one batch's (four requests, split evenly), not four times
// it, as runner::budget_request prices each micro-batch; the host bank is priced once.
TEST(SimMicroBatches, EachGroupPricesItsOwnRequestsPages) {
  const Geometry g = testing::tiny_geometry();
  const CostModel cost(load_profile("h200-pcie5"));
  const traces::TraceInput all = input_of(g, batch_records(5, g, 4, 4).records);
  const frontend::TraceBounds st = frontend::scan_trace(all);
  const auto item = [](const MemoryBudget& b, const std::string& name) {
    std::int64_t bytes = 0;
    for (const MemoryItem& i : b.device)
      if (i.name == name || i.name.ends_with(": " + name)) bytes += i.bytes;
    return bytes;
  };
  SimConfig one_cfg = config(Placement::mirror, 1, 40), four_cfg = config(Placement::mirror, 4, 40);
  one_cfg.check_memory = four_cfg.check_memory = false;
  const MemoryBudget one = price_memory(g, st, cost, one_cfg);
  const MemoryBudget four = price_memory(g, st, cost, four_cfg);
  ASSERT_GT(item(one, "indexer slab"), 0);
  ASSERT_EQ(item(one, "indexer slab") % st.peak_pages, 0);
  const std::int64_t per_page = item(one, "indexer slab") / st.peak_pages;
  // each group its share of the pages, rounded up (a group is never priced short)
  EXPECT_EQ(item(four, "indexer slab"), 4 * ((st.peak_pages + 3) / 4) * per_page);
  EXPECT_LT(item(four, "indexer slab"), 2 * item(one, "indexer slab"));  // not four slabs
  EXPECT_EQ(four.host_bytes, one.host_bytes);
}

// plan() with micro-batches: each host and mirror point is its configuration simulated in K
// groups (each mirror size the groups' pools together), the ideal in one batch, host fp8 in
// one batch (its groups are not priced); the smallest pool leaves every group its share.
TEST(PlanMicroBatches, HostAndMirrorPointsAreTheirGroupsSimulations) {
  const Geometry g = testing::tiny_geometry();
  const traces::TraceInput trace = input_of(g, batch_records(11, g, 6, 20).records);
  const CostModel cost(load_profile("h200-pcie5"));
  PlanConfig cfg;
  cfg.points = 3;
  cfg.threads = 2;
  cfg.belady = false;
  cfg.micro_batches = 3;
  const PlanResult r = plan(trace, cost, cfg);
  EXPECT_EQ(r.micro_batches, 3);
  EXPECT_EQ(r.host_micro_batches, 3);
  const frontend::TraceBounds st = frontend::scan_trace(trace);
  // the groups' shares of 6 rows and their written pages, three times over
  EXPECT_GE(r.min_slots, 3 * (2 + (st.max_write_pages + 2) / 3));
  SimConfig host = config(Placement::host, 3);
  const SimResult h = run(trace, cost, host);
  EXPECT_DOUBLE_EQ(r.host.decode_tps, h.decode_tokens_per_s());
  SimConfig ideal = config(Placement::device, 1);
  EXPECT_DOUBLE_EQ(r.ideal.decode_tps, run(trace, cost, ideal).decode_tokens_per_s());
  ASSERT_FALSE(r.units.empty());
  const UnitSweep& us = r.units.front();
  for (std::size_t i = 0; i < us.sizes.size(); ++i) {
    const SimResult m = run(trace, cost, config(Placement::mirror, 3, us.sizes[i], us.unit));
    EXPECT_DOUBLE_EQ(us.points[i].decode_tps, m.decode_tokens_per_s()) << us.sizes[i];
    EXPECT_EQ(us.points[i].misses, m.total().misses) << us.sizes[i];
  }
  cfg.dtype = KvDtype::fp8;
  const PlanResult f = plan(trace, cost, cfg);
  EXPECT_EQ(f.host_micro_batches, 1);
  SimConfig host8 = config(Placement::host, 1);
  host8.dtype = KvDtype::fp8;
  EXPECT_DOUBLE_EQ(f.host.decode_tps, run(trace, cost, host8).decode_tokens_per_s());
  cfg.micro_batches = 0;
  EXPECT_THROW(plan(trace, cost, cfg), ConfigError);
  cfg.micro_batches = kMaxSimMicroBatches + 1;
  EXPECT_THROW(plan(trace, cost, cfg), ConfigError);
}

// plan() with micro-batches auto: each host and mirror point in the count `kvtier run
// --micro-batches auto` takes (model/micro_batch_choice.hpp for the trace's widest forward at
// its longest context), simulated at that count; the ideal in one batch.
TEST(PlanMicroBatches, AutoTakesTheRunnersCountPerConfiguration) {
  const Geometry g = testing::tiny_geometry();
  const traces::TraceInput trace = input_of(g, batch_records(12, g, 8, 12).records);
  const frontend::TraceBounds st = frontend::scan_trace(trace);
  // on a shipped profile the tiny geometry's work outweighs its reads: one batch; on a link a
  // thousand times slower, groups
  HardwareProfile slow = testing::unit_profile();
  slow.zero_copy_read_gbps = slow.pcie_h2d_gbps = 1e-3;
  int grouped = 0;
  for (const HardwareProfile& hp : {load_profile("h200-pcie5"), slow}) {
    const CostModel cost(hp);
    const std::string profile = hp.name;
    PlanConfig cfg;
    cfg.points = 3;
    cfg.threads = 2;
    cfg.belady = false;
    cfg.micro_batches_auto = true;
    const PlanResult r = plan(trace, cost, cfg);
    EXPECT_TRUE(r.micro_batches_auto);
    const int host_k =
        choose_micro_batches(cost, g, KvDtype::bf16, st.max_rows, st.max_context).micro_batches;
    EXPECT_EQ(r.host.micro_batches, host_k) << profile;
    EXPECT_EQ(r.host_micro_batches, host_k) << profile;
    EXPECT_DOUBLE_EQ(r.host.decode_tps,
                     run(trace, cost, config(Placement::host, host_k)).decode_tokens_per_s());
    EXPECT_EQ(r.ideal.micro_batches, 1);
    for (const UnitSweep& us : r.units) {
      for (std::size_t i = 0; i < us.sizes.size(); ++i) {
        const PointSummary& p = us.points[i];
        EXPECT_TRUE(p.micro_batches == 1 || p.micro_batches == 2 || p.micro_batches == 4);
        const SimResult m =
            run(trace, cost, config(Placement::mirror, p.micro_batches, us.sizes[i], us.unit));
        EXPECT_DOUBLE_EQ(p.decode_tps, m.decode_tokens_per_s()) << us.sizes[i];
        grouped += p.micro_batches > 1 ? 1 : 0;
      }
    }
    grouped += r.host.micro_batches > 1 ? 1 : 0;
  }
  EXPECT_GT(grouped, 0);
}

}  // namespace
}  // namespace kvtier::sim
