// `kvtier bench residency`: the issue's figures on the GPU, timed with CUDA events over
// graph replays or repeated launches (median of `repeats`), next to measured ceilings.
#include "cuda/residency_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "cuda/cuda_check.hpp"
#include "cuda/engine.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/kernels.hpp"
#include "cuda/step_phases.hpp"
#include "cuda/stream_handles.hpp"

namespace kvtier::cuda {
namespace {

template <class F>
double median_us(int repeats, cudaStream_t s, F&& body) {
  const Event a = make_event(), b = make_event();
  for (int i = 0; i < 3; ++i)
    body();
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    KVT_CUDA_CHECK(cudaEventRecord(a, s));
    body();
    KVT_CUDA_CHECK(cudaEventRecord(b, s));
    KVT_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class T>
DeviceArray<T> upload(const std::vector<T>& v) {
  DeviceArray<T> d(std::max<std::size_t>(v.size(), 1));
  KVT_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

double gbps(double bytes, double us) {
  return bytes / (us * 1e3);
}

GraphExec capture(cudaStream_t s, const std::function<void()>& body) {
  KVT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  body();
  return end_capture(s);
}

// 512 distinct random blocks of a context of `ctx` tokens, ascending, then the causal tail.
std::vector<std::int32_t> random_blocks(std::mt19937_64& rng, std::int64_t ctx) {
  std::vector<std::int32_t> b;
  const auto nblocks = static_cast<std::int32_t>(ctx / 4);
  while (b.size() < 512) {
    b.push_back(std::uniform_int_distribution<std::int32_t>(0, nblocks - 2)(rng));
    std::sort(b.begin(), b.end());
    b.erase(std::unique(b.begin(), b.end()), b.end());
  }
  return b;
}

// --- ceilings: pinned H2D memcpy, D2D copy (read + written)
void bench_ceilings(const BenchOptions& o, cudaStream_t s, std::vector<BenchFigure>& f) {
  const std::size_t bytes = std::size_t{1} << 30;
  void* h = nullptr;
  KVT_CUDA_CHECK(cudaHostAlloc(&h, bytes, cudaHostAllocMapped));
  std::memset(h, 1, bytes);
  DeviceArray<std::byte> d(bytes), d2(bytes);
  const double t = median_us(std::min(o.repeats, 10), s, [&] {
    KVT_CUDA_CHECK(cudaMemcpyAsync(d.get(), h, bytes, cudaMemcpyHostToDevice, s));
  });
  f.push_back({"ceiling: H2D cudaMemcpyAsync, pinned, 1 GiB", gbps(double(bytes), t), "GB/s", "",
               "median of " + std::to_string(std::min(o.repeats, 10))});
  const double t2 = median_us(std::min(o.repeats, 10), s, [&] {
    KVT_CUDA_CHECK(cudaMemcpyAsync(d2.get(), d.get(), bytes, cudaMemcpyDeviceToDevice, s));
  });
  f.push_back(
      {"ceiling: D2D copy (read + written), 1 GiB", gbps(2.0 * double(bytes), t2), "GB/s", "", ""});
  KVT_CUDA_CHECK(cudaFreeHost(h));
}

// --- multi-bank miss copy: 64 KiB pieces, host bank -> pool, copy kernel alone
void bench_miss_copy(const BenchOptions& o, cudaStream_t s, std::mt19937_64& rng,
                     const PageLayout& ref, std::vector<BenchFigure>& f) {
  const PageId pages = o.bank_pages;
  for (int unit_all = 0; unit_all < 2; ++unit_all) {
    const int misses = unit_all ? 64 : 256;
    MirrorConfig cfg{ref,    unit_all ? ResidencyUnit::all_layers_page : ResidencyUnit::layer_page,
                     pages,  misses,
                     misses, EnsureForm::block};
    MirrorEngine e(cfg);
    std::vector<PageId> q(static_cast<std::size_t>(pages));
    std::iota(q.begin(), q.end(), 0);
    std::shuffle(q.begin(), q.end(), rng);
    q.resize(static_cast<std::size_t>(misses));
    std::vector<CopyOp> copies;
    e.ensure(0, q, 1, copies);
    const int layers = unit_all ? 12 : 1;
    CopyParams cp{
        e.copies(), e.copy_count(), e.host().device_bank_table(), e.pool().device_bank_table(), ref,
        0,          layers};
    const double t = median_us(o.repeats, s, [&] { launch_copy(cp, s); });
    const double bytes = double(misses) * layers * double(ref.layer_page_bytes());
    f.push_back({std::string("multi-bank miss copy, 64 KiB pieces, ") + std::to_string(misses) +
                     " misses x " + std::to_string(layers * 2) + " banks",
                 gbps(bytes, t), "GB/s", ">= 45 GB/s",
                 std::to_string(t).substr(0, 7) + " us for " +
                     std::to_string(static_cast<long long>(bytes)) + " B"});
  }
}

// --- in-place read of a 2051-token selection, bf16, 1 row, host bank (zero-copy)
void bench_in_place_read(const BenchOptions& o, cudaStream_t s, std::mt19937_64& rng,
                         std::vector<BenchFigure>& f) {
  const PageLayout one = PageLayout::make(1, 64, 2, 256, false);
  const PageId pages = 16384;  // 1M tokens
  HostBank bank(one, pages);
  const std::int64_t ctx = std::int64_t{pages} * 64;
  std::vector<PageId> table(static_cast<std::size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const int variants = 8;  // rotate selections so that nothing is served from a cache
  std::vector<std::int64_t> positions;
  for (int v = 0; v < variants; ++v) {
    const auto blocks = random_blocks(rng, ctx);
    for (auto b : blocks)
      for (int i = 0; i < 4; ++i)
        positions.push_back(std::int64_t{b} * 4 + i);
    for (int i = 0; i < 3; ++i)
      positions.push_back(ctx - 3 + i);
  }
  auto d_pos = upload(positions);
  auto d_table = upload(table);
  auto d_len = upload(std::vector<std::int64_t>{pages});
  DeviceArray<int> missing(1);
  DeviceArray<unsigned long long> sum(1);
  // The median time of reading a rotating selection (never the same twice in a row) from `banks`.
  auto time_reads = [&](std::byte* const* banks) {
    int it = 0;
    return median_us(o.repeats, s, [&] {
      ReadParams rp{d_pos.get() + std::int64_t{2051} * (it++ % variants),
                    d_table.get(),
                    d_len.get(),
                    banks,
                    nullptr,
                    missing.get(),
                    sum.get(),
                    one,
                    0,
                    1,
                    2051,
                    pages,
                    pages,
                    pages};
      launch_read(rp, s);
    });
  };
  const double t = time_reads(bank.device_bank_table());
  const double bytes = 2051.0 * double(one.token_bytes(BankKind::k) * 2);
  f.push_back({"in-place read, 2051-token selection, bf16, 1 row, 1 layer", gbps(bytes, t), "GB/s",
               ">= 46 GB/s (<= 90 us)",
               std::to_string(t).substr(0, 7) + " us for " +
                   std::to_string(static_cast<long long>(bytes)) + " B"});
  // The same reads from device memory: the launch and latency floor of this kernel, so
  // that t - floor is the part PCIe adds.
  DevicePool dpool(one, pages);
  const double t_hbm = time_reads(dpool.device_bank_table());
  f.push_back({"  same read from device memory (kernel floor: launch + latency)", t_hbm, "us", "",
               "PCIe share: " + std::to_string(t - t_hbm).substr(0, 6) +
                   " us = " + std::to_string(gbps(bytes, t - t_hbm)).substr(0, 6) + " GB/s"});
}

// A full pool for the residency-step figures: slot i holds page i, last used at a random
// step before 1000, and the step counter at 1000.
void fill_pool(MirrorEngine& e, std::mt19937_64& rng, cudaStream_t s) {
  const SlotId slots = e.config().num_slots;
  std::vector<SlotId> sop(static_cast<std::size_t>(e.config().num_pages), kNoSlot);
  std::vector<PageId> pos(static_cast<std::size_t>(slots));
  std::vector<std::int64_t> lu(static_cast<std::size_t>(slots));
  for (SlotId i = 0; i < slots; ++i) {
    sop[i] = i;
    pos[i] = i;
    lu[i] = std::uniform_int_distribution<std::int64_t>(0, 999)(rng);
  }
  const ResidencyView v = e.device_view(0);
  KVT_CUDA_CHECK(cudaMemcpy(v.slot_of_page, sop.data(), sop.size() * 4, cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(v.page_of_slot, pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(v.last_use, lu.data(), lu.size() * 8, cudaMemcpyHostToDevice));
  launch_set_step(e.step(), 1000, s);
}

// `iters` layer-steps of one decode row over a full pool of `slots` (fill_pool): each row
// selects the same 512 blocks (`hot`: all hits once resident), and `misses` of its pages are
// pointed at pages never seen before, fresh in every step. Its query: the write page (the last
// table page), then the compaction's 513 entries; `query(i)` is step i's. The fresh pages are
// numbered from `fresh` on (advanced past them), so that the rows of several runs on one pool
// never share one.
struct StepRows {
  static constexpr int kWidth = 513, kQuery = 1 + kWidth;
  SlotId slots;
  DeviceArray<std::int32_t> blocks;
  DeviceArray<PageId> tables;
  DeviceArray<std::int64_t> pos, lens;
  DeviceArray<PageId> queries;
  DeviceArray<int> counters = DeviceArray<int>(2);  // compaction: dropped, bad rows

  StepRows(std::mt19937_64& rng, SlotId n_slots, int iters, int misses,
           const std::vector<std::int32_t>& hot, PageId& fresh)
      : slots(n_slots), queries(static_cast<std::size_t>(kQuery) * iters) {
    std::vector<std::int32_t> b;
    std::vector<PageId> t;
    std::vector<std::int64_t> p, l;
    for (int i = 0; i < iters; ++i) {
      b.insert(b.end(), hot.begin(), hot.end());
      std::vector<PageId> table(static_cast<std::size_t>(slots));
      std::iota(table.begin(), table.end(), 0);
      std::vector<std::int32_t> pick(hot.begin(), hot.end());
      std::shuffle(pick.begin(), pick.end(), rng);
      int done = 0;
      for (auto blk : pick) {
        const std::int64_t idx = std::int64_t{blk} * 4 / 64;
        if (table[idx] < slots && done < misses) {
          table[idx] = fresh++;
          ++done;
        }
      }
      t.insert(t.end(), table.begin(), table.end());
      p.push_back(std::int64_t{slots} * 64 - 1);
      l.push_back(slots);
    }
    blocks = upload(b);
    tables = upload(t);
    pos = upload(p);
    lens = upload(l);
    std::vector<PageId> wp(static_cast<std::size_t>(kQuery) * iters, kNoPage);
    for (int i = 0; i < iters; ++i)
      wp[static_cast<std::size_t>(i) * kQuery] = slots - 1;
    KVT_CUDA_CHECK(cudaMemcpy(queries.get(), wp.data(), wp.size() * 4, cudaMemcpyHostToDevice));
    KVT_CUDA_CHECK(cudaMemset(counters.get(), 0, 8));
  }
  PageId* query(int i) { return queries.get() + std::int64_t{i} * kQuery; }
  CompactParams compact(int i) {
    return CompactParams{blocks.get() + std::int64_t{i} * 512,
                         pos.get() + i,
                         tables.get() + std::int64_t{i} * slots,
                         lens.get() + i,
                         query(i) + 1,
                         counters.get(),
                         counters.get() + 1,
                         1,
                         512,
                         static_cast<int>(slots),
                         kWidth,
                         4,
                         64};
  }
};

// One replay of a captured graph of layer-steps, in us (a second replay would find the fresh
// pages resident).
double replay_once_us(const GraphExec& g, cudaStream_t s) {
  const Event a = make_event(), b = make_event();
  KVT_CUDA_CHECK(cudaGraphUpload(g, s));
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
  KVT_CUDA_CHECK(cudaEventRecord(a, s));
  KVT_CUDA_CHECK(cudaGraphLaunch(g, s));
  KVT_CUDA_CHECK(cudaEventRecord(b, s));
  KVT_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1000.0;
}

std::string last_counts(const MirrorEngine& e) {
  EnsureResult r;
  KVT_CUDA_CHECK(cudaMemcpy(&r, e.result(), sizeof r, cudaMemcpyDeviceToHost));
  return std::to_string(r.hits) + " hits, " + std::to_string(r.misses) + " misses";
}

// --- compaction + ensure + translate, batch 1, 100k slots: all hits, and 72 misses; as
// separate launches of each form, and as the one-launch residency step (which copies its
// misses too: the copy cannot be left out of that launch)
void bench_residency_step(cudaStream_t s, std::vector<BenchFigure>& f) {
  struct Variant {
    EnsureForm form;
    bool one_launch;
  };
  for (const Variant var : {Variant{EnsureForm::block, false}, Variant{EnsureForm::block, true},
                            Variant{EnsureForm::multi_block, false}}) {
    const EnsureForm form = var.form;
    std::mt19937_64 rng2(20261130);  // the same selections for both forms
    const PageLayout tiny = PageLayout::make(1, 64, 1, 8, false);  // residency cost only
    const SlotId slots = 100000;
    MirrorConfig cfg{tiny, ResidencyUnit::layer_page, 4 * slots, slots, StepRows::kQuery, form};
    const std::string form_name = form == EnsureForm::block ? "one-block" : "multi-block";
    MirrorEngine e(cfg);
    fill_pool(e, rng2, s);
    const int iters = 64;
    for (int with_misses = 0; with_misses < 2; ++with_misses) {
      const auto hot = random_blocks(rng2, std::int64_t{slots} * 64);
      PageId fresh = slots;
      StepRows rows(rng2, slots, iters, with_misses ? 72 : 0, hot, fresh);
      DeviceArray<SlotId> phys(static_cast<std::size_t>(StepRows::kWidth) * iters);
      auto enqueue = [&](int i) {
        const CompactParams cp = rows.compact(i);
        PageId* q = rows.query(i);
        SlotId* out = phys.get() + std::int64_t{i} * StepRows::kWidth;
        if (var.one_launch) {
          launch_advance_step(e.step(), s);
          e.residency_step_async(0, cp, q, StepRows::kQuery,
                                 {q + 1, out, StepRows::kWidth, dummy_slot(slots)}, s);
        } else {
          launch_compact(cp, s);
          launch_advance_step(e.step(), s);
          e.ensure_only_async(0, q, StepRows::kQuery, s);
          e.translate_async(0, q + 1, StepRows::kWidth, out, s);
        }
      };
      if (!with_misses) {
        for (int i = 0; i < 3; ++i)
          enqueue(0);  // warm-up: the hot selection becomes resident, kernels load
      }
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
      const GraphExec g = capture(s, [&] {
        for (int i = 0; i < iters; ++i)
          enqueue(i);
      });
      // The kernels are warm (the hits graph ran first).
      const double t = replay_once_us(g, s);
      f.push_back(
          {var.one_launch
               ? (with_misses ? "residency step in one launch, 72 misses, batch 1, 100k slots, "
                                "copy included"
                              : "residency step in one launch, all hits, batch 1, 100k slots")
           : with_misses
               ? "compaction + ensure + translate, 72 misses, batch 1, 100k slots copy excluded"
               : "compaction + ensure + translate, all hits, batch 1, 100k slots",
           t / iters, "us/layer", with_misses ? "<= 25 us" : "<= 8 us",
           form_name + " ensure; graph of " + std::to_string(iters) +
               " layer-steps; last: " + last_counts(e)});
    }
  }
}

// --- the step beside the attention (MirrorEngine::residency_beside_async, the mirror decode's
// chain of layer-steps), alone in a graph of 64, and where its time goes: the leader's phases
// from its stamps (kernels.hpp, StepStamp), medians over the steps.
void bench_step_phases(cudaStream_t s, std::vector<BenchFigure>& f) {
  const PageLayout tiny = PageLayout::make(1, 64, 1, 8, false);  // residency cost only
  const int iters = 64;
  for (const SlotId slots : {SlotId{8192}, SlotId{32768}, SlotId{131072}}) {
    std::mt19937_64 rng(20261202);
    MirrorConfig cfg{tiny,  ResidencyUnit::layer_page, 4 * slots,
                     slots, StepRows::kQuery,          EnsureForm::block};
    MirrorEngine e(cfg);
    fill_pool(e, rng, s);
    const auto hot = random_blocks(rng, std::int64_t{slots} * 64);
    PageId fresh = slots;
    for (const int misses : {0, 16, 256}) {
      StepRows rows(rng, slots, iters, misses, hot, fresh);
      StepStampRecorder recorder(iters);
      EnsureHooks hooks;
      auto enqueue = [&](int i) {
        launch_advance_step(e.step(), s);
        e.residency_beside_async(0, rows.compact(i), rows.query(i), StepRows::kQuery, s, hooks);
      };
      for (int i = 0; i < 3; ++i)
        enqueue(0);  // the hot selection resident, the kernel loaded
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
      hooks.stamps = recorder.stamps();
      const GraphExec g = capture(s, [&] {
        for (int i = 0; i < iters; ++i)
          enqueue(i);
      });
      recorder.clear();  // the warm-up's launches recorded nothing; the graph's start clean
      const double t = replay_once_us(g, s);
      f.push_back({"step beside (" + std::to_string(MirrorEngine::kBesideBlocks) + " blocks), " +
                       std::to_string(slots) + " slots, 514 lookups, " + std::to_string(misses) +
                       " misses",
                   t / iters, "us/layer", misses == 0 ? "<= 5 us" : "",
                   "graph of " + std::to_string(iters) + "; last: " + last_counts(e) +
                       "; phases (us, medians): " + describe(recorder.read())});
    }
  }
}

// --- mirror store overhead: a decode step of 12 layers, each storing one token per row
// and reading each row's 2051 selected tokens from the pool; the store goes to the pool
// only (device placement) or to pool and host bank (mirror write-through).
void bench_store_overhead(const BenchOptions& o, cudaStream_t s, std::mt19937_64& rng,
                          const PageLayout& ref, std::vector<BenchFigure>& f) {
  const int rows = 4;
  const PageId row_pages = 512;  // 32k-token contexts
  const PageId pages = rows * row_pages;
  HostBank bank(ref, pages);
  DevicePool pool(ref, pages);
  std::vector<PageId> tables(static_cast<std::size_t>(pages));
  std::iota(tables.begin(), tables.end(), 0);
  std::vector<std::int64_t> positions, lens(rows, row_pages);
  std::vector<PageId> st_pages;
  std::vector<std::int32_t> st_tokens;
  const std::int64_t ctx = std::int64_t{row_pages} * 64;
  for (int r = 0; r < rows; ++r) {
    for (auto b : random_blocks(rng, ctx))
      for (int i = 0; i < 4; ++i)
        positions.push_back(std::int64_t{b} * 4 + i);
    for (int i = 0; i < 3; ++i)
      positions.push_back(ctx - 3 + i);
    st_pages.push_back(r * row_pages + row_pages - 1);
    st_tokens.push_back(63);
  }
  auto d_pos = upload(positions);
  auto d_tables = upload(tables);
  auto d_len = upload(lens);
  auto d_sp = upload(st_pages);
  auto d_st = upload(st_tokens);
  DeviceArray<std::byte> src(static_cast<std::size_t>(rows * ref.token_bytes(BankKind::k)));
  KVT_CUDA_CHECK(cudaMemset(src.get(), 3, src.bytes()));
  DeviceArray<int> bad(2);
  DeviceArray<unsigned long long> sum(1);
  KVT_CUDA_CHECK(cudaMemset(bad.get(), 0, 8));
  double t[2];
  for (int mirror = 0; mirror < 2; ++mirror) {
    const GraphExec g = capture(s, [&] {
      for (int l = 0; l < 12; ++l) {
        StoreParams sp{};
        sp.pages = d_sp.get();
        sp.tokens = d_st.get();
        for (int k = 0; k < 2; ++k) {
          sp.src[k] = src.get();
          sp.host[k] = mirror ? bank.device(l * 2 + k) : nullptr;
          sp.pool[k] = pool.bank(l * 2 + k);
        }
        sp.bad = bad.get();
        sp.layout = ref;
        sp.num_pages = pages;
        sp.n = rows;
        launch_store(sp, s);
        ReadParams rp{d_pos.get(), d_tables.get(), d_len.get(), pool.device_bank_table(),
                      nullptr,     bad.get() + 1,  sum.get(),   ref,
                      l,           rows,           2051,        row_pages,
                      pages,       pages};
        launch_read(rp, s);
      }
    });
    t[mirror] = median_us(o.repeats, s, [&] { KVT_CUDA_CHECK(cudaGraphLaunch(g, s)); });
  }
  f.push_back({"decode step (12 layers x (store + read 2051 tokens), 4 rows), device placement",
               t[0], "us", "", "graph replay, median"});
  f.push_back({"  same step, mirror write-through store", t[1], "us", "", ""});
  f.push_back({"mirror store overhead vs device placement", 100.0 * (t[1] - t[0]) / t[0], "%",
               "<= 2 %", "synthetic decode step, not a replayed trace"});
}

}  // namespace

std::vector<BenchFigure> run_residency_bench(const BenchOptions& o) {
  std::vector<BenchFigure> f;
  const Stream s = make_stream();
  std::mt19937_64 rng(20261129);
  const PageLayout ref = PageLayout::make(12, 64, 2, 256, false);  // Flash-Next, bf16
  bench_ceilings(o, s, f);
  bench_miss_copy(o, s, rng, ref, f);
  bench_in_place_read(o, s, rng, f);
  bench_residency_step(s, f);
  bench_step_phases(s, f);
  bench_store_overhead(o, s, rng, ref, f);
  return f;
}

}  // namespace kvtier::cuda
