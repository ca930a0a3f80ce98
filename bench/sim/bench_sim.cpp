// The simulator's figures (issue 4), printed, never failing on speed:
//  - replay speed: `simulate` on a batch-1, 12-layer trace held in memory (records decoded
//    up front, so the figure is the simulator's, not the trace reader's), in page lookups
//    (distinct pages queried per layer-step, the core's ensure input) per second on one core;
//  - the one-pass exact LRU miss-ratio curve: lookups per second and the bytes it holds;
//  - `plan` on the bundled default trace with every core, wall time (the CLI's default run).
// The trace comes from the calibrated generator (dsv4-flash preset, seed 7): one request,
// 131,072-token prompt (2,048 pages per layer) in 2,048-token chunks, then 1,000 decode
// steps; pools of 1,024 slots per layer hold about half a row's pages beyond one step's.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <thread>

#include "model/cost_model.hpp"
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
