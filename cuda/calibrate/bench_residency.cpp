// The mirror's residency step over lookups x pool slots x misses: MirrorEngine::
// residency_step_async (compaction + ensure + miss copy + translate in one launch; ensure) and
// residency_beside_async (the same step on a few SMs without the translate, as the mirror in
// place runs it beside the attention; ensure_beside: timed in that schedule, a layer a call).
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
#include "cuda/kv_banks.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
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

// The layer the mirror's residency step runs beside in the in-place decode forwards, as the
// trace replay runs it (frontend::beside_join): the store of one new token, then the attend of
// one decode row (2,051 selected tokens of a context scattered over a bf16 device pool, through
// a table that may read in place: the attend's in-place form), on the timed stream; the step on
// the stream beside after the previous layer's step; each layer's store after the step two
// layers back. The attend is one row whatever the step's rows, so that what the points add over
// the step alone is its wait for an SM (its 1,024-thread blocks need one that the attend's CTAs
// have left) and not a longer attend; on the H200 that wait was about the same for replays of
// 1 to 8 rows (validation/results/h200-2026-12-02-round6.md).
class BesideLayer {
 public:
  BesideLayer(Bench& b, int n_calls)
      : calls_(n_calls), context_pages_(b.grid.context_pages), pool_(layout_, b.grid.bank_pages) {
    b.filler.fill(pool_, b.stream());
    const std::int64_t context = std::int64_t{context_pages_} * layout_.page_size;
    std::vector<std::int32_t> t;
    for (int i = 0; i < calls_; ++i) {
      const std::vector<std::int32_t> p = decode_positions(b.rng, context, kTokens);
      t.insert(t.end(), p.begin(), p.end());
    }
    tokens_ = to_device(t);
    tables_ = to_device(scattered_tables(b.rng, calls_, context_pages_, b.grid.bank_pages));
    zero_ = to_device(std::vector<std::int32_t>{0});
    pos_ = to_device(std::vector<std::int32_t>{static_cast<std::int32_t>(context - 1)});
    q_ = cuda::DeviceArray<std::uint16_t>(std::size_t{kQHeads} * qsa::kHeadDim);
    kv_new_ = cuda::DeviceArray<std::uint16_t>(std::size_t{2} * layout_.kv_heads * qsa::kHeadDim);
    b.filler.fill(q_.get(), q_.bytes(), Pattern::bf16, b.stream());
    b.filler.fill(kv_new_.get(), kv_new_.bytes(), Pattern::bf16, b.stream());
    splits_ = qsa::attend_default_splits(1, layout_.kv_heads, kTokens);
    work_ = cuda::DeviceArray<float>(
        static_cast<std::size_t>(qsa::attend_workspace_floats(1, kQHeads, splits_)));
    o_ = cuda::DeviceArray<float>(q_.size());
    std::vector<std::byte*> banks;
    for (int i = 0; i < pool_.banks(); ++i)
      banks.push_back(pool_.bank(i));
    kv_ = cuda::layer_kv_banks(layout_, 0, banks.data(), false);
    settle();
  }
  // Layer c: `step` enqueues the residency step on the stream beside.
  template <class Step>
  void layer(int c, cudaStream_t s, const Step& step) const {
    qsa::PageTable pt{tables_.get() + std::int64_t{c} * context_pages_, context_pages_,
                      dummy_slot(pool_.num_slots())};
    if (c >= 2) KVT_CUDA_CHECK(cudaStreamWaitEvent(s, join_[c % 2]));
    const qsa::Rows row{zero_.get(), pos_.get(), 1};
    const std::int64_t kv_row = std::int64_t{layout_.kv_heads} * qsa::kHeadDim;
    qsa::store_kv(kv_new_.get(), kv_new_.get() + kv_row, row, kv_, pt, qsa::KvBanks{},
                  qsa::PageTable{}, s);
    KVT_CUDA_CHECK(cudaEventRecord(fork_, s));
    KVT_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_));
    step(side_.get());
    KVT_CUDA_CHECK(cudaEventRecord(join_[c % 2], side_));
    pt.in_place = kv_;  // every entry is in the pool: the in-place form, reading the pool only
    qsa::attend(q_.get(), kQHeads, row, tokens_.get() + std::int64_t{c} * kTokens, kTokens, kv_, pt,
                splits_, work_.get(), o_.get(), nullptr, s);
  }
  // After the last layer: the steps still running beside join the timed stream.
  void finish(cudaStream_t s) const {
    KVT_CUDA_CHECK(cudaEventRecord(end_, side_));
    KVT_CUDA_CHECK(cudaStreamWaitEvent(s, end_));
  }

 private:
  static constexpr int kTokens = 2051;
  static constexpr int kQHeads = 24;
  int calls_, context_pages_;
  PageLayout layout_ = qsa_layer_layout(false);
  cuda::DevicePool pool_;
  qsa::KvBanks kv_;  // the pool's banks as the store and the attend take them
  cuda::DeviceArray<std::int32_t> tables_, tokens_, zero_, pos_;
  cuda::DeviceArray<std::uint16_t> q_, kv_new_;
  cuda::DeviceArray<float> work_, o_;
  int splits_ = 1;
  cuda::Stream side_ = cuda::make_stream();
  cuda::Event fork_ = cuda::make_event(false), end_ = cuda::make_event(false);
  cuda::Event join_[2] = {cuda::make_event(false), cuda::make_event(false)};
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
// misses are the ensure's counts of the last replay. Beside (`layer` given): each call is a layer
// of BesideLayer's, the step beside.
void time_step(Bench& b, Pool& pool, const Steps& st, const BesideLayer* layer, Series& s) {
  const bool beside = layer != nullptr;
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
      layer->layer(c, cs, [&](cudaStream_t side) {
        pool.engine.residency_beside_async(0, cp, q, st.n, side, hooks);
      });
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
  const Enqueue after = [&](cudaStream_t cs) {
    if (beside) layer->finish(cs);
  };
  const double us = b.kernel_us(enqueue, before, st.calls, after);
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
                              "compaction + ensure + copy, as the mirror in place runs it: a "
                              "layer per call, beside the store and attend of one decode row "
                              "(2,051 tokens, bf16 device banks, in-place form), after the "
                              "previous layer's step",
                              timing);
  const BesideLayer layer(b, calls);
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
        time_step(b, pool, st, nullptr, step);
        time_step(b, pool, st, &layer, beside);
      }
    }
  }
  beside.truncated = step.truncated;
  emit(std::move(step));
  emit(std::move(beside));
}

}  // namespace kvtier::calibrate
