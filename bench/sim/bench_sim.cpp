// The simulator's figures (issue 4), printed, never failing on speed:
//  - replay speed: `simulate` on a batch-1, 12-layer trace held in memory (records decoded
//    up front, so the figure is the simulator's, not the trace reader's), in page lookups
//    (distinct pages queried per layer-step, the core's ensure input) per second on one core;
//  - the one-pass exact LRU miss-ratio curve: lookups per second and the bytes it holds;
//  - `plan` on the bundled default trace with every core, wall time (the CLI's default run);
//  - the replay's lookups/s on a miss-heavy page stream (issue 16, item 9): `simulate` on the
//    trace of bench/sim/page_stream_trace.hpp, and the core's ensure alone on the same queries.
// The trace comes from the calibrated generator (dsv4-flash preset, seed 7): one request,
// 131,072-token prompt (2,048 pages per layer) in 2,048-token chunks, then 1,000 decode
// steps; pools of 1,024 slots per layer hold about half a row's pages beyond one step's.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <thread>
#include <tuple>

#include "bench/sim/page_stream_trace.hpp"
#include "model/cost_model.hpp"
#include "model/ensure.hpp"
#include "model/victims_fifo.hpp"
#include "sim/mrc.hpp"
#include "sim/planner.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "traces/generator.hpp"

namespace kvtier::sim {
namespace {

struct Loaded {
  traces::TraceInput input;
  frontend::TraceBounds stats;
};

const Loaded& batch1() {
  static const Loaded t = [] {
    traces::GenParams p = traces::gen_preset("dsv4-flash");
    p.seed = 7;
    p.requests = 1;
    p.concurrent = 1;
    p.prompt_min = p.prompt_max = 131072;
    p.decode_min = p.decode_max = 1000;
    traces::TraceHeader h;
    h.producer = "bench_sim batch1";
    traces::TraceGenerator gen(h.geometry, p);
    std::vector<traces::Record> recs;
    traces::Record r;
    while (gen.next(r))
      recs.push_back(r);
    Loaded l{traces::memory_trace("batch1", h, std::move(recs)), {}};
    l.stats = frontend::scan_trace(l.input);
    return l;
  }();
  return t;
}

const CostModel& h200() {
  static const CostModel c(load_profile("h200-pcie5"));
  return c;
}

// range(0): pool slots per state; range(1): 0 layer unit, 1 all-layers unit;
// range(2): policy (0 lru, 1 hybrid, 2 prefetch).
void BM_Replay(benchmark::State& state) {
  const Loaded& t = batch1();
  SimConfig c;
  c.placement = Placement::mirror;
  c.pool_slots = state.range(0);
  c.unit = state.range(1) == 0 ? ResidencyUnit::layer_page : ResidencyUnit::all_layers_page;
  c.policy = static_cast<MirrorPolicy>(state.range(2));
  std::int64_t lookups = 0, misses = 0, steps = 0;
  for (auto _ : state) {
    const SimResult r = simulate(t.input, t.stats, h200(), c);
    const LayerStats s = r.total();
    lookups += s.lookups;
    misses += s.misses;
    steps += r.forwards * t.input.header.geometry.qsa_layers();
    benchmark::DoNotOptimize(r.makespan_ns);
  }
  state.counters["lookups/s"] =
      benchmark::Counter(static_cast<double>(lookups), benchmark::Counter::kIsRate);
  state.counters["layer_steps/s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] =
      1.0 - static_cast<double>(misses) / static_cast<double>(std::max<std::int64_t>(1, lookups));
  state.SetLabel(std::string(to_string(c.unit)) + " " + std::string(to_string(c.policy)));
}
BENCHMARK(BM_Replay)
    ->ArgNames({"slots", "all_layers", "policy"})
    ->Args({1024, 0, 0})
    ->Args({4096, 0, 0})
    ->Args({4096, 1, 0})
    ->Args({1024, 0, 1})
    ->Args({1024, 0, 2})
    ->Unit(benchmark::kMillisecond);

// range(0): 0 layer unit, 1 all-layers unit.
void BM_MrcOnePass(benchmark::State& state) {
  const Loaded& t = batch1();
  const ResidencyUnit unit =
      state.range(0) == 0 ? ResidencyUnit::layer_page : ResidencyUnit::all_layers_page;
  std::int64_t lookups = 0, bytes = 0;
  for (auto _ : state) {
    const MrcResult m = miss_ratio_curve(t.input, t.stats, unit, false);
    lookups += m.curve.lookups;
    bytes = m.peak_bytes;
    benchmark::DoNotOptimize(m.curve.hits_at_depth.data());
  }
  state.counters["lookups/s"] =
      benchmark::Counter(static_cast<double>(lookups), benchmark::Counter::kIsRate);
  state.counters["peak_KiB"] = static_cast<double>(bytes) / 1024.0;
  state.counters["pages"] = static_cast<double>(t.stats.peak_pages);
  state.SetLabel(std::string(to_string(unit)));
}
BENCHMARK(BM_MrcOnePass)->ArgName("all_layers")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The page-stream trace: 256 requests of 256,000 tokens (1,024,256 pages, 4,001 per request),
// ~20M page draws; range(0) rows per forward, range(1) pages per row, range(2) zipf x 100,
// range(3) 1: one pool for every layer (the trace and the recorded queries do not depend on it).
struct StreamCase {
  Loaded trace;
  std::vector<std::int64_t> starts;  // [layer-steps + 1] the queries, flat in `pages`
  std::vector<int> states;           // [layer-steps] the pool each query went to
  std::vector<PageId> pages;
};

SimConfig stream_config(std::int64_t all_layers) {
  SimConfig c;
  c.placement = Placement::mirror;
  c.unit = all_layers != 0 ? ResidencyUnit::all_layers_page : ResidencyUnit::layer_page;
  c.pool_slots = std::int64_t{1} << 18;  // a quarter of the page space: most lookups miss
  c.check_memory = false;  // 12 pools of 262,144 pages outgrow every card; only speed counts
  return c;
}

const StreamCase& stream_case(const benchmark::State& state) {
  static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, StreamCase> cases;
  StreamCase& c = cases[{state.range(0), state.range(1), state.range(2)}];
  if (c.starts.empty()) {
    bench::PageStreamTraceParams p;
    p.rows = static_cast<int>(state.range(0));
    p.pages_per_row = static_cast<int>(state.range(1));
    p.zipf = static_cast<double>(state.range(2)) / 100.0;
    c.trace.input = bench::make_page_stream_trace(p);
    c.trace.stats = frontend::scan_trace(c.trace.input);
    // The queries the layer unit's replay gives its pools (recorded once, for the core alone).
    SimConfig rec = stream_config(0);
    rec.on_query = [&c](int si, std::int64_t, std::span<const PageId> q) {
      c.states.push_back(si);
      std::copy_if(q.begin(), q.end(), std::back_inserter(c.pages),
                   [](PageId page) { return page != kNoPage; });  // padding would double the memory
      c.starts.push_back(std::ssize(c.pages));
    };
    c.starts.push_back(0);
    simulate(c.trace.input, c.trace.stats, h200(), rec);
  }
  return c;
}

void stream_args(benchmark::internal::Benchmark* b, bool all_layers) {
  b->ArgNames({"rows", "pages_per_row", "zipf%", "all_layers"});
  b->Args({1, 512, 0, 0});   // a decode row at a time, every chosen block in its own page
  b->Args({1, 512, 80, 0});  // the same, Zipf 0.8 over each request's pages
  b->Args({1, 64, 0, 0});    // 64 pages a layer-step (the row's other entries padding)
  b->Args({8, 512, 0, 0});   // 8 rows a forward: 4,104 entries a layer-step
  if (all_layers) b->Args({1, 512, 0, 1});  // one pool for every layer
  b->Iterations(1)->Repetitions(3)->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond);
}

// The simulator's replay of the page-stream trace: lookups (distinct pages a layer-step
// queries) per second of CPU time, everything included (front end, compaction, ensure,
// translate, pricing, the timeline).
void BM_ReplayStream(benchmark::State& state) {
  const StreamCase& c = stream_case(state);
  const SimConfig cfg = stream_config(state.range(3));
  std::int64_t lookups = 0, hits = 0;
  for (auto _ : state) {
    const SimResult r = simulate(c.trace.input, c.trace.stats, h200(), cfg);
    lookups += r.total().lookups;
    hits += r.total().hits;
    benchmark::DoNotOptimize(r.makespan_ns);
  }
  state.counters["lookups/s"] =
      benchmark::Counter(static_cast<double>(lookups), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(lookups);
}
BENCHMARK(BM_ReplayStream)->Apply([](auto* b) { stream_args(b, true); });

// The core alone on the layer unit's queries of the same trace, their padding left out:
// ensure_pages with FifoVictims into one pool per layer, without the replay around it (the
// ceiling of BM_ReplayStream's layer unit).
void BM_EnsureStreamQueries(benchmark::State& state) {
  const StreamCase& c = stream_case(state);
  const auto slots = static_cast<SlotId>(stream_config(0).pool_slots);
  std::int64_t widest = 0;
  for (std::size_t i = 0; i + 1 < c.starts.size(); ++i)
    widest = std::max(widest, c.starts[i + 1] - c.starts[i]);
  std::vector<PageId> miss(widest);
  std::vector<SlotId> victims(widest);
  std::vector<CopyOp> copies(widest);
  const int pools = 1 + *std::max_element(c.states.begin(), c.states.end());
  std::int64_t lookups = 0, hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<ResidencyState> st;
    std::vector<FifoVictims> finders;
    for (int i = 0; i < pools; ++i) {
      st.emplace_back(c.trace.stats.peak_pages, slots);
      finders.emplace_back(slots);
    }
    state.ResumeTiming();
    for (std::size_t i = 0; i < c.states.size(); ++i) {
      const auto si = static_cast<std::size_t>(c.states[i]);
      const EnsureResult r = ensure_pages(st[si].view(), c.pages.data() + c.starts[i],
                                          static_cast<int>(c.starts[i + 1] - c.starts[i]),
                                          static_cast<std::int64_t>(i), finders[si],
                                          {miss.data(), victims.data(), nullptr}, copies.data());
      if (r.status != EnsureStatus::ok) state.SkipWithError("pool too small");
      lookups += r.hits + r.misses;  // distinct pages, as the replay counts (a write page is
      hits += r.hits;                // also its row's causal tail)
    }
  }
  state.counters["lookups/s"] =
      benchmark::Counter(static_cast<double>(lookups), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(lookups);
}
BENCHMARK(BM_EnsureStreamQueries)->Apply([](auto* b) { stream_args(b, false); });

// `kvtier plan` with its defaults (every placement, both units, 10 sizes, Belady) on the
// bundled default trace, or on $KVTIER_BENCH_TRACE. Wall time with every core.
void BM_PlanDefault(benchmark::State& state) {
  std::string path;
  if (const char* env = std::getenv("KVTIER_BENCH_TRACE")) {
    path = env;
  } else {
    try {
      path = traces::default_sample_path();
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
  if (path.empty()) {
    state.SkipWithError("no bundled sample trace in this build");
    return;
  }
  const traces::TraceInput input = traces::file_trace(path);
  PlanConfig cfg;
  double forwards = 0;
  for (auto _ : state) {
    const PlanResult r = plan(input, h200(), cfg);
    forwards = static_cast<double>(r.stats.forwards);
    benchmark::DoNotOptimize(r.min_slots);
  }
  state.counters["forwards"] = forwards;
  state.counters["threads"] = static_cast<double>(std::thread::hardware_concurrency());
  state.SetLabel(path);
}
BENCHMARK(BM_PlanDefault)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);

}  // namespace
}  // namespace kvtier::sim

BENCHMARK_MAIN();
