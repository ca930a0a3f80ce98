// The page-stream trace behind bench_sim's replay figures (issue 16, item 9): valid, repeatable
// and miss-heavy; and its replay, with pools past the hint threshold (2^18 pages: ensure_pages'
// hints run) and layer-steps of hundreds of misses (the radix sorts of the misses and of the
// finder's front run), decides every install as the core does without the replay around it
// (the same queries through ensure_pages with the heap finder, which the replay does not use),
// in both residency units.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "bench/sim/page_stream_trace.hpp"
#include "frontend/decision_log.hpp"
#include "model/ensure.hpp"
#include "model/step_stamp.hpp"
#include "model/victims_heap.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"

namespace kvtier::sim {
namespace {

// 66 requests of 4,001 pages: 264,066 pages, past hints_pay's 2^18; pools of 2^13 slots.
bench::PageStreamTraceParams small_stream(int rows, double zipf) {
  return {.seed = 16,
          .requests = 66,
          .context = 256'000,
          .rows = rows,
          .pages_per_row = 300,
          .lookups = 500'000,
          .zipf = zipf};
}

struct Query {
  int state;
  std::int64_t step;
  std::vector<PageId> pages;
};

TEST(ReplayStream, TraceIsValidMissHeavyAndRepeatable) {
  const bench::PageStreamTraceParams p = small_stream(2, 0.0);
  const traces::TraceInput t = bench::make_page_stream_trace(p);
  const frontend::TraceBounds b = frontend::scan_trace(t);
  EXPECT_EQ(b.peak_pages, 66 * 4001);
  EXPECT_EQ(b.max_rows, 2);
  const std::int64_t forwards = b.forwards;
  EXPECT_EQ(forwards, (p.lookups + 12 * 2 * 300 - 1) / (12 * 2 * 300));
  SimConfig c;
  c.pool_slots = std::int64_t{1} << 13;
  c.check_memory = false;
  const CostModel cost(load_profile("h200-pcie5"));
  const SimResult a = simulate(t, b, cost, c);
  const SimResult again = simulate(bench::make_page_stream_trace(p), b, cost, c);
  EXPECT_EQ(a.total().misses, again.total().misses);
  EXPECT_EQ(a.total().evictions, again.total().evictions);
  EXPECT_EQ(a.total().drops, 0);
  // ~289 distinct pages of 300 drawn from 4,000, and the write page
  EXPECT_GT(a.total().lookups, forwards * 12 * 2 * 285);
  EXPECT_LE(a.total().lookups, forwards * 12 * 2 * 301);
  EXPECT_LT(a.hit_rate(), 0.5);
  EXPECT_GT(a.total().evictions, a.total().misses / 2);
}

TEST(ReplayStream, ReplayDecidesAsTheCoreAlone) {
  const CostModel cost(load_profile("h200-pcie5"));
  for (const auto unit : {ResidencyUnit::layer_page, ResidencyUnit::all_layers_page}) {
    for (const double zipf : {0.0, 0.8}) {
      const traces::TraceInput t = bench::make_page_stream_trace(small_stream(3, zipf));
      const frontend::TraceBounds b = frontend::scan_trace(t);
      SimConfig c;
      c.unit = unit;
      c.pool_slots = std::int64_t{1} << 13;
      c.check_memory = false;
      std::ostringstream replayed;
      c.decisions = &replayed;
      std::vector<Query> queries;
      c.on_query = [&](int si, std::int64_t step, std::span<const PageId> q) {
        queries.push_back({si, step, {q.begin(), q.end()}});
      };
      const SimResult r = simulate(t, b, cost, c);

      const int layers = t.header.geometry.qsa_layers();
      const int pools = unit == ResidencyUnit::layer_page ? layers : 1;
      const auto slots = static_cast<SlotId>(c.pool_slots);
      std::vector<ResidencyState> st;
      std::vector<HeapVictims> finders;
      for (int i = 0; i < pools; ++i) {
        st.emplace_back(b.peak_pages, slots);
        finders.emplace_back(slots);
      }
      std::ostringstream core;
      std::int64_t misses = 0;
      for (const Query& q : queries) {
        const auto n = q.pages.size();
        std::vector<PageId> miss(n);
        std::vector<SlotId> victims(n);
        std::vector<CopyOp> copies(n);
        const auto si = static_cast<std::size_t>(q.state);
        const EnsureResult e =
            ensure_pages(st[si].view(), q.pages.data(), static_cast<int>(n), q.step, finders[si],
                         {miss.data(), victims.data(), nullptr}, copies.data());
        ASSERT_EQ(e.status, EnsureStatus::ok);
        misses += e.misses;
        const std::int64_t forward = (q.step / kStampsPerLayerStep) / layers;
        frontend::log_installs(&core, forward, q.state, q.step, frontend::InstallKind::demand,
                               {copies.data(), static_cast<std::size_t>(e.misses)});
      }
      EXPECT_EQ(misses, r.total().misses);
      EXPECT_GT(r.total().evictions, 0);
      EXPECT_TRUE(replayed.str() == core.str()) << to_string(unit) << " zipf " << zipf
                                                << ": the replay's installs differ from the core's";
    }
  }
}

}  // namespace
}  // namespace kvtier::sim
