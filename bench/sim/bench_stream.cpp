// The replay's lookups/s on a miss-heavy page stream (issue 16, item 9): 20M page requests
// (bench/sim/page_stream.hpp), a step per request (plain LRU, what libCacheSim measures).
// BM_Each replays the whole stream in one call of the core's ensure_each (model/ensure_each.hpp),
// the replay of a page-reference stream; BM_Stream calls ensure_pages once a step, a step per
// request or per batch of requests, with the simulator's victim finder (FifoVictims) and the
// heap finder (HeapVictims), without and with the look-ahead hints a replay that reads its trace
// ahead can give (range(4)). The pool holds a fraction of the page space, so most lookups miss
// and the victim search is measured. Prints lookups/s over CPU time (median of 3 runs) and the
// hit rate; never fails on speed. Repeat: build-rel/bench/sim/bench_stream
// --benchmark_filter='Each|Fifo' (bench/README.md; figures in bench/results/planner-speed.md).
#include <benchmark/benchmark.h>

#include <map>
#include <tuple>

#include "bench/sim/page_stream.hpp"
#include "model/ensure.hpp"
#include "model/ensure_each.hpp"
#include "model/victims_fifo.hpp"
#include "model/victims_heap.hpp"

namespace kvtier::bench {
namespace {

// One stream per (zipf, pages): generated once, outside the timed runs.
const std::vector<PageId>& stream(double zipf, PageId pages) {
  static std::map<std::tuple<double, PageId>, std::vector<PageId>> cache;
  auto& s = cache[{zipf, pages}];
  if (s.empty()) s = make_page_stream({.seed = 16, .pages = pages, .zipf = zipf});
  return s;
}

// The figures every run prints: lookups/s over CPU time and the hit rate.
void report(benchmark::State& state, std::int64_t lookups, std::int64_t hits) {
  state.counters["lookups/s"] =
      benchmark::Counter(static_cast<double>(lookups), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(lookups);
}

// range(0): zipf exponent x 100 (0: uniform); range(1): page space; range(2): pool slots;
// range(3): requests per step; range(4): look-ahead, in requests: 0, or how far ahead of its
// ensure the replay hints a request's slot entry (hint_pages), and half as far ahead that
// slot's last use (hint_page_uses), as a replay that reads its trace ahead can.
template <class Finder>
void BM_Stream(benchmark::State& state) {
  const double zipf = static_cast<double>(state.range(0)) / 100.0;
  const auto pages = static_cast<PageId>(state.range(1));
  const auto slots = static_cast<SlotId>(state.range(2));
  const auto per_step = static_cast<int>(state.range(3));
  const auto ahead = static_cast<std::size_t>(state.range(4));
  const std::vector<PageId>& s = stream(zipf, pages);
  std::vector<PageId> miss(per_step);
  std::vector<SlotId> victims(per_step);
  std::vector<CopyOp> copies(per_step);
  std::int64_t lookups = 0, hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ResidencyState st(pages, slots);
    Finder finder(slots);
    state.ResumeTiming();
    std::int64_t step = 0;
    for (std::size_t i = 0; i + per_step <= s.size(); i += per_step, ++step) {
      if (ahead > 0 && i + ahead + per_step <= s.size()) {
        hint_pages(st.view(), s.data() + i + ahead, per_step);
        hint_page_uses(st.view(), s.data() + i + ahead / 2, per_step);
      }
      const EnsureResult r = ensure_pages(st.view(), s.data() + i, per_step, step, finder,
                                          {miss.data(), victims.data(), nullptr}, copies.data());
      if (r.status != EnsureStatus::ok) state.SkipWithError("pool too small");
      lookups += r.lookups;
      hits += r.hits;
    }
  }
  report(state, lookups, hits);
}

// range(0): zipf exponent x 100 (0: uniform); range(1): page space; range(2): pool slots.
template <class Finder>
void BM_Each(benchmark::State& state) {
  const double zipf = static_cast<double>(state.range(0)) / 100.0;
  const auto pages = static_cast<PageId>(state.range(1));
  const auto slots = static_cast<SlotId>(state.range(2));
  const std::vector<PageId>& s = stream(zipf, pages);
  std::int64_t lookups = 0, hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ResidencyState st(pages, slots);
    Finder finder(slots);
    state.ResumeTiming();
    const EnsureEachResult r =
        ensure_each(st.view(), s.data(), static_cast<std::int64_t>(s.size()), 0, finder, nullptr);
    if (r.status != EnsureStatus::ok) state.SkipWithError("pool too small");
    lookups += r.lookups;
    hits += r.hits;
  }
  report(state, lookups, hits);
}
// The streams of stream_args below, one request a step.
void each_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"zipf%", "pages", "slots"});
  b->Args({0, 1 << 12, 1 << 10});   // tiny (cache-resident)
  b->Args({0, 1 << 18, 1 << 16});   // uniform over 4 x the pool
  b->Args({0, 1 << 20, 1 << 18});   // the same, 4 x larger
  b->Args({80, 1 << 22, 1 << 18});  // Zipf 0.8 over 16 x the pool
  b->Iterations(1)->Repetitions(3)->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond);
}
BENCHMARK_TEMPLATE(BM_Each, FifoVictims)->Apply(each_args);

void stream_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"zipf%", "pages", "slots", "per_step", "ahead"});
  for (const std::int64_t ahead : {0, 16}) {
    b->Args({0, 1 << 12, 1 << 10, 1, ahead});   // tiny (cache-resident)
    b->Args({0, 1 << 18, 1 << 16, 1, ahead});   // uniform over 4 x the pool
    b->Args({0, 1 << 20, 1 << 18, 1, ahead});   // the same, 4 x larger
    b->Args({80, 1 << 22, 1 << 18, 1, ahead});  // Zipf 0.8 over 16 x the pool
    b->Args({0, 1 << 20, 1 << 18, 64, ahead});  // uniform, 64 requests per step (a batch of rows)
  }
  b->Iterations(1)->Repetitions(3)->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond);
}
BENCHMARK_TEMPLATE(BM_Stream, FifoVictims)->Apply(stream_args);
BENCHMARK_TEMPLATE(BM_Stream, HeapVictims)->Apply(stream_args);

}  // namespace
}  // namespace kvtier::bench

BENCHMARK_MAIN();
