// The one-launch residency step (launch_residency_step, through MirrorEngine with the block
// form, on the whole GPU or as the one-block step beside an attention) against the same step as
// separate launches (compaction, the core's ensure in one thread, the miss copy, the translate: an
// engine with the core_thread form), over sequences of random steps: rows of every shape the
// compaction meets (ascending with padding, unsorted, past the page table, several passes per row,
// more rows than warps, widths that truncate), written pages, pages outside the space, pools that
// are too small, a second chunk of a step, both residency units; and steps whose rows are all
// ascending, in their tables and padded at the end (the decode steps the runner meets, which the
// compaction by groups of warps proves simple). After every step: the query, the drop and bad-row
// counts, the result, the copy list, the residency state, every pool bank byte, the translated
// table and its miss count are equal. The step also runs captured in a CUDA graph and replayed.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/engine.hpp"
#include "model/translate.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

template <class T>
void put(DeviceArray<T>& d, const std::vector<T>& v) {
  d = DeviceArray<T>(std::max<std::size_t>(v.size(), 1));
  if (!v.empty())
    KVT_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> get(const T* d, std::size_t n) {
  std::vector<T> v(n);
  if (n > 0) KVT_CUDA_CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// One step's input: rows of chosen blocks over their page tables, and the written pages.
struct StepInput {
  int rows = 0, n_blocks = 0, stride = 1, width = 1, writes = 0;
  std::vector<std::int32_t> blocks;
  std::vector<std::int64_t> pos, table_len;
  std::vector<PageId> tables, query_init;  // query_init: [writes + rows * width]
  std::int64_t step = 0;
};

StepInput make_step(std::mt19937_64& rng, const PageLayout& L, PageId pages, int ratio,
                    std::int64_t step) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  StepInput s;
  s.step = step;
  const bool large = uni(0, 3) == 0;  // more rows than warps, or several passes per row
  s.rows = large ? uni(1, 40) : uni(1, 9);
  s.n_blocks = large ? uni(0, 1200) : uni(0, 600);
  s.width = uni(1, 80);
  s.stride = uni(1, 120);
  s.writes = uni(0, 6);
  const bool outside = uni(0, 11) == 0;  // a table entry outside the page space
  // Every row ascending, in its table, padded at the end only: the decode steps the runner
  // meets (most random steps hold a row that is not).
  const bool simple = uni(0, 1) == 0;
  for (int r = 0; r < s.rows; ++r) {
    const int len = uni(1, s.stride);
    s.table_len.push_back(len);
    const std::int64_t max_block = std::int64_t{len} * L.page_size / ratio;
    std::vector<std::int32_t> b;
    for (int j = 0; j < s.n_blocks; ++j)
      b.push_back(static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(
          0, simple ? max_block - 1 : max_block + (uni(0, 30) == 0 ? 40 : 0))(rng)));
    std::sort(b.begin(), b.end());
    if (!simple && uni(0, 9) == 0 && b.size() > 2) std::swap(b[1], b[b.size() - 1]);  // unsorted
    const int pad = uni(0, simple ? 1 : 2);  // none, at the end (the indexer's), anywhere
    for (std::size_t j = 0; j < b.size(); ++j)
      if ((pad == 1 && j + 40 >= b.size() && uni(0, 1)) || (pad == 2 && uni(0, 15) == 0)) b[j] = -1;
    if (pad == 1) std::stable_partition(b.begin(), b.end(), [](std::int32_t x) { return x >= 0; });
    s.blocks.insert(s.blocks.end(), b.begin(), b.end());
    s.pos.push_back(
        std::uniform_int_distribution<std::int64_t>(0, std::int64_t{len} * L.page_size - 1)(rng));
    for (int k = 0; k < s.stride; ++k)
      s.tables.push_back(outside && uni(0, 200) == 0 ? pages + uni(0, 3) : uni(0, pages - 1));
  }
  for (int i = 0; i < s.writes; ++i)
    s.query_init.push_back(uni(0, pages - 1));
  s.query_init.resize(static_cast<std::size_t>(s.writes + s.rows * s.width), 12345);  // poison
  return s;
}

struct Counts {
  int dropped, bad_rows, missing;
};

// An engine (its own, or one shared with another Side) with one set of step buffers.
struct Side {
  std::unique_ptr<MirrorEngine> own;
  MirrorEngine& engine;
  int lane = 0;  // the lane of the last step beside (whose scratch holds its outputs)
  DeviceArray<std::int32_t> blocks;
  DeviceArray<std::int64_t> pos, table_len, step;
  DeviceArray<long long> totals;
  DeviceArray<PageId> tables, query;
  DeviceArray<SlotId> physical;
  DeviceArray<Counts> counts;

  explicit Side(const MirrorConfig& c) : Side(std::make_unique<MirrorEngine>(c), nullptr) {}
  explicit Side(MirrorEngine& shared) : Side(nullptr, &shared) {}
  Side(std::unique_ptr<MirrorEngine> e, MirrorEngine* shared)
      : own(std::move(e)), engine(own ? *own : *shared), step(1), totals(3), counts(1) {
    KVT_CUDA_CHECK(cudaMemset(counts.get(), 0, counts.bytes()));
    KVT_CUDA_CHECK(cudaMemset(totals.get(), 0, totals.bytes()));
  }
  void upload(const StepInput& s) {
    put(blocks, s.blocks);
    put(pos, s.pos);
    put(table_len, s.table_len);
    put(tables, s.tables);
    put(query, s.query_init);
    physical = DeviceArray<SlotId>(std::max<std::size_t>(s.tables.size(), 1));
    KVT_CUDA_CHECK(cudaMemcpy(step.get(), &s.step, sizeof s.step, cudaMemcpyHostToDevice));
  }
  // beside: residency_beside_async (no translate) on `beside_lane`, on `beside_blocks` blocks
  void launch(const StepInput& s, int layer, int ratio, cudaStream_t st, bool beside = false,
              int beside_lane = 0, int beside_blocks = MirrorEngine::kBesideBlocks) {
    lane = beside ? beside_lane : 0;
    Counts* c = counts.get();
    const CompactParams cp{blocks.get(),
                           pos.get(),
                           tables.get(),
                           table_len.get(),
                           query.get() + s.writes,
                           &c->dropped,
                           &c->bad_rows,
                           s.rows,
                           s.n_blocks,
                           s.stride,
                           s.width,
                           ratio,
                           engine.layout().page_size};
    const TranslateTarget t{tables.get(), physical.get(), s.rows * s.stride,
                            dummy_slot(engine.config().num_slots), &c->missing};
    const int n = s.writes + s.rows * s.width;
    if (beside) {
      engine.residency_beside_async(layer, cp, query.get(), n, st, {step.get(), totals.get()},
                                    beside_lane, beside_blocks);
    } else {
      engine.residency_step_async(layer, cp, query.get(), n, t, st, {step.get(), totals.get()});
    }
  }
};

// Everything a step leaves behind, on both sides: the first difference, or "" when none.
std::string difference(Side& a, Side& b, const StepInput& s, int layer, bool translated = true) {
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto n = static_cast<std::size_t>(s.writes + s.rows * s.width);
  if (get(a.query.get(), n) != get(b.query.get(), n)) return "query";
  const Counts ca = get(a.counts.get(), 1)[0], cb = get(b.counts.get(), 1)[0];
  if (ca.dropped != cb.dropped || ca.bad_rows != cb.bad_rows) return "compaction counts";
  if (translated && ca.missing != cb.missing) return "translate misses";
  const EnsureResult ra = get(a.engine.result(a.lane), 1)[0],
                     rb = get(b.engine.result(b.lane), 1)[0];
  if (ra.status != rb.status || ra.lookups != rb.lookups || ra.hits != rb.hits ||
      ra.misses != rb.misses || ra.evictions != rb.evictions)
    return "ensure result";
  const int count = get(a.engine.copy_count(a.lane), 1)[0];
  if (count != get(b.engine.copy_count(b.lane), 1)[0]) return "copy count";
  if (get(a.engine.copies(a.lane), static_cast<std::size_t>(count)) !=
      get(b.engine.copies(b.lane), static_cast<std::size_t>(count)))
    return "copy list";
  if (get(a.totals.get(), 3) != get(b.totals.get(), 3)) return "running totals";
  if (a.engine.read_counters().ensure_errors != b.engine.read_counters().ensure_errors)
    return "ensure errors";
  if (const std::string d = test::state_difference(a.engine, b.engine, layer); !d.empty()) return d;
  const PageLayout& L = a.engine.layout();
  for (int bank = 0; bank < L.layers * L.banks_per_layer; ++bank)
    if (a.engine.download_pool_bank(bank) != b.engine.download_pool_bank(bank))
      return "pool bank " + std::to_string(bank);
  if (translated &&
      get(a.physical.get(), s.tables.size()) != get(b.physical.get(), s.tables.size()))
    return "translated table";
  return "";
}

// The same engine with the core's ensure in one thread: every step as separate launches.
MirrorConfig separate_launches(MirrorConfig c) {
  c.form = EnsureForm::core_thread;
  c.beside_lanes = 1;
  return c;
}

struct EngineSetups {
  MirrorConfig one_launch, separate;
  int ratio = 4;
};

EngineSetups make_setups(std::mt19937_64& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  EngineSetups s;
  const PageLayout L =
      PageLayout::make(uni(1, 2), 4 * uni(1, 16), uni(1, 2), 4 * uni(1, 4), uni(0, 1) == 1);
  const PageId pages = uni(8, 3000);
  const int pool_kind = uni(0, 2);  // too small for most steps, tight, everything fits
  const SlotId slots = pool_kind == 0 ? uni(1, 40) : pool_kind == 1 ? uni(40, 800) : pages;
  const ResidencyUnit unit = uni(0, 1) ? ResidencyUnit::layer_page : ResidencyUnit::all_layers_page;
  s.one_launch = MirrorConfig{L, unit, pages, slots, 6 + 40 * 80, EnsureForm::block};
  // the step on one block per SM, or on a few (the micro-batches' form): the same step
  s.one_launch.step_blocks = uni(0, 1) == 0 ? 0 : uni(1, 5);
  // a second lane of steps beside: their own scratch and ticket
  s.one_launch.beside_lanes = uni(1, 2);
  s.separate = separate_launches(s.one_launch);
  return s;
}

// The same random bytes into both host banks (a few tokens of many pages).
void fill_hosts(std::mt19937_64& rng, Side& a, Side& b) {
  const PageLayout& L = a.engine.layout();
  const PageId pages = a.engine.config().num_pages;
  for (int l = 0; l < L.layers; ++l) {
    std::vector<TokenBytes> toks;
    for (PageId p = 0; p < pages; p += 1 + static_cast<PageId>(rng() % 3)) {
      TokenBytes t{p, static_cast<std::int32_t>(rng() % L.page_size), {}};
      for (int k = 0; k < L.banks_per_layer; ++k) {
        t.bytes[k].resize(static_cast<std::size_t>(L.token_bytes(PageLayout::kind_of(k))));
        for (auto& x : t.bytes[k])
          x = static_cast<std::byte>(rng() & 0xff);
      }
      toks.push_back(std::move(t));
    }
    a.engine.store(l, toks);
    b.engine.store(l, toks);
  }
}

TEST(ResidencyStep, OneLaunchEqualsSeparateLaunches) {
  KVT_REQUIRE_GPU();
  EXPECT_TRUE(
      rc::check("residency step == compaction, ensure, copy, translate", [](std::uint64_t seed) {
        std::mt19937_64 rng(seed);
        const EngineSetups setup = make_setups(rng);
        Side a(setup.one_launch), b(setup.separate);
        fill_hosts(rng, a, b);
        const PageLayout& L = setup.one_launch.layout;
        std::int64_t step = 1;
        const int steps = static_cast<int>(rng() % 6) + 1;
        for (int i = 0; i < steps; ++i) {
          step += static_cast<std::int64_t>(rng() % 3);  // 0: a second chunk
          const int layer = static_cast<int>(rng() % L.layers);
          const StepInput s = make_step(rng, L, setup.one_launch.num_pages, setup.ratio, step);
          a.upload(s);
          b.upload(s);
          // one launch, or the step beside an attention (one block, then the copy); mixing
          // them on one engine also checks that their leader elections stay apart
          const bool beside = rng() % 3 == 0;
          const int lane = static_cast<int>(rng() % setup.one_launch.beside_lanes);
          const int blocks =
              rng() % 2 ? MirrorEngine::kBesideBlocks : MirrorEngine::kBesideBlocksWide;
          a.launch(s, layer, setup.ratio, nullptr, beside, lane, blocks);
          b.launch(s, layer, setup.ratio, nullptr, beside);
          const std::string d = difference(a, b, s, layer, !beside);
          RC_LOG() << "step " << i << ": " << d << "\n";
          RC_ASSERT(d.empty());
        }
      }));
}

// A decode-shaped step (8 rows of 512 blocks and a tail, the indexer's padding) on a pool that
// holds everything after the first step: the steady state the runner meets, with hits only.
TEST(ResidencyStep, DecodeRowsSteadyState) {
  KVT_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  const PageLayout L = PageLayout::make(2, 64, 2, 16, false);
  const MirrorConfig c{L, ResidencyUnit::layer_page, 4096, 4096, 8 + 8 * 520, EnsureForm::block};
  Side a(c), b(separate_launches(c));
  fill_hosts(rng, a, b);
  StepInput s;
  s.rows = 8;
  s.n_blocks = 512;
  s.width = 520;
  s.stride = 512;
  s.writes = 8;
  for (int r = 0; r < s.rows; ++r) {
    s.table_len.push_back(s.stride);
    s.pos.push_back(std::int64_t{s.stride} * 64 - 1 - r);
    std::vector<std::int32_t> chosen;
    for (int j = 0; j < 500; ++j)
      chosen.push_back(
          static_cast<std::int32_t>(rng() % (static_cast<std::uint64_t>(s.stride) * 16)));
    std::sort(chosen.begin(), chosen.end());
    chosen.resize(512, -1);
    s.blocks.insert(s.blocks.end(), chosen.begin(), chosen.end());
    for (int k = 0; k < s.stride; ++k)
      s.tables.push_back(r * s.stride + k);
    s.query_init.push_back(r * s.stride + s.stride - 1);
  }
  s.query_init.resize(static_cast<std::size_t>(s.writes + s.rows * s.width), kNoPage);
  for (int i = 0; i < 3; ++i) {
    s.step = i + 1;
    a.upload(s);
    b.upload(s);
    a.launch(s, 1, 4, nullptr);
    b.launch(s, 1, 4, nullptr);
    ASSERT_EQ(difference(a, b, s, 1), "") << "step " << i;
    const EnsureResult r = get(a.engine.result(), 1)[0];
    EXPECT_EQ(r.status, EnsureStatus::ok);
    if (i > 0) {
      EXPECT_EQ(r.misses, 0);
    }
    EXPECT_GT(r.hits + r.misses, 8 * 200);  // distinct pages of 8 rows of 500 blocks
  }
}

// Two layers' steps beside at once, each on its own lane and stream (the trace replay's two
// lanes, frontend::beside_steps) on either block count, against the same steps one after another
// through the core's ensure: every layer's state, every pool byte, the queries, the compaction
// counts and the running totals (the two steps add to them at once) are equal.
TEST(ResidencyStep, TwoLanesAtOnceEqualOneAfterAnother) {
  KVT_REQUIRE_GPU();
  EXPECT_TRUE(rc::check("two lanes beside == one step after another", [](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const PageLayout L = PageLayout::make(2, 4 * uni(1, 16), uni(1, 2), 4 * uni(1, 4), false);
    const PageId pages = uni(8, 3000);
    const SlotId slots = uni(0, 1) ? uni(40, 800) : pages;
    MirrorConfig c{L, ResidencyUnit::layer_page, pages, slots, 6 + 40 * 80, EnsureForm::block};
    c.beside_lanes = 2;
    MirrorEngine two(c), one(separate_launches(c));
    Side a0(two), a1(two), b0(one), b1(one);
    fill_hosts(rng, a0, b0);
    cudaStream_t st[2];
    for (auto& x : st)
      KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    const int steps = uni(1, 5);
    auto blocks = [](std::mt19937_64& r) {
      return r() % 2 ? MirrorEngine::kBesideBlocks : MirrorEngine::kBesideBlocksWide;
    };
    for (int i = 0; i < steps; ++i) {
      const StepInput s0 = make_step(rng, L, pages, 4, i + 1),
                      s1 = make_step(rng, L, pages, 4, i + 1);
      a0.upload(s0);
      a1.upload(s1);
      b0.upload(s0);
      b1.upload(s1);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      // each lane's steps on 4 or 8 blocks, the form changing between steps as it may between
      // forwards (each form has its own leader election)
      a0.launch(s0, 0, 4, st[0], true, 0, blocks(rng));
      a1.launch(s1, 1, 4, st[1], true, 1, blocks(rng));
      b0.launch(s0, 0, 4, nullptr, true);
      b1.launch(s1, 1, 4, nullptr, true);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      for (int l = 0; l < 2; ++l)
        RC_ASSERT(test::state_difference(two, one, l).empty());
      for (int bank = 0; bank < L.layers * L.banks_per_layer; ++bank)
        RC_ASSERT(two.download_pool_bank(bank) == one.download_pool_bank(bank));
      for (const auto& [x, y, si] : {std::tuple{&a0, &b0, &s0}, std::tuple{&a1, &b1, &s1}}) {
        const auto n = static_cast<std::size_t>(si->writes + si->rows * si->width);
        RC_ASSERT(get(x->query.get(), n) == get(y->query.get(), n));
        const Counts cx = get(x->counts.get(), 1)[0], cy = get(y->counts.get(), 1)[0];
        RC_ASSERT(cx.dropped == cy.dropped && cx.bad_rows == cy.bad_rows);
        RC_ASSERT(get(x->totals.get(), 3) == get(y->totals.get(), 3));
      }
      RC_ASSERT(two.read_counters().ensure_errors == one.read_counters().ensure_errors);
    }
    for (auto& x : st)
      KVT_CUDA_CHECK(cudaStreamDestroy(x));
  }));
}

// The step captured in a graph and replayed with new inputs each time (the leader election
// runs over launches of graphs as over eager ones).
TEST(ResidencyStep, GraphReplayEqualsEager) {
  KVT_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  const PageLayout L = PageLayout::make(1, 16, 1, 8, false);
  const MirrorConfig c{L, ResidencyUnit::layer_page, 600, 200, 6 + 40 * 80, EnsureForm::block};
  Side a(c), b(separate_launches(c));
  fill_hosts(rng, a, b);
  // fixed shapes, so that one graph serves every replay: the buffers are allocated once
  StepInput s = make_step(rng, L, c.num_pages, 4, 1);
  a.upload(s);
  cudaStream_t st = nullptr;
  KVT_CUDA_CHECK(cudaStreamCreate(&st));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  KVT_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  a.launch(s, 0, 4, st);
  KVT_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
  KVT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 5; ++i) {
    // new rows of the same shapes (a few pairs out of order: the core's path too)
    for (auto& x : s.blocks)
      if (x >= 0) x = static_cast<std::int32_t>(x ^ (rng() & 1));
    s.step = i + 1;
    KVT_CUDA_CHECK(
        cudaMemcpy(a.blocks.get(), s.blocks.data(), s.blocks.size() * 4, cudaMemcpyHostToDevice));
    KVT_CUDA_CHECK(cudaMemcpy(a.query.get(), s.query_init.data(), s.query_init.size() * 4,
                              cudaMemcpyHostToDevice));
    KVT_CUDA_CHECK(cudaMemcpy(a.step.get(), &s.step, sizeof s.step, cudaMemcpyHostToDevice));
    KVT_CUDA_CHECK(cudaGraphLaunch(exec, st));
    KVT_CUDA_CHECK(cudaStreamSynchronize(st));
    b.upload(s);
    b.launch(s, 0, 4, nullptr);
    ASSERT_EQ(difference(a, b, s, 0), "") << "replay " << i;
  }
  KVT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  KVT_CUDA_CHECK(cudaGraphDestroy(graph));
  KVT_CUDA_CHECK(cudaStreamDestroy(st));
}

}  // namespace
}  // namespace kvtier::cuda

namespace kvtier::cuda {
namespace {

// locate_async over several layers in one launch equals the core's locate_pages on each layer's
// state; the all-layers unit refuses several layers at once (one layer's ensure would move the
// slots the next layer's table points to).
TEST(ResidencyStep, LocateEveryLayerAtOnce) {
  KVT_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  const PageLayout L = PageLayout::make(3, 16, 1, 8, false);
  const PageId pages = 300;
  MirrorEngine e(MirrorConfig{L, ResidencyUnit::layer_page, pages, 100, 200, EnsureForm::block});
  for (int l = 0; l < L.layers; ++l) {  // a different resident set per layer
    std::vector<PageId> q;
    for (int i = 0; i < 80; ++i)
      q.push_back(static_cast<PageId>(rng() % pages));
    std::vector<CopyOp> copies;
    e.ensure(l, q, l + 1, copies);
  }
  std::vector<PageId> logical;
  for (int i = 0; i < 500; ++i)
    logical.push_back(i % 50 == 0 ? kNoPage : static_cast<PageId>(rng() % (pages + 5)));
  DeviceArray<PageId> d_logical;
  put(d_logical, logical);
  DeviceArray<SlotId> d_physical(logical.size() * L.layers);
  DeviceArray<int> d_in_place(1);
  KVT_CUDA_CHECK(cudaMemset(d_in_place.get(), 0, sizeof(int)));
  e.locate_async(0, L.layers, d_logical.get(), static_cast<int>(logical.size()), d_physical.get(),
                 d_in_place.get(), nullptr);
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<SlotId> got = get(d_physical.get(), d_physical.size());
  int in_place = 0;
  for (int l = 0; l < L.layers; ++l) {
    std::vector<SlotId> sop;
    std::vector<PageId> pos;
    std::vector<std::int64_t> lu;
    e.download_state(l, sop, pos, lu);
    std::vector<SlotId> want(logical.size());
    in_place += locate_pages(logical.data(), static_cast<int>(logical.size()), sop.data(), pages,
                             want.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + l * logical.size()))
        << "layer " << l;
  }
  EXPECT_EQ(get(d_in_place.get(), 1)[0], in_place);
  MirrorEngine all(
      MirrorConfig{L, ResidencyUnit::all_layers_page, pages, 100, 200, EnsureForm::block});
  EXPECT_THROW(all.locate_async(0, 2, d_logical.get(), 10, d_physical.get(), nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvtier::cuda
