// Steps per second of the core's ensure on the CPU: batch 1 and 16, 72 distinct pages per
// row, pools of 4k and 100k slots, with each row replacing ~10 % of its pages per step (the
// overlap sparse-trained indexers show). Figures go to stdout; nothing here fails on speed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "model/ensure.hpp"
#include "model/victims_fifo.hpp"
#include "model/victims_heap.hpp"
#include "model/victims_scan.hpp"

namespace kvtier {
namespace {

constexpr int kPagesPerRow = 72;
constexpr PageId kPagesPerRequest = 16384;  // a 1M-token context per row

// Precomputed steps so the timed loop measures ensure alone.
std::vector<std::vector<PageId>> make_steps(int rows, int steps, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<PageId>> sel(rows);
  for (int r = 0; r < rows; ++r) {
    while (static_cast<int>(sel[r].size()) < kPagesPerRow) {
      const PageId p = r * kPagesPerRequest + static_cast<PageId>(rng() % kPagesPerRequest);
      if (std::find(sel[r].begin(), sel[r].end(), p) == sel[r].end()) sel[r].push_back(p);
    }
  }
  std::vector<std::vector<PageId>> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<PageId> q;
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < kPagesPerRow / 10; ++k) {
        const PageId p = r * kPagesPerRequest + static_cast<PageId>(rng() % kPagesPerRequest);
        if (std::find(sel[r].begin(), sel[r].end(), p) == sel[r].end()) {
          sel[r][rng() % kPagesPerRow] = p;
        }
      }
      q.insert(q.end(), sel[r].begin(), sel[r].end());
    }
    out.push_back(std::move(q));
  }
  return out;
}

template <class Finder>
void BM_Ensure(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const SlotId slots = static_cast<SlotId>(state.range(1));
  const PageId pages = rows * kPagesPerRequest;
  const auto steps = make_steps(rows, 4096, 42);
  ResidencyState st(pages, slots);
  Finder finder = [&] {
    if constexpr (std::is_same_v<Finder, HeapVictims> || std::is_same_v<Finder, FifoVictims>) {
      return Finder(slots);
    } else {
      return ScanVictims{};
    }
  }();
  const std::size_t n = steps[0].size();
  std::vector<PageId> miss(n);
  std::vector<SlotId> vic(n);
  std::vector<CopyOp> copies(n);
  std::int64_t step = 0;
  std::int64_t misses = 0, lookups = 0;
  for (auto _ : state) {
    const auto& q = steps[static_cast<std::size_t>(step) % steps.size()];
    const EnsureResult r =
        ensure_pages(st.view(), q.data(), static_cast<int>(q.size()), step, finder,
                     EnsureScratch{miss.data(), vic.data(), nullptr}, copies.data());
    if (r.status != EnsureStatus::ok) state.SkipWithError("pool too small");
    misses += r.misses;
    lookups += r.lookups;
    ++step;
  }
  state.counters["steps/s"] =
      benchmark::Counter(static_cast<double>(step), benchmark::Counter::kIsRate);
  state.counters["lookups/s"] =
      benchmark::Counter(static_cast<double>(lookups), benchmark::Counter::kIsRate);
  state.counters["misses/step"] = static_cast<double>(misses) / static_cast<double>(step);
}

BENCHMARK_TEMPLATE(BM_Ensure, HeapVictims)
    ->ArgNames({"rows", "slots"})
    ->Args({1, 4096})
    ->Args({1, 100000})
    ->Args({16, 4096})
    ->Args({16, 100000});
BENCHMARK_TEMPLATE(BM_Ensure, FifoVictims)
    ->ArgNames({"rows", "slots"})
    ->Args({1, 4096})
    ->Args({1, 100000})
    ->Args({16, 4096})
    ->Args({16, 100000});
BENCHMARK_TEMPLATE(BM_Ensure, ScanVictims)
    ->ArgNames({"rows", "slots"})
    ->Args({1, 4096})
    ->Args({1, 100000})
    ->Args({16, 4096})
    ->Args({16, 100000});

}  // namespace
}  // namespace kvtier

BENCHMARK_MAIN();
