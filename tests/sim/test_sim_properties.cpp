// Properties of the simulator over seeded random traces (sim_fixtures.hpp):
//  - its eviction decisions equal the foundation tests' naive reference LRU;
//  - the one-pass MRC equals a separate naive LRU simulation at every pool size;
//  - with one page per step (no ties) the MRC equals the core's own misses at every size;
//  - the Belady bound never exceeds LRU (the MRC's, nor the simulator's);
//  - hybrid never copies a page seen once.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <list>
#include <map>
#include <sstream>

#include "model/ensure.hpp"
#include "model/victims_heap.hpp"
#include "sim/mrc.hpp"
#include "sim/replay.hpp"
#include "tests/model/reference_lru.hpp"
#include "tests/sim/sim_fixtures.hpp"

namespace kvtier::sim {
namespace {

using testing::random_trace;
using testing::tiny_geometry;
using testing::unit_profile;

// A naive LRU over one state's log, pages taken one after another in log order; a release
// frees the page's slot. Returns misses with `slots` slots.
std::int64_t naive_lru_misses(const std::vector<std::int32_t>& seq, std::int64_t slots) {
  std::list<PageId> order;  // most recent first
  std::map<PageId, std::list<PageId>::iterator> where;
  std::int64_t misses = 0;
  for (const std::int32_t v : seq) {
    if (v == QueryLog::kStepEnd) continue;
    if (v < 0) {
      const PageId p = -2 - v;
      auto it = where.find(p);
      if (it != where.end()) {
        order.erase(it->second);
        where.erase(it);
      }
      continue;
    }
    auto it = where.find(v);
    if (it != where.end()) {
      order.erase(it->second);
    } else {
      ++misses;
      if (static_cast<std::int64_t>(order.size()) == slots) {
        where.erase(order.back());
        order.pop_back();
      }
    }
    order.push_front(v);
    where[v] = order.begin();
  }
  return misses;
}

RC_GTEST_PROP(SimProperties, MrcEqualsASeparateLruSimulationAtEverySize, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  const bool layer_unit = *rc::gen::arbitrary<bool>();
  const Geometry g = tiny_geometry();
  const traces::TraceInput t = random_trace(seed, g, 40);
  const frontend::TraceBounds st = frontend::scan_trace(t);
  const ResidencyUnit unit =
      layer_unit ? ResidencyUnit::layer_page : ResidencyUnit::all_layers_page;
  const MrcResult m = miss_ratio_curve(t, st, unit, true);
  for (std::int64_t n = std::max<std::int64_t>(1, m.max_step_pages); n <= st.peak_pages + 2; ++n) {
    std::int64_t naive = 0;
    for (const auto& s : m.log.states)
      naive += naive_lru_misses(s, n);
    RC_ASSERT(m.curve.misses(n) == naive);
    RC_ASSERT(belady_misses(m.log, n) <= naive);
  }
}

// With one page per step there are no ties in last use, and the core's LRU must miss exactly
// where the stack says, at every pool size, releases included.
RC_GTEST_PROP(SimProperties, CoreMissesEqualStackDistancesWithoutTies, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  std::mt19937_64 rng(seed);
  const PageId pages = 24;
  std::vector<std::int32_t> seq;
  for (int i = 0; i < 300; ++i) {
    const PageId p = static_cast<PageId>(rng() % pages);
    if (rng() % 10 == 0) {
      seq.push_back(QueryLog::release_code(p));
    } else {
      seq.push_back(p);
    }
  }
  StackDistance sd(pages);
  std::vector<std::int64_t> depth;  // per reference
  for (std::int32_t v : seq) {
    if (v >= 0) {
      depth.push_back(sd.reference(v));
    } else {
      sd.release(-2 - v);
    }
  }
  for (SlotId n = 1; n <= pages; ++n) {
    ResidencyState state(pages, n);
    HeapVictims victims(n);
    std::size_t k = 0;
    std::int64_t step = 0;
    std::vector<PageId> miss(1), bypass(1);
    std::vector<SlotId> vic(1);
    std::vector<CopyOp> copies(1);
    for (std::int32_t v : seq) {
      if (v < 0) {
        release_page(state.view(), -2 - v, victims);
        continue;
      }
      const EnsureResult r =
          ensure_pages(state.view(), &v, 1, step++, victims,
                       EnsureScratch{miss.data(), vic.data(), bypass.data()}, copies.data());
      const bool stack_hit = depth[k] > 0 && depth[k] <= n;
      RC_ASSERT((r.hits == 1) == stack_hit);
      ++k;
    }
  }
}

std::string expected_decisions(
    const std::vector<std::tuple<int, std::int64_t, std::vector<PageId>>>& log,
    const std::vector<std::vector<std::pair<std::size_t, PageId>>>& releases, int states,
    PageId pages, SlotId slots, int layers) {
  std::vector<testing::ReferenceLru> refs;
  for (int s = 0; s < states; ++s)
    refs.emplace_back(pages, slots);
  std::ostringstream os;
  std::vector<std::size_t> next_release(states, 0);
  for (std::size_t i = 0; i < log.size(); ++i) {
    const auto& [s, step, q] = log[i];
    for (int r = 0; r < states; ++r) {
      while (next_release[r] < releases[r].size() && releases[r][next_release[r]].first <= i) {
        refs[r].release(releases[r][next_release[r]++].second);
      }
    }
    const auto out = refs[s].ensure(q, step);
    const std::int64_t forward = (step - 1) / 2 / layers;
    for (const CopyOp& c : out.copies) {
      os << "{\"forward\":" << forward << ",\"state\":" << s << ",\"step\":" << step
         << ",\"kind\":\"demand\",\"page\":" << c.page << ",\"slot\":" << c.slot
         << ",\"evicted\":" << c.evicted << "}\n";
    }
  }
  return os.str();
}

RC_GTEST_PROP(SimProperties, EvictionDecisionsEqualTheNaiveReferenceLru, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  const bool layer_unit = *rc::gen::arbitrary<bool>();
  const Geometry g = tiny_geometry();
  const traces::TraceInput t = random_trace(seed, g, 30);
  const frontend::TraceBounds st = frontend::scan_trace(t);
  SimConfig c;
  c.unit = layer_unit ? ResidencyUnit::layer_page : ResidencyUnit::all_layers_page;
  const int states = layer_unit ? g.qsa_layers() : 1;
  c.pool_slots = st.max_rows + st.max_write_pages + *rc::gen::inRange<std::int64_t>(0, 12);
  std::vector<std::tuple<int, std::int64_t, std::vector<PageId>>> log;
  std::vector<std::vector<std::pair<std::size_t, PageId>>> releases(states);
  c.on_query = [&](int s, std::int64_t step, std::span<const PageId> q) {
    log.emplace_back(s, step, std::vector<PageId>(q.begin(), q.end()));
  };
  c.on_release = [&](int s, PageId p) { releases[s].emplace_back(log.size(), p); };
  std::ostringstream got;
  c.decisions = &got;
  simulate(t, st, CostModel(unit_profile()), c);
  RC_ASSERT(got.str() == expected_decisions(log, releases, states, st.peak_pages,
                                            static_cast<SlotId>(c.pool_slots), g.qsa_layers()));
}

RC_GTEST_PROP(SimProperties, BeladyNeverExceedsTheSimulatorsLru, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  const Geometry g = tiny_geometry();
  const traces::TraceInput t = random_trace(seed, g, 30);
  const frontend::TraceBounds st = frontend::scan_trace(t);
  const MrcResult m = miss_ratio_curve(t, st, ResidencyUnit::layer_page, true);
  SimConfig c;
  // A pool that holds every row's every page keeps every selection whole, with no prefill row
  // bypassing it (FrontEnd::plan_rows): the curves' assumption.
  c.pool_slots = st.max_write_pages +
                 std::int64_t{st.max_rows} * g.pages_for_context(st.max_context) +
                 *rc::gen::inRange<std::int64_t>(0, 10);
  const SimResult r = simulate(t, st, CostModel(unit_profile()), c);
  RC_ASSERT(r.total().drops == 0);
  RC_ASSERT(r.total().lookups == m.curve.lookups);
  RC_ASSERT(belady_misses(m.log, c.pool_slots) <= r.total().misses);
}

RC_GTEST_PROP(SimProperties, HybridNeverCopiesAPageSeenOnce, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  const Geometry g = tiny_geometry();
  const traces::TraceInput t = random_trace(seed, g, 30);
  const frontend::TraceBounds st = frontend::scan_trace(t);
  SimConfig c;
  c.policy = MirrorPolicy::hybrid;
  c.pool_slots = st.max_rows + st.max_write_pages + *rc::gen::inRange<std::int64_t>(0, 12);
  // Stamps at which each (state, page) was queried, and at which it was released.
  std::map<std::pair<int, PageId>, std::vector<std::int64_t>> queried, released;
  std::int64_t now = 0;
  c.on_query = [&](int s, std::int64_t step, std::span<const PageId> q) {
    now = step;
    for (PageId p : q) {
      if (p == kNoPage) continue;
      auto& v = queried[{s, p}];
      if (v.empty() || v.back() != step) v.push_back(step);
    }
  };
  c.on_release = [&](int s, PageId p) { released[{s, p}].push_back(now); };
  std::ostringstream got;
  c.decisions = &got;
  simulate(t, st, CostModel(unit_profile()), c);
  std::istringstream in(got.str());
  std::string line;
  int copies = 0;
  while (std::getline(in, line)) {
    const auto field = [&](const std::string& k) {
      const auto at = line.find("\"" + k + "\":") + k.size() + 3;
      return std::stoll(line.substr(at));
    };
    const int s = static_cast<int>(field("state"));
    const PageId p = static_cast<PageId>(field("page"));
    const std::int64_t step = field("step");
    // An earlier query of the same page with no release in between.
    bool earlier = false;
    for (std::int64_t q : queried[{s, p}]) {
      if (q >= step) break;
      bool cut = false;
      for (std::int64_t r : released[{s, p}])
        cut = cut || (r >= q && r < step);
      if (!cut) earlier = true;
    }
    RC_ASSERT(earlier);
    ++copies;
  }
  RC_TAG(copies > 0 ? "copies" : "no copies");
}

TEST(SimDeterminism, SameInputsGiveByteIdenticalDecisions) {
  const Geometry g = tiny_geometry();
  const traces::TraceInput t = random_trace(7, g, 50);
  const frontend::TraceBounds st = frontend::scan_trace(t);
  SimConfig c;
  c.pool_slots = 8;
  std::ostringstream a, b;
  c.decisions = &a;
  const SimResult ra = simulate(t, st, CostModel(unit_profile()), c);
  c.decisions = &b;
  const SimResult rb = simulate(t, st, CostModel(unit_profile()), c);
  EXPECT_EQ(a.str(), b.str());
  EXPECT_FALSE(a.str().empty());
  EXPECT_EQ(ra.compute_end_ns, rb.compute_end_ns);
}

}  // namespace
}  // namespace kvtier::sim
