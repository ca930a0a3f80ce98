// The mirror's residency step over lookups x pool slots x misses: MirrorEngine::
// residency_step_async (compaction + ensure + miss copy + translate in one launch; ensure) and
// residency_beside_async (the same step on a few SMs without the translate, as the mirror in
// place runs it beside the attention; step_beside*: timed in that schedule, a layer a call).
//
// Each call of a timed graph is one layer-step of `rows` decode rows: 512 selected blocks per row
// of a context of `context pages` pages (2,048 for ensure: 128k tokens), compacted at every page a
// row can touch behind one written page per row. The pool is full (slot s holds page s); the rows'
// tables point into its more recently used half, each row at a run of consecutive pages, and
// `misses` of the pages a step's rows touch are replaced by pages never seen, so that the step
// installs them over slots of the older half. The state is restored before every replay; the
// misses each point reports are the ensure's own counts.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/engine.hpp"
#include "cuda/kernels.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "model/cost_model.hpp"
#include "model/page_space.hpp"

namespace kvtier::calibrate {
namespace {

constexpr int kBlocks = 512;         // selected blocks per row
constexpr int kWidth = kBlocks + 1;  // compaction width at most: a page per block and the tail's
constexpr int kContextPages = 2048;  // 128k tokens: the ensure series' rows
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

  // The default layout: residency cost only, a 16-byte page, so that the copy of the misses
  // weighs nothing; step_beside_copy's pool has the QSA layer's pages.
  Pool(Bench& b, SlotId s, PageId p, int max_query,
       const PageLayout& layout = PageLayout::make(1, 1, 1, 8, false))
      : slots(s),
        pages(p),
        engine({layout, ResidencyUnit::layer_page, p, s, max_query, cuda::EnsureForm::block}) {
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

// The bank the layers beside attend: a bf16 device pool of the grid's bank pages, filled once.
struct BesideBank {
  PageLayout layout = qsa_layer_layout(false);
  cuda::DevicePool pool;
  qsa::KvBanks kv;  // the pool's banks as the store and the attend take them

  explicit BesideBank(Bench& b) : pool(layout, b.grid.bank_pages) {
    b.filler.fill(pool, b.stream());
    kv = layer_banks(pool);
  }
};

// The layer the mirror's residency step runs beside in the in-place decode forwards, as the
// trace replay runs it (frontend::beside_join): the store of one new token a row, then the
// attend of the step's `rows` decode rows (2,051 selected tokens each of a context scattered
// over the bank, through tables that may read in place: the attend's in-place form), on the
// timed stream; the step on the stream beside after the previous layer's step; each layer's
// store after the step two layers back. The attend has the step's rows, as in the replay: the
// step's dependent loads share the memory system with it, and on the H200 the replay's steps of
// 4 - 32 rows took 20 - 60 % longer beside their attention than the calibration's had beside
// one row (validation/results/h200-2026-12-03-round8.md).
class BesideLayer {
 public:
  BesideLayer(Bench& b, const BesideBank& bank, int rows, int n_calls)
      : rows_(rows), calls_(n_calls), context_pages_(b.grid.context_pages), bank_(bank) {
    const std::int64_t context = std::int64_t{context_pages_} * bank.layout.page_size;
    std::vector<std::int32_t> t;
    for (int i = 0; i < calls_ * rows_; ++i) {
      const std::vector<std::int32_t> p = decode_positions(b.rng, context, kTokens);
      t.insert(t.end(), p.begin(), p.end());
    }
    tokens_ = to_device(t);
    tables_ = to_device(scattered_tables(b.rng, calls_ * rows_, context_pages_, b.grid.bank_pages));
    std::vector<std::int32_t> req(static_cast<std::size_t>(rows_));
    for (int r = 0; r < rows_; ++r)
      req[static_cast<std::size_t>(r)] = r;
    req_ = to_device(req);
    pos_ = to_device(std::vector<std::int32_t>(static_cast<std::size_t>(rows_),
                                               static_cast<std::int32_t>(context - 1)));
    const std::int64_t kv_row = std::int64_t{bank.layout.kv_heads} * qsa::kHeadDim;
    q_ = cuda::DeviceArray<std::uint16_t>(std::size_t(rows_) * kQHeads * qsa::kHeadDim);
    k_new_ = cuda::DeviceArray<std::uint16_t>(static_cast<std::size_t>(rows_ * kv_row));
    v_new_ = cuda::DeviceArray<std::uint16_t>(static_cast<std::size_t>(rows_ * kv_row));
    for (auto* a : {&q_, &k_new_, &v_new_})
      b.filler.fill(a->get(), a->bytes(), Pattern::bf16, b.stream());
    splits_ = qsa::attend_default_splits(rows_, bank.layout.kv_heads, kTokens);
    work_ = cuda::DeviceArray<float>(
        static_cast<std::size_t>(qsa::attend_workspace_floats(rows_, kQHeads, splits_)));
    o_ = cuda::DeviceArray<float>(q_.size());
    settle();
  }
  // Layer c: `step` enqueues the residency step on the stream beside.
  template <class Step>
  void layer(int c, cudaStream_t s, const Step& step) const {
    qsa::PageTable pt{tables_.get() + std::int64_t{c} * rows_ * context_pages_, context_pages_,
                      dummy_slot(bank_.pool.num_slots())};
    if (c >= 2) KVT_CUDA_CHECK(cudaStreamWaitEvent(s, join_[c % 2]));
    const qsa::Rows rows{req_.get(), pos_.get(), rows_};
    qsa::store_kv(k_new_.get(), v_new_.get(), rows, bank_.kv, pt, qsa::KvBanks{}, qsa::PageTable{},
                  s);
    KVT_CUDA_CHECK(cudaEventRecord(fork_, s));
    KVT_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_));
    step(side_.get());
    KVT_CUDA_CHECK(cudaEventRecord(join_[c % 2], side_));
    pt.in_place = bank_.kv;  // every entry is in the pool: the in-place form, reading the pool only
    qsa::attend(q_.get(), kQHeads, rows, tokens_.get() + std::int64_t{c} * rows_ * kTokens, kTokens,
                bank_.kv, pt, splits_, work_.get(), o_.get(), nullptr, s);
  }
  // After the last layer: the steps still running beside join the timed stream.
  void finish(cudaStream_t s) const {
    KVT_CUDA_CHECK(cudaEventRecord(end_, side_));
    KVT_CUDA_CHECK(cudaStreamWaitEvent(s, end_));
  }

 private:
  static constexpr int kTokens = 2051;
  static constexpr int kQHeads = 24;
  int rows_, calls_, context_pages_;
  const BesideBank& bank_;
  cuda::DeviceArray<std::int32_t> tables_, tokens_, req_, pos_;
  cuda::DeviceArray<std::uint16_t> q_, k_new_, v_new_;
  cuda::DeviceArray<float> work_, o_;
  int splits_ = 1;
  cuda::Stream side_ = cuda::make_stream();
  cuda::Event fork_ = cuda::make_event(false), end_ = cuda::make_event(false);
  cuda::Event join_[2] = {cuda::make_event(false), cuda::make_event(false)};
};

// The rows of every call of one point ([calls][rows][...]) and what the steps write.
struct Steps {
  int rows = 0, calls = 0, n = 0;  // n: query entries per call (rows written + rows x width)
  int context_pages = 0;           // of each row's request
  int width = 0;                   // compaction width: every page a row can touch
  double pages = 0;                // query entries that are pages (not padding), per call
  cuda::DeviceArray<std::int32_t> blocks;  // [calls][rows][512]
  cuda::DeviceArray<std::int64_t> pos, len;
  cuda::DeviceArray<PageId> tables;  // [calls][rows][context_pages]
  cuda::DeviceArray<PageId> query;   // [calls][n], the written pages first
  cuda::DeviceArray<SlotId> physical;
  cuda::DeviceArray<std::int64_t> stamps;  // [calls]
  cuda::DeviceArray<long long> totals;     // hits, misses, evictions
  cuda::DeviceArray<int> counters;         // dropped, bad rows, missing
};

// Whether every row of a step can miss its share of `misses` (the tail's page never misses).
bool misses_fit(int rows, int misses, int context_pages) {
  return (misses + rows - 1) / rows <= std::min(context_pages / 2, 256);
}

Steps make_steps(Bench& b, const Pool& pool, int rows, int misses, int calls, int context_pages) {
  Steps st;
  st.rows = rows;
  st.calls = calls;
  st.context_pages = context_pages;
  st.width = std::min(kWidth, context_pages);
  st.n = rows * (1 + st.width);
  const auto hot = static_cast<std::int32_t>(pool.slots / 2);  // tables point at [hot, slots)
  std::vector<std::int32_t> blocks;
  std::vector<PageId> tables, query;
  PageId fresh = pool.slots;
  const std::vector<int> per_row = spread(misses, rows);
  // A row's pages are a run of consecutive pages, as a request's are, and so are the slots that
  // hold them (slot s holds page s); the runs of a step's rows follow each other through the
  // pool's hot half (and wrap around it past its end), those of the next call after them.
  std::int64_t run = 0;
  for (int c = 0; c < calls; ++c) {
    std::vector<PageId> written;
    for (int r = 0; r < rows; ++r) {
      std::vector<PageId> table(static_cast<std::size_t>(context_pages));
      for (std::size_t e = 0; e < table.size(); ++e)
        table[e] = hot + static_cast<PageId>((run + static_cast<std::int64_t>(e)) % hot);
      run += context_pages;
      const std::vector<std::int32_t> chosen =
          sample_sorted(b.rng, context_pages * (kPageSize / kRatio) - 1, kBlocks);
      std::vector<std::int32_t> touched;  // table entries the blocks read, the tail's page apart
      for (const std::int32_t blk : chosen) {
        const std::int32_t e = blk * kRatio / kPageSize;
        if (e != context_pages - 1 && (touched.empty() || touched.back() != e))
          touched.push_back(e);
      }
      st.pages += static_cast<double>(touched.size() + 2) / calls;  // the row's, tail, written
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
    query.insert(query.end(), static_cast<std::size_t>(rows) * st.width, kNoPage);
  }
  st.blocks = to_device(blocks);
  st.pos = to_device(std::vector<std::int64_t>(static_cast<std::size_t>(rows),
                                               std::int64_t{context_pages} * kPageSize - 1));
  st.len = to_device(std::vector<std::int64_t>(static_cast<std::size_t>(rows), context_pages));
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

// What one timing of a step gave: its median us and the ensure's misses per call.
struct StepTiming {
  double us = 0, misses = 0;
};

// Times one form of the step at one point; the counts are the ensure's of the last replay.
// Beside (`layer` given): each call is a layer of BesideLayer's, the step beside.
StepTiming time_step(Bench& b, Pool& pool, const Steps& st, const BesideLayer* layer) {
  const bool beside = layer != nullptr;
  auto enqueue = [&](int c, cudaStream_t cs) {
    PageId* q = st.query.get() + std::int64_t{c} * st.n;
    const PageId* table = st.tables.get() + std::int64_t{c} * st.rows * st.context_pages;
    const cuda::CompactParams cp{st.blocks.get() + std::int64_t{c} * st.rows * kBlocks,
                                 st.pos.get(),
                                 table,
                                 st.len.get(),
                                 q + st.rows,
                                 st.counters.get(),
                                 st.counters.get() + 1,
                                 st.rows,
                                 kBlocks,
                                 st.context_pages,
                                 st.width,
                                 kRatio,
                                 kPageSize};
    const cuda::EnsureHooks hooks{st.stamps.get() + c, st.totals.get()};
    if (beside) {
      layer->layer(c, cs, [&](cudaStream_t side) {
        pool.engine.residency_beside_async(0, cp, q, st.n, side, hooks);
      });
    } else {
      SlotId* out = st.physical.get() + std::int64_t{c} * st.rows * st.context_pages;
      pool.engine.residency_step_async(
          0, cp, q, st.n,
          {table, out, st.rows * st.context_pages, dummy_slot(pool.slots), st.counters.get() + 2},
          cs, hooks);
    }
  };
  const Enqueue before = [&](cudaStream_t cs) {
    pool.restore(cs);
    KVT_CUDA_CHECK(cudaMemsetAsync(st.totals.get(), 0, st.totals.bytes(), cs));
  };
  const Enqueue after = [&](cudaStream_t cs) {
    if (beside) layer->finish(cs);
  };
  StepTiming t;
  t.us = b.kernel_us(enqueue, before, st.calls, after);
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
  t.misses = static_cast<double>(totals[1]) / calls;
  return t;
}

// The step beside at one point: [rows, pages, slots, misses, us], the pages being the query's
// entries that are not padding (in the replay, each row's distinct pages and its written one).
void time_beside(Bench& b, Pool& pool, const Steps& st, const BesideLayer& layer, Series& s) {
  const StepTiming t = time_step(b, pool, st, &layer);
  s.points.push_back(
      {static_cast<double>(st.rows), st.pages, static_cast<double>(pool.slots), t.misses, t.us});
}

// step_beside_copy: the copy of the step beside's misses by its own few blocks. The step beside
// one row at 1,024 slots, the same rows and misses timed twice: over a pool of the QSA layer's
// bf16 pages and over one of 16-byte pages (whose copy weighs nothing), both of the same slots
// and pages; a point is the bytes it copied and the difference.
Series beside_copy(Bench& b, const BesideBank& bank, int calls, const std::string& what,
                   const std::string& timing) {
  const CalibrationGrid& g = b.grid;
  constexpr SlotId kSlots = 1024;
  constexpr int kPages = 128;  // the rows' context: the pool's hot half holds it
  const int max_misses =
      *std::max_element(g.beside_copy_misses.begin(), g.beside_copy_misses.end());
  const PageLayout layout = qsa_layer_layout(false);
  Series s = file_series("step_beside_copy",
                         what + "; one row, 1,024 slots of bf16 layer pages (" +
                             std::to_string(layout.layer_page_bytes() / 1024) +
                             " KiB) against 16-byte pages: the copy of its misses",
                         timing + "; the difference of the two steps");
  const PageId pages = kSlots + calls * max_misses + 1;
  Pool real(b, kSlots, pages, 1 + kWidth, layout);
  Pool tiny(b, kSlots, pages, 1 + kWidth);
  const BesideLayer layer(b, bank, 1, calls);
  for (const int misses : g.beside_copy_misses) {
    if (stop_sweep(b, s)) break;
    if (misses < 1 || !misses_fit(1, misses, kPages))
      throw std::logic_error("calibration: " + std::to_string(misses) +
                             " misses do not fit the copy sweep's rows");
    const Steps st = make_steps(b, real, 1, misses, calls, kPages);
    const StepTiming t = time_step(b, real, st, &layer);
    const StepTiming base = time_step(b, tiny, st, &layer);
    s.points.push_back({t.misses * static_cast<double>(layout.layer_page_bytes()), t.us - base.us});
  }
  return s;
}

}  // namespace

void run_residency(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const int max_rows = *std::max_element(g.ensure_rows.begin(), g.ensure_rows.end());
  const int max_misses = *std::max_element(g.ensure_misses.begin(), g.ensure_misses.end());
  const int calls = std::min(g.max_calls, kMaxCalls);
  if (std::find(g.ensure_context_pages.begin(), g.ensure_context_pages.end(), kContextPages) ==
      g.ensure_context_pages.end())
    throw std::logic_error("calibration: the residency grid's contexts lack the ensure series' " +
                           std::to_string(kContextPages) + " pages");
  const std::string timing =
      "graph of layer-steps over other rows each, the state restored and "
      "a pad before each replay; per step";
  Series step = file_series("ensure",
                            "MirrorEngine::residency_step_async (one launch, block form): "
                            "compaction + ensure + copy + translate",
                            timing);
  const std::string beside_what =
      "MirrorEngine::residency_beside_async (4 blocks, no translate): compaction + ensure + "
      "copy, as the mirror in place runs it: a layer per call, beside the store and attend of "
      "its rows (2,051 tokens each, bf16 device banks, in-place form), after the previous "
      "layer's step";
  // The compaction's two forms (kStepGroupedRows), a series each: CostModel::step_beside_ns.
  Series beside = file_series("step_beside", beside_what + "; up to 8 rows", timing);
  Series beside_wide = file_series("step_beside_wide", beside_what + "; more than 8 rows", timing);
  const BesideBank bank(b);
  std::vector<std::unique_ptr<BesideLayer>> layers;  // one per rows value, in the grid's order
  for (const int rows : g.ensure_rows)
    layers.push_back(std::make_unique<BesideLayer>(b, bank, rows, calls));
  for (const int slots : g.ensure_slots) {
    if (stop_sweep(b, step)) break;
    Pool pool(b, slots, slots + calls * max_misses + 1, max_rows * (1 + kWidth));
    for (std::size_t ri = 0; ri < g.ensure_rows.size(); ++ri) {
      const int rows = g.ensure_rows[ri];
      for (const int context : g.ensure_context_pages) {
        for (const int misses : g.ensure_misses) {
          if (stop_sweep(b, step)) break;
          // the rows' pages in the pool's recent half, the calls' misses over its older half
          if (context > slots / 2 || calls * misses > slots / 2) continue;
          if (!misses_fit(rows, misses, context)) continue;
          const Steps st = make_steps(b, pool, rows, misses, calls, context);
          if (context == kContextPages) {
            const StepTiming t = time_step(b, pool, st, nullptr);
            step.points.push_back(
                {static_cast<double>(st.n), static_cast<double>(slots), t.misses, t.us});
          }
          time_beside(b, pool, st, *layers[ri], rows > kStepGroupedRows ? beside_wide : beside);
        }
      }
    }
  }
  beside.truncated = beside_wide.truncated = step.truncated;
  Series copy = beside_copy(b, bank, calls, beside_what, timing);
  emit(std::move(step));
  emit(std::move(beside));
  if (!beside_wide.points.empty()) emit(std::move(beside_wide));
  emit(std::move(copy));
}

}  // namespace kvtier::calibrate
