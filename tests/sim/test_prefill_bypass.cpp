// Mirror prefill rows wider than the pool bypass it (FrontEnd::plan_rows): they are read from
// the host bank, never admitted, so that the pool's size follows the decode rows.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "frontend/front_end.hpp"
#include "sim/replay.hpp"
#include "tests/sim/sim_fixtures.hpp"

namespace kvtier::sim {
namespace {

using testing::add_forward;
using testing::random_trace;
using testing::tiny_geometry;
using testing::unit_profile;

// Request 1 has prefilled 32 tokens (8 pages) and decodes at 32; request 2 prefills 24
// tokens (6 pages) in one row whose union selects all 12 of its blocks.
struct TwoRows {
  Geometry g = tiny_geometry();
  frontend::FrontEnd fe{g, 64};
  traces::Forward f;
  TwoRows() {
    std::vector<traces::Record> recs;
    fe.begin({1, 32, 0, 0});
    fe.begin({2, 24, 0, 0});
    traces::Forward first;
    first.rows = {{1, 0, 32, traces::RowKind::prefill}};
    fe.prepare(first);  // request 1's pages 0..7
    std::vector<std::int32_t> all(12);
    for (int i = 0; i < 12; ++i)
      all[static_cast<std::size_t>(i)] = i;
    add_forward(recs, g,
                {{1, 32, 1, traces::RowKind::decode}, {2, 0, 24, traces::RowKind::prefill}},
                {{{3, 9}, all}, {{1, 15}, all}});
    f = std::get<traces::Forward>(recs.back());
    fe.prepare(f);
  }
};

TEST(PrefillBypass, AWidePrefillRowBypassesASmallPool) {
  TwoRows t;
  // 7 write pages (request 1's page 8, request 2's 0..5) and 2 rows of up to 3 pages: at 13
  // slots the width is 3, and the prefill row could touch 6 pages.
  ASSERT_EQ(t.fe.write_pages(), 7);
  const int width = t.fe.plan_rows(13);
  EXPECT_EQ(width, 3);
  ASSERT_EQ(t.fe.bypassed_rows(), 1);
  EXPECT_EQ(t.fe.bypass()[0], 0);
  EXPECT_EQ(t.fe.bypass()[1], 1);
  for (int l = 0; l < t.g.qsa_layers(); ++l) {
    const frontend::LayerQuery q = t.fe.build(t.f, l, width);
    EXPECT_EQ(q.drops, 0) << "nothing is truncated: the wide row is read, not admitted";
    // the bypassing row's entries hold only pages it writes (its causal tail, if any)
    const auto w = t.fe.writes();
    for (int i = 0; i < width; ++i) {
      const PageId p = q.pages[static_cast<std::size_t>(7 + width + i)];
      if (p != kNoPage) {
        EXPECT_TRUE(std::binary_search(w.begin(), w.end(), p));
      }
    }
    // what it reads is still counted, apart
    EXPECT_GT(q.bypass_selected_tokens, 0);
    EXPECT_GE(q.bypass_last_token_selected, 12 * t.g.compress_ratio);
    EXPECT_GT(q.selected_tokens, q.bypass_selected_tokens);
  }
}

TEST(PrefillBypass, NoRowBypassesAPoolThatHoldsItOrNoPool) {
  TwoRows t;
  // 7 + 2 x 6 slots: width 6 holds the prefill row's every page
  EXPECT_EQ(t.fe.plan_rows(19), 6);
  EXPECT_EQ(t.fe.bypassed_rows(), 0);
  const frontend::LayerQuery q = t.fe.build(t.f, 0, 6);
  EXPECT_EQ(q.drops, 0);
  EXPECT_EQ(q.bypass_selected_tokens, 0);
  int entries = 0;
  for (int i = 0; i < 6; ++i)
    entries += q.pages[static_cast<std::size_t>(7 + 6 + i)] != kNoPage ? 1 : 0;
  EXPECT_EQ(entries, 6);
  t.fe.plan_rows(0);  // device and host: no pool
  EXPECT_EQ(t.fe.bypassed_rows(), 0);
  // Without the bypass the 13-slot pool would have cut the prefill row to 3 of its 6 pages.
  const frontend::LayerQuery cut = t.fe.build(t.f, 0, 3);
  EXPECT_EQ(cut.drops, 3);
}

// At the scan's no-truncation bound (write pages + rows x the widest decode-row selection),
// no row is truncated: the wide prefill rows bypass, the rest fit. The pool's query never
// holds more distinct pages than the pool.
RC_GTEST_PROP(PrefillBypass, TheDecodeBoundPoolDropsNothing, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  const Geometry g = tiny_geometry();
  const traces::TraceInput t = random_trace(seed, g, 40);
  const frontend::TraceBounds st = frontend::scan_trace(t);
  SimConfig c;
  c.pool_slots = st.max_step_pages + *rc::gen::inRange<std::int64_t>(0, 4);
  std::int64_t most = 0;
  c.on_query = [&](int, std::int64_t, std::span<const PageId> q) {
    std::vector<PageId> d(q.begin(), q.end());
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    most = std::max<std::int64_t>(
        most, static_cast<std::int64_t>(d.size()) - (d.empty() || d.front() != kNoPage ? 0 : 1));
  };
  const SimResult r = simulate(t, st, CostModel(unit_profile()), c);
  RC_ASSERT(r.total().drops == 0);
  RC_ASSERT(most <= c.pool_slots);
}

// The bypassing rows' reads go over the link: a pool too small for the prefill rows moves
// bytes in place that a pool holding them reads from HBM.
TEST(PrefillBypass, BypassedReadsArePricedOverTheLink) {
  const Geometry g = tiny_geometry();
  const traces::TraceInput t = random_trace(7, g, 60);
  const frontend::TraceBounds st = frontend::scan_trace(t);
  SimConfig small, large;
  small.pool_slots = st.max_step_pages;
  large.pool_slots =
      st.max_write_pages + std::int64_t{st.max_rows} * g.pages_for_context(st.max_context);
  ASSERT_LT(small.pool_slots, large.pool_slots);
  const SimResult a = simulate(t, st, CostModel(unit_profile()), small);
  const SimResult b = simulate(t, st, CostModel(unit_profile()), large);
  EXPECT_EQ(a.total().drops, 0);
  EXPECT_EQ(b.total().drops, 0);
  EXPECT_LT(a.total().lookups, b.total().lookups) << "bypassing rows are not looked up";
  EXPECT_GT(a.in_place_bytes, b.in_place_bytes);
}

}  // namespace
}  // namespace kvtier::sim
