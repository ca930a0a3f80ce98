// The mirror's residency step over lookups x pool slots x misses: MirrorEngine::
// residency_step_async (compaction + ensure + miss copy + translate in one launch; ensure) and
// residency_beside_async (the same step on a few SMs without the translate, as the mirror in
// place runs it beside the attention; ensure_beside).
//
// Each call of a timed graph is one layer-step of `rows` decode rows: 512 selected blocks of a
// 128k-token context per row, compacted at 513 pages per row behind one written page per row. The
// pool is full (slot s holds page s); the rows' tables point into its more recently used half, and
// `misses` of the pages a step's rows touch are replaced by pages never seen, so that the step
// installs them over slots of the older half. The state is restored before every replay; the
// misses each point reports are the ensure's own counts.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/engine.hpp"
#include "cuda/kernels.hpp"
#include "model/page_space.hpp"

namespace kvtier::calibrate {
namespace {

constexpr int kBlocks = 512;         // selected blocks per row
constexpr int kWidth = kBlocks + 1;  // compaction width: every page a row can touch, the tail's too
constexpr int kContextPages = 2048;  // 128k tokens
constexpr int kPageSize = 64;
constexpr int kRatio = 4;
constexpr int kMaxCalls = 8;
constexpr std::int64_t kStepBase = 1000;  // stamps of the pool's pages are below it

// One pool of `slots` slots, full, and the state it starts every replay from.
struct Pool {
  SlotId slots;
  PageId pages;  // slots + pages never seen (the misses of every call)
  cuda::MirrorEngine engine;
  cuda::DeviceArray<SlotId> slot_of_page;
  cuda::DeviceArray<PageId> page_of_slot;
  cuda::DeviceArray<std::int64_t> last_use;

  Pool(Bench& b, SlotId s, PageId p, int max_query)
      : slots(s),
        pages(p),
        // residency cost only: a 16-byte page, so that the copy of the misses weighs nothing
        engine({PageLayout::make(1, 1, 1, 8, false), ResidencyUnit::layer_page, p, s, max_query,
                cuda::EnsureForm::block}) {
    std::vector<SlotId> sop(static_cast<std::size_t>(p), kNoSlot);
    std::vector<PageId> pos(static_cast<std::size_t>(s));
    std::vector<std::int64_t> lu(static_cast<std::size_t>(s));
    std::uniform_int_distribution<std::int64_t> older(0, kStepBase / 2 - 1),
        recent(kStepBase / 2, kStepBase - 1);
    for (SlotId i = 0; i < s; ++i) {
      sop[static_cast<std::size_t>(i)] = i;
      pos[static_cast<std::size_t>(i)] = i;
      lu[static_cast<std::size_t>(i)] = i < s / 2 ? older(b.rng) : recent(b.rng);
    }
    slot_of_page = to_device(sop);
    page_of_slot = to_device(pos);
    last_use = to_device(lu);
  }
  void restore(cudaStream_t st) const {
    const ResidencyView v = engine.device_view(0);
    KVT_CUDA_CHECK(cudaMemcpyAsync(v.slot_of_page, slot_of_page.get(), slot_of_page.bytes(),
                                   cudaMemcpyDeviceToDevice, st));
    KVT_CUDA_CHECK(cudaMemcpyAsync(v.page_of_slot, page_of_slot.get(), page_of_slot.bytes(),
                                   cudaMemcpyDeviceToDevice, st));
    KVT_CUDA_CHECK(cudaMemcpyAsync(v.last_use, last_use.get(), last_use.bytes(),
                                   cudaMemcpyDeviceToDevice, st));
  }
};

// The rows of every call of one point ([calls][rows][...]) and what the steps write.
struct Steps {
  int rows = 0, calls = 0, n = 0;  // n: query entries per call (rows written + rows x width)
  cuda::DeviceArray<std::int32_t> blocks;  // [calls][rows][512]
  cuda::DeviceArray<std::int64_t> pos, len;
  cuda::DeviceArray<PageId> tables;  // [calls][rows][kContextPages]
  cuda::DeviceArray<PageId> query;   // [calls][n], the written pages first
  cuda::DeviceArray<SlotId> physical;
  cuda::DeviceArray<std::int64_t> stamps;  // [calls]
  cuda::DeviceArray<long long> totals;     // hits, misses, evictions
  cuda::DeviceArray<int> counters;         // dropped, bad rows, missing
};

Steps make_steps(Bench& b, const Pool& pool, int rows, int misses, int calls) {
  Steps st;
  st.rows = rows;
  st.calls = calls;
  st.n = rows * (1 + kWidth);
  const auto hot = static_cast<std::int32_t>(pool.slots / 2);  // tables point at [hot, slots)
  std::vector<std::int32_t> blocks;
  std::vector<PageId> tables, query;
  PageId fresh = pool.slots;
  const std::vector<int> per_row = spread(misses, rows);
  for (int c = 0; c < calls; ++c) {
    std::vector<PageId> written;
    for (int r = 0; r < rows; ++r) {
      std::vector<PageId> table = scattered_tables(b.rng, 1, kContextPages, hot);
      for (auto& p : table)
        p += hot;
      const std::vector<std::int32_t> chosen =
          sample_sorted(b.rng, kContextPages * (kPageSize / kRatio) - 1, kBlocks);
      std::vector<std::int32_t> touched;  // table entries the blocks read, the tail's page apart
      for (const std::int32_t blk : chosen) {
        const std::int32_t e = blk * kRatio / kPageSize;
        if (e != kContextPages - 1 && (touched.empty() || touched.back() != e))
          touched.push_back(e);
      }
      const int m = per_row[static_cast<std::size_t>(r)];
      if (m > static_cast<int>(touched.size()))
        throw std::logic_error("calibration: " + std::to_string(m) + " misses in a row touching " +
                               std::to_string(touched.size()) + " pages");
      std::shuffle(touched.begin(), touched.end(), b.rng);
      for (int i = 0; i < m; ++i)
        table[static_cast<std::size_t>(touched[static_cast<std::size_t>(i)])] = fresh++;
      if (fresh > pool.pages) throw std::logic_error("calibration: too few pages never seen");
      blocks.insert(blocks.end(), chosen.begin(), chosen.end());
      written.push_back(table.back());
      tables.insert(tables.end(), table.begin(), table.end());
    }
    query.insert(query.end(), written.begin(), written.end());
    query.insert(query.end(), static_cast<std::size_t>(rows) * kWidth, kNoPage);
  }
  st.blocks = to_device(blocks);
  st.pos = to_device(std::vector<std::int64_t>(static_cast<std::size_t>(rows),
                                               std::int64_t{kContextPages} * kPageSize - 1));
  st.len = to_device(std::vector<std::int64_t>(static_cast<std::size_t>(rows), kContextPages));
  st.tables = to_device(tables);
  st.query = to_device(query);
  st.physical = cuda::DeviceArray<SlotId>(tables.size());
  std::vector<std::int64_t> stamps;
  for (int c = 0; c < calls; ++c)
    stamps.push_back(kStepBase + c);
  st.stamps = to_device(stamps);
  st.totals = cuda::DeviceArray<long long>(3);
  st.counters = to_device(std::vector<int>(3, 0));
  return st;
}

// Times one form of the step at one point and appends [lookups, slots, misses per call, us]; the
// misses are the ensure's counts of the last replay.
void time_step(Bench& b, Pool& pool, const Steps& st, bool beside, Series& s) {
  auto enqueue = [&](int c, cudaStream_t cs) {
    PageId* q = st.query.get() + std::int64_t{c} * st.n;
    const PageId* table = st.tables.get() + std::int64_t{c} * st.rows * kContextPages;
    const cuda::CompactParams cp{st.blocks.get() + std::int64_t{c} * st.rows * kBlocks,
                                 st.pos.get(),
                                 table,
                                 st.len.get(),
                                 q + st.rows,
                                 st.counters.get(),
                                 st.counters.get() + 1,
                                 st.rows,
                                 kBlocks,
                                 kContextPages,
                                 kWidth,
                                 kRatio,
                                 kPageSize};
    const cuda::EnsureHooks hooks{st.stamps.get() + c, st.totals.get()};
    if (beside) {
      pool.engine.residency_beside_async(0, cp, q, st.n, cs, hooks);
    } else {
      SlotId* out = st.physical.get() + std::int64_t{c} * st.rows * kContextPages;
      pool.engine.residency_step_async(
          0, cp, q, st.n,
          {table, out, st.rows * kContextPages, dummy_slot(pool.slots), st.counters.get() + 2}, cs,
          hooks);
    }
  };
  const Enqueue before = [&](cudaStream_t cs) {
    pool.restore(cs);
    KVT_CUDA_CHECK(cudaMemsetAsync(st.totals.get(), 0, st.totals.bytes(), cs));
  };
  const double us = b.kernel_us(enqueue, before, st.calls);
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  long long totals[3] = {};
  int counters[3] = {};
  KVT_CUDA_CHECK(cudaMemcpy(totals, st.totals.get(), sizeof totals, cudaMemcpyDeviceToHost));
  KVT_CUDA_CHECK(cudaMemcpy(counters, st.counters.get(), sizeof counters, cudaMemcpyDeviceToHost));
  const cuda::MirrorEngine::Counters ec = pool.engine.read_counters();
  if (ec.ensure_errors != 0 || counters[1] != 0)
    throw std::logic_error("calibration: the residency step reported " +
                           std::to_string(ec.ensure_errors) + " ensure errors and " +
                           std::to_string(counters[1]) + " bad rows");
  const int calls = b.timer.last_calls();
  s.points.push_back({static_cast<double>(st.n), static_cast<double>(pool.slots),
                      static_cast<double>(totals[1]) / calls, us});
}

}  // namespace

void run_residency(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const int max_rows = *std::max_element(g.ensure_rows.begin(), g.ensure_rows.end());
  const int max_misses = *std::max_element(g.ensure_misses.begin(), g.ensure_misses.end());
  const int calls = std::min(g.max_calls, kMaxCalls);
  const std::string timing =
      "graph of layer-steps over other rows each, the state restored and "
      "a pad before each replay; per step";
  Series step = file_series("ensure",
                            "MirrorEngine::residency_step_async (one launch, block form): "
                            "compaction + ensure + copy + translate",
                            timing);
  Series beside = file_series("ensure_beside",
                              "MirrorEngine::residency_beside_async (4 blocks, no translate): "
                              "compaction + ensure + copy, as the mirror in place runs it",
                              timing);
  for (const int slots : g.ensure_slots) {
    if (stop_sweep(b, step)) break;
    if (slots / 2 < kContextPages || slots / 2 < calls * max_misses)
      throw std::logic_error("calibration: a pool of " + std::to_string(slots) +
                             " slots is too small for the residency sweep");
    Pool pool(b, slots, slots + calls * max_misses + 1, max_rows * (1 + kWidth));
    for (const int rows : g.ensure_rows) {
      for (const int misses : g.ensure_misses) {
        if (stop_sweep(b, step)) break;
        const Steps st = make_steps(b, pool, rows, misses, calls);
        time_step(b, pool, st, false, step);
        time_step(b, pool, st, true, beside);
      }
    }
  }
  beside.truncated = step.truncated;
  emit(std::move(step));
  emit(std::move(beside));
}

}  // namespace kvtier::calibrate
