// GPU tests of the QSA kernels against the CPU reference (label gpu; skipped without a device).
//
// KVTIER_QSA_TEST_SMALL=1 (set by the compute-sanitizer runs, which are too slow at full size):
// ChunkedPrefillIsBitIdentical runs a shorter prefill and AttendVariantsAgree fewer rows and one
// shape (see each test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/qsa/qsa_gpu_runner.hpp"

namespace kvtier::qsa::testing {
namespace {

using qsa_ref::Mat;
using qsa_ref::Vec;

#define REQUIRE_GPU() \
  if (!have_device()) GTEST_SKIP() << "no CUDA device"

qsa_ref::Dims gpu_dims(int block_topk, bool yarn = false) {
  qsa_ref::Dims d;  // the compiled geometry: 24 / 2 / 256, indexer 4 x 128, rope 64
  d.block_topk = block_topk;
  d.yarn = yarn;
  return d;
}

double rel(const Mat& a, const Mat& b) {
  return (a - b).norm() / std::max(b.norm(), 1e-30);
}

Mat row_of(const std::vector<float>& v, int row, int rows_per, int cols) {
  Mat m(rows_per, cols);
  for (int i = 0; i < rows_per * cols; ++i)
    m.data()[i] = v[static_cast<std::size_t>(row) * rows_per * cols + i];
  return m;
}

std::vector<std::int32_t> row_ints(const std::vector<std::int32_t>& v, int row, int width) {
  return {v.begin() + std::int64_t{row} * width, v.begin() + std::int64_t{row + 1} * width};
}

struct Case {
  bool fp8;
  bool yarn;
};

class QsaLayerGpu : public ::testing::TestWithParam<Case> {};

// Every step against the reference: RoPE, store (fp8 codes bit-exact from the GPU's own bf16
// K), slab, selections (equal as sets except within rounding of the k-th score), attention
// over the GPU's selection (fp32 path), and the whole layer against the reference layer.
TEST_P(QsaLayerGpu, MatchesReference) {
  REQUIRE_GPU();
  const Case cs = GetParam();
  const qsa_ref::Dims d = gpu_dims(16, cs.yarn);
  const int n = 203;
  const std::uint64_t seed = 1234;
  SCOPED_TRACE("seed " + std::to_string(seed));
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, seed);
  LayerConfig cfg;
  cfg.dims = d;
  cfg.fp8 = cs.fp8;
  GpuLayer g(in, cfg);
  g.run_chunks({});
  const qsa_ref::Storage st = cs.fp8 ? qsa_ref::Storage::fp8 : qsa_ref::Storage::bf16;
  const qsa_ref::LayerOutput ref = qsa_ref::qsa_layer(in, d, st);

  const Mat q_gpu = GpuLayer::bf16_mat(g.q_.download(), n);
  EXPECT_LT(rel(q_gpu, ref.q_rot), 5e-3);
  const Mat k_rot_gpu = GpuLayer::bf16_mat(g.k_in_.download(), n);
  const Mat k_gpu = g.stored(false), v_gpu = g.stored(true);
  EXPECT_FALSE(k_gpu.hasNaN() || v_gpu.hasNaN());
  EXPECT_LT(rel(k_gpu, ref.k_stored), cs.fp8 ? 5e-2 : 5e-3);
  EXPECT_LT(rel(v_gpu, ref.v_stored), cs.fp8 ? 5e-2 : 1e-12);
  if (cs.fp8) {
    // The stored codes and scales are exactly the reference quantisation of the GPU's K.
    Mat k_expect = k_rot_gpu;
    std::vector<float> x(d.head_dim);
    std::vector<std::uint8_t> c(d.head_dim);
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < d.kv_heads; ++h) {
        for (int i = 0; i < d.head_dim; ++i)
          x[i] = static_cast<float>(k_rot_gpu(t, h * d.head_dim + i));
        const float s = qsa_ref::fp8_quantize(x.data(), d.head_dim, c.data());
        for (int i = 0; i < d.head_dim; ++i)
          k_expect(t, h * d.head_dim + i) = qsa_ref::fp8_e4m3_decode(c[i]) * s;
      }
    EXPECT_EQ((k_gpu - k_expect).cwiseAbs().maxCoeff(), 0.0);
  }
  const Mat slab_gpu = GpuLayer::bf16_mat(g.slab_.download(), n / d.ratio);
  EXPECT_LT(rel(slab_gpu, ref.slab), 5e-3);

  const std::vector<std::int32_t> blocks = g.blocks_.download();
  const std::vector<std::int32_t> tokens = g.tokens_.download();
  const std::vector<float> o = g.o_.download(), lse = g.lse_.download();
  int exact_rows = 0, compared = 0;
  for (int t = 0; t < n; ++t) {
    const std::vector<std::int32_t> gb = row_ints(blocks, t, g.k());
    const std::vector<float>& sc = ref.scores[t];
    // Selection: any block in one set and not the other scores within rounding of the k-th.
    std::vector<float> sorted = sc;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const double kth =
        sorted.empty() ? 0.0 : sorted[std::min<std::size_t>(g.k(), sorted.size()) - 1];
    std::set<std::int32_t> a(gb.begin(), gb.end()), b(ref.blocks[t].begin(), ref.blocks[t].end());
    for (std::int32_t x : a) {
      if (!b.count(x)) {
        EXPECT_NEAR(sc[x], kth, 2e-2 * std::max(1.0, std::fabs(kth))) << t;
      }
    }
    for (std::int32_t x : b) {
      if (!a.count(x)) {
        EXPECT_NEAR(sc[x], kth, 2e-2 * std::max(1.0, std::fabs(kth))) << t;
      }
    }
    EXPECT_EQ(a.size(), b.size());
    EXPECT_TRUE(std::is_sorted(
        gb.begin(), gb.begin() + static_cast<long>(std::count_if(gb.begin(), gb.end(),
                                                                 [](int v) { return v >= 0; }))));
    EXPECT_EQ(row_ints(tokens, t, g.width()), qsa_ref::expand_tokens(gb, t, d.ratio, g.width()));
    // Attention over the GPU's own selection and stored bytes: fp32 against fp64.
    const Mat qt = Eigen::Map<const Mat>(q_gpu.row(t).data(), d.q_heads, d.head_dim);
    const qsa_ref::AttnOut ra =
        qsa_ref::attend(qt, k_gpu, v_gpu, row_ints(tokens, t, g.width()), d);
    const Mat ot = row_of(o, t, d.q_heads, d.head_dim);
    ASSERT_FALSE(ot.hasNaN()) << t;
    EXPECT_LT(rel(ot, ra.o), 2e-5) << t;
    for (int h = 0; h < d.q_heads; ++h)
      EXPECT_NEAR(lse[std::size_t(t) * d.q_heads + h], ra.lse[h], 2e-4) << t;
    // Whole layer against the reference layer, where the selections agree.
    if (a == b) {
      ++exact_rows;
      const double e = rel(ot, ref.o[t]);
      EXPECT_LT(e, cs.fp8 ? 6e-2 : 1.5e-2) << t;
      ++compared;
    }
  }
  EXPECT_GE(exact_rows, n * 9 / 10);
  RecordProperty("rows_equal_selection", exact_rows);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QsaLayerGpu,
                         ::testing::Values(Case{false, false}, Case{true, false},
                                           Case{false, true}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return std::string(p.param.fp8 ? "fp8" : "bf16") +
                                  (p.param.yarn ? "_yarn" : "");
                         });

// With a context of at most budget + 3 tokens (k blocks of 4 and the open group of up to 3)
// every block is chosen, so QSA equals dense causal attention computed by the reference.
TEST(QsaGpu, ContextWithinBudgetPlus3IsDenseCausal) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(16);
  const int n = d.select_width();  // 67
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 99);
  LayerConfig cfg;
  cfg.dims = d;
  GpuLayer g(in, cfg);
  g.run_chunks({});
  const qsa_ref::LayerOutput ref = qsa_ref::qsa_layer(in, d, qsa_ref::Storage::bf16);
  const std::vector<std::int32_t> blocks = g.blocks_.download();
  const std::vector<float> o = g.o_.download();
  for (int t = 0; t < n; ++t) {
    const std::vector<std::int32_t> gb = row_ints(blocks, t, g.k());
    for (int i = 0; i < g.k(); ++i)
      EXPECT_EQ(gb[i], i < (t + 1) / d.ratio ? i : -1) << t;
    const Mat qt = Eigen::Map<const Mat>(ref.q_rot.row(t).data(), d.q_heads, d.head_dim);
    const qsa_ref::AttnOut dense = qsa_ref::dense_causal(qt, ref.k_stored, ref.v_stored, t, d);
    EXPECT_LT(rel(row_of(o, t, d.q_heads, d.head_dim), dense.o), 1e-2) << t;
  }
}

// Chunked prefill cut at 1001 / 4096 / 4097 tokens: same selections and output bits as one-shot.
// KVTIER_QSA_TEST_SMALL=1 (for compute-sanitizer runs, which are too slow at full size): 603
// tokens cut at 101 / 512 / 513 instead (512: a whole number of pages and index row tiles).
TEST(QsaGpu, ChunkedPrefillIsBitIdentical) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(64);
  const bool small = std::getenv("KVTIER_QSA_TEST_SMALL") != nullptr;
  const int n = small ? 603 : 4203;
  const int c1 = small ? 101 : 1001, c2 = small ? 512 : 4096, c3 = c2 + 1;
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 5);
  LayerConfig cfg;
  cfg.dims = d;
  cfg.page_size = 64;
  GpuLayer one(in, cfg);
  one.run_chunks({});
  const auto blocks = one.blocks_.download();
  const auto o = one.o_.download();
  const auto lse = one.lse_.download();
  const auto slab = one.slab_.download();
  for (const std::vector<int>& cuts : {std::vector<int>{c1}, std::vector<int>{c2},
                                       std::vector<int>{c3}, std::vector<int>{c1, c2, c3}}) {
    GpuLayer c(in, cfg);
    c.run_chunks(cuts);
    EXPECT_EQ(c.slab_.download(), slab) << cuts.size();
    EXPECT_EQ(c.blocks_.download(), blocks) << cuts.size();
    EXPECT_EQ(std::memcmp(c.o_.download().data(), o.data(), o.size() * 4), 0) << cuts.size();
    EXPECT_EQ(std::memcmp(c.lse_.download().data(), lse.data(), lse.size() * 4), 0);
  }
}

// A forward captured in a CUDA graph and replayed equals the eager forward, bit for bit.
TEST(QsaGpu, GraphReplayEqualsEager) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(32);
  const int n = 310;
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 17);
  LayerConfig cfg;
  cfg.dims = d;
  GpuLayer eager(in, cfg), graphed(in, cfg);
  eager.run_chunks({300, 305});
  graphed.run_chunks({}, 300);  // prefill 0..299 eagerly; then 300..304 and 305..309 as graphs
  cudaStream_t s;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int b : {300, 305}) {
    graphed.prepare(b, 5);
    cudaGraph_t graph;
    KVT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    graphed.forward(b, 5, s);
    KVT_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    KVT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    KVT_CUDA_CHECK(cudaGraphLaunch(exec, s));
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    KVT_CUDA_CHECK(cudaGraphExecDestroy(exec));
    KVT_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  KVT_CUDA_CHECK(cudaStreamDestroy(s));
  EXPECT_EQ(graphed.blocks_.download(), eager.blocks_.download());
  EXPECT_EQ(graphed.tokens_.download(), eager.tokens_.download());
  const auto a = graphed.o_.download(), b = eager.o_.download();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  const auto la = graphed.lse_.download(), lb = eager.lse_.download();
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0);
}

// One captured graph (index, top-k with its workspace memset, expand, attend of 5 decode rows)
// replayed 200 times, the outputs poisoned before each replay: every replay writes the eager
// forward's bits.
TEST(QsaGpu, GraphReplaysManyTimesEqualEager) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(32);
  const int n = 310, b = 305, count = 5;
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 19);
  LayerConfig cfg;
  cfg.dims = d;
  GpuLayer g(in, cfg);
  g.run_chunks({300, 305});
  const auto blocks = g.blocks_.download(), tokens = g.tokens_.download();
  const auto o = g.o_.download(), lse = g.lse_.download();
  cudaStream_t s;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  KVT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  g.select_and_attend(b, count, s);
  KVT_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  KVT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const std::size_t ob = std::size_t(b) * d.q_heads * d.head_dim;
  const std::size_t on = std::size_t(count) * d.q_heads * d.head_dim;
  int bad = 0;
  for (int rep = 0; rep < 200; ++rep) {
    KVT_CUDA_CHECK(cudaMemsetAsync(g.o_.get() + ob, 0xff, on * 4, s));
    KVT_CUDA_CHECK(cudaMemsetAsync(g.lse_.get() + std::size_t(b) * d.q_heads, 0xff,
                                   std::size_t(count) * d.q_heads * 4, s));
    KVT_CUDA_CHECK(cudaMemsetAsync(g.blocks_.get() + std::size_t(b) * g.k(), 0xff,
                                   std::size_t(count) * g.k() * 4, s));
    KVT_CUDA_CHECK(cudaGraphLaunch(exec, s));
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    if (rep % 20 != 19) continue;
    const auto o2 = g.o_.download(), l2 = g.lse_.download();
    bad += std::memcmp(o2.data() + ob, o.data() + ob, on * 4) != 0;
    bad +=
        std::memcmp(l2.data() + std::size_t(b) * d.q_heads, lse.data() + std::size_t(b) * d.q_heads,
                    std::size_t(count) * d.q_heads * 4) != 0;
    bad += g.blocks_.download() != blocks;
    bad += g.tokens_.download() != tokens;
  }
  EXPECT_EQ(bad, 0);
  KVT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  KVT_CUDA_CHECK(cudaGraphDestroy(graph));
  KVT_CUDA_CHECK(cudaStreamDestroy(s));
}

// The tensor-core attend gives the same bits with either gather: device banks (cp.async) and
// host banks (register loads) read the same bytes, at the shape's split count (on the H200 a
// grid of fewer CTAs than SMs, launched plainly) and at one whose grid exceeds the SMs (device
// banks then launch early, after the selection kernels, so the attend's wait must hold them back);
// and the outputs match fp64 attention over the same selection and stored bytes within the
// fp32-path tolerance (2e-5). Shapes: a slice of several tiles with a partial last one (3
// splits of 259 tokens), and a slice longer than one map segment (1 split of 2083 tokens >
// 2048). KVTIER_QSA_TEST_SMALL=1 (sanitizers): 4 rows instead of 16, the first shape only (the
// second one's prefill of 2200 rows is too slow under racecheck).
TEST(QsaGpu, AttendVariantsAgree) {
  REQUIRE_GPU();
  const bool small = std::getenv("KVTIER_QSA_TEST_SMALL") != nullptr;
  struct Shape {
    int block_topk, n, splits;
  };
  std::vector<Shape> shapes = {{64, 1200, 3}, {520, 2200, 1}};
  if (small) shapes.resize(1);
  const int rows = small ? 4 : 16;
  for (const Shape& cs : shapes) {
    const qsa_ref::Dims d = gpu_dims(cs.block_topk);
    qsa_ref::LayerInput in = qsa_ref::random_input(cs.n, d, 77);
    // More CTAs than SMs: rows x KV heads x splits > sm_count().
    const int many = sm_count() / (rows * d.kv_heads) + 1;
    const int first = cs.n - rows;
    LayerConfig cfg;
    cfg.dims = d;
    cfg.splits = cs.splits;  // the prefill's; its workspace holds the last rows at `many`
    LayerConfig host_cfg = cfg;
    host_cfg.host_banks = true;
    GpuLayer dev(in, cfg), host(in, host_cfg);
    dev.run_chunks({});
    host.run_chunks({});
    const Mat q_gpu = GpuLayer::bf16_mat(dev.q_.download(), cs.n);
    const Mat k_gpu = dev.stored(false), v_gpu = dev.stored(true);
    for (const int splits : {cs.splits, many}) {
      auto run = [&](GpuLayer& g) {
        g.o_.zero();
        g.select_and_attend(first, rows, nullptr, splits);
        KVT_CUDA_CHECK(cudaDeviceSynchronize());
        return g.o_.download();
      };
      const std::vector<float> od = run(dev), oh = run(host);
      EXPECT_EQ(std::memcmp(od.data(), oh.data(), od.size() * 4), 0)
          << "splits " << splits << " width " << dev.width();
      const std::vector<std::int32_t> tokens = dev.tokens_.download();
      for (int t = first; t < cs.n; ++t) {
        const Mat qt = Eigen::Map<const Mat>(q_gpu.row(t).data(), d.q_heads, d.head_dim);
        const qsa_ref::AttnOut ra =
            qsa_ref::attend(qt, k_gpu, v_gpu, row_ints(tokens, t, dev.width()), d);
        const Mat ot = row_of(od, t, d.q_heads, d.head_dim);
        ASSERT_FALSE(ot.hasNaN()) << t;
        EXPECT_LT(rel(ot, ra.o), 2e-5) << "row " << t << " splits " << splits;
      }
    }
  }
}

// Device pool, mirror slots (other physical ids) and the host bank read in place give the same
// output bits for the same selections.
TEST(QsaGpu, PlacementsAreBitIdentical) {
  REQUIRE_GPU();
  for (bool fp8 : {false, true}) {
    const qsa_ref::Dims d = gpu_dims(16);
    const int n = 257;
    qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 23);
    LayerConfig dev;
    dev.dims = d;
    dev.fp8 = fp8;
    LayerConfig mirror = dev;
    mirror.page_offset = 7;
    LayerConfig host = dev;
    host.host_banks = true;
    GpuLayer a(in, dev), b(in, mirror), c(in, host);
    a.run_chunks({});
    b.run_chunks({});
    c.run_chunks({});
    const auto oa = a.o_.download();
    for (GpuLayer* x : {&b, &c}) {
      EXPECT_EQ(x->blocks_.download(), a.blocks_.download()) << fp8;
      const auto ox = x->o_.download();
      EXPECT_EQ(std::memcmp(ox.data(), oa.data(), oa.size() * 4), 0) << fp8;
    }
  }
}

// The mirror's reads before its ensure: rows through a table whose entries name pool pages or
// (<= -2) pages of the host bank read in place give the bits of the same rows read all from
// the pool, whichever pages are in place (none, some, all). fp8 banks are refused.
TEST(QsaGpu, InPlaceRowsEqualPoolRows) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(128);
  const int n = 1500;
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 41);
  LayerConfig dev;
  dev.dims = d;
  LayerConfig host = dev;
  host.host_banks = true;
  GpuLayer a(in, dev), c(in, host);  // the same bytes at the same physical pages
  a.run_chunks({});
  c.run_chunks({});
  const int rows = 8, first = n - rows, W = a.width();
  const Rows r{a.req_.get() + first, a.pos_.get() + first, rows};
  const std::uint16_t* q = a.q_.get() + std::int64_t{first} * d.q_heads * d.head_dim;
  const std::int32_t* toks = a.tokens_.get() + std::int64_t{first} * W;
  const std::size_t out = std::size_t(rows) * d.q_heads * d.head_dim;
  Buf<float> want(out), got(out), lse_want(std::size_t(rows) * d.q_heads),
      lse_got(std::size_t(rows) * d.q_heads);
  attend(q, d.q_heads, r, toks, W, a.banks(), a.table(), dev.splits, a.work_.get(), want.get(),
         lse_want.get(), nullptr);
  const std::vector<std::int32_t> table = a.table_.download();
  Buf<std::int32_t> mixed(table.size());
  // no page in place, every third, all; gathered by cp.async and (mostly in place) by register
  // loads
  for (const bool registers : {false, true}) {
    for (int every : {0, 3, 1}) {
      std::vector<std::int32_t> t = table;
      for (std::size_t i = 0; i < t.size(); ++i)
        if (every > 0 && i % every == 0) t[i] = -2 - t[i];
      mixed.upload(t);
      PageTable pt = a.table();
      pt.pages = mixed.get();
      pt.in_place = c.banks();
      pt.mostly_in_place = registers;
      attend(q, d.q_heads, r, toks, W, a.banks(), pt, dev.splits, a.work_.get(), got.get(),
             lse_got.get(), nullptr);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto w = want.download(), g = got.download();
      EXPECT_EQ(std::memcmp(w.data(), g.data(), w.size() * 4), 0)
          << "every " << every << ", register gather " << registers;
      const auto lw = lse_want.download(), lg = lse_got.download();
      EXPECT_EQ(std::memcmp(lw.data(), lg.data(), lw.size() * 4), 0)
          << "every " << every << ", register gather " << registers;
    }
  }
  // in-place banks must have the table's dtype (fp8 rows read fp8 banks in place too)
  KvBanks fp8 = a.banks();
  fp8.fp8 = true;
  PageTable pt = a.table();
  pt.in_place = a.banks();
  EXPECT_THROW(attend(q, d.q_heads, r, toks, W, fp8, pt, dev.splits, a.work_.get(), got.get(),
                      nullptr, nullptr),
               std::exception);
}

// Windows folded by LSE equal one pass within fp32 rounding, for 2 to 40 windows.
TEST(QsaGpu, FoldedWindowsEqualOnePass) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(128);
  const int n = 700;
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 31);
  LayerConfig cfg;
  cfg.dims = d;
  GpuLayer g(in, cfg);
  g.run_chunks({});
  const int rows = 8, first = n - rows, W = g.width();
  const std::vector<std::int32_t> tokens = g.tokens_.download();
  const std::vector<float> o_all = g.o_.download(), lse_all = g.lse_.download();
  const std::size_t ho = std::size_t(d.q_heads) * d.head_dim;
  const Rows r{g.req_.get() + first, g.pos_.get() + first, rows};
  const std::uint16_t* q = g.q_.get() + std::int64_t{first} * d.q_heads * d.head_dim;
  Buf<std::int32_t> win(std::size_t(rows) * W);
  Buf<float> acc_o(rows * ho), acc_lse(std::size_t(rows) * d.q_heads), po(rows * ho),
      plse(std::size_t(rows) * d.q_heads);
  for (int windows : {2, 3, 7, 40}) {
    fold_reset(acc_o.get(), acc_lse.get(), rows, d.q_heads, nullptr);
    for (int w = 0; w < windows; ++w) {
      // Window w: positions [w * n / windows, (w + 1) * n / windows) of each row's list.
      std::vector<std::int32_t> t(std::size_t(rows) * W, -1);
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < W; ++j) {
          const std::int32_t p = tokens[std::size_t(first + i) * W + j];
          if (p >= w * n / windows && p < (w + 1) * n / windows) t[std::size_t(i) * W + j] = p;
        }
      win.upload(t);
      attend(q, d.q_heads, r, win.get(), W, g.banks(), g.table(), cfg.splits, g.work_.get(),
             po.get(), plse.get(), nullptr);
      fold(acc_o.get(), acc_lse.get(), po.get(), plse.get(), rows, d.q_heads, nullptr);
    }
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto ao = acc_o.download(), al = acc_lse.download();
    for (int i = 0; i < rows; ++i) {
      const Mat a = row_of(ao, i, d.q_heads, d.head_dim);
      const Mat b = row_of(o_all, first + i, d.q_heads, d.head_dim);
      ASSERT_FALSE(a.hasNaN());
      EXPECT_LT(rel(a, b), 1e-5) << windows;
      for (int h = 0; h < d.q_heads; ++h)
        EXPECT_NEAR(al[std::size_t(i) * d.q_heads + h],
                    lse_all[std::size_t(first + i) * d.q_heads + h], 1e-4);
    }
  }
}

// Index scores against exact sums (fp64 over the bf16 inputs) for a batch of three requests:
// a prefill chunk deep in its context, one decode row, a prefill from position 0; CTAs of one
// request (tensor cores) and of several (CUDA cores); logit rows 16-byte aligned or not. Entries
// at or beyond a row's visible blocks keep their poison. 4 index heads run the mma.sync kernel
// with the queries in registers, 3 heads the general WMMA kernel.
TEST(QsaGpu, IndexScoresMatchExactSums) {
  REQUIRE_GPU();
  const int dim = kIndexDim;
  struct Req {
    int rows, pos0;
  };
  const std::vector<Req> reqs = {{300, 1000}, {1, 77}, {200, 0}};
  const std::int64_t slab_stride = 400;  // >= (1299 + 1) / 4 = 325 visible blocks
  std::vector<std::int32_t> req, pos;
  for (int q = 0; q < static_cast<int>(reqs.size()); ++q)
    for (int i = 0; i < reqs[q].rows; ++i) {
      req.push_back(q);
      pos.push_back(reqs[q].pos0 + i);
    }
  const int rows = static_cast<int>(req.size());
  std::mt19937 rng(606);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<std::uint16_t> slab(std::size_t(reqs.size()) * slab_stride * dim);
  for (auto& x : slab)
    x = qsa_ref::bf16_bits(normal(rng));
  Buf<std::uint16_t> dslab(slab.size());
  dslab.upload(slab);
  Buf<std::int32_t> dreq(req.size()), dpos(pos.size());
  dreq.upload(req);
  dpos.upload(pos);
  const std::int64_t max_blocks = 325;
  auto vis = [&](int r) { return (std::int64_t{pos[r]} + 1) / 4; };
  for (const int heads : {4, 3}) {
    std::vector<std::uint16_t> iq(std::size_t(rows) * heads * dim);
    for (auto& x : iq)
      x = qsa_ref::bf16_bits(normal(rng));
    Buf<std::uint16_t> diq(iq.size());
    diq.upload(iq);
    for (const std::int64_t stride : {std::int64_t{327}, std::int64_t{328}}) {
      Buf<float> logits(static_cast<std::size_t>(rows * stride));  // poisoned (0xff bytes)
      index_scores(diq.get(), heads, Rows{dreq.get(), dpos.get(), rows}, dslab.get(), slab_stride,
                   logits.get(), stride, max_blocks, nullptr);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<float> out = logits.download();
      int bad = 0, unwritten_changed = 0;
      for (int r = 0; r < rows; ++r)
        for (std::int64_t b = 0; b < stride; ++b) {
          const float got = out[std::size_t(r * stride + b)];
          std::uint32_t bits;
          std::memcpy(&bits, &got, 4);
          if (b >= vis(r)) {
            unwritten_changed += bits != 0xffffffffu;
            continue;
          }
          double score = 0.0, mag = 0.0;
          for (int h = 0; h < heads; ++h) {
            double dot = 0.0;
            for (int i = 0; i < dim; ++i) {
              const double x = qsa_ref::bf16_value(iq[(std::size_t(r) * heads + h) * dim + i]) *
                               qsa_ref::bf16_value(slab[(req[r] * slab_stride + b) * dim + i]);
              dot += x;
              mag += std::fabs(x);
            }
            score += std::max(dot, 0.0);
          }
          score /= std::sqrt(double(dim));
          mag /= std::sqrt(double(dim));
          if (!(std::fabs(got - score) <= 2e-5 * mag + 1e-30)) {
            if (++bad < 5)
              ADD_FAILURE() << heads << " heads, row " << r << " block " << b << ": " << got
                            << " vs " << score;
          }
        }
      EXPECT_EQ(bad, 0) << heads << " heads, stride " << stride;
      EXPECT_EQ(unwritten_changed, 0) << heads << " heads, stride " << stride;
    }
  }
}

// top-k equals the reference set on random, tied, ragged, -inf and NaN inputs.
TEST(QsaGpu, TopkEqualsReference) {
  REQUIRE_GPU();
  const int k = 512;
  const std::vector<int> n_valid = {0,    1,     511,    512,    513,    1000,
                                    5000, 70001, 262144, 262144, 262144, 3000};
  const int rows = static_cast<int>(n_valid.size());
  const std::int64_t stride = 262144;
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(0, 3);
  std::vector<float> x(std::size_t(rows) * stride);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < stride; ++i) {
      float v = normal(rng);
      if (r == 8) v = static_cast<float>(small(rng));                   // heavy ties
      if (r == 9) v = 1.0f;                                             // all equal
      if (r == 10) v = small(rng) == 0 ? v : ninf;                      // mostly -inf
      if (r == 11) v = small(rng) == 0 ? std::nanf("") : std::fabs(v);  // NaN, +-0
      if (r == 11 && small(rng) == 1) v = -0.0f;
      x[std::size_t(r) * stride + i] = v;
    }
  Buf<float> dx(x.size());
  dx.upload(x);
  Buf<std::int32_t> dn(n_valid.size()), dout(std::size_t(rows) * k), dpos(rows), dreq(rows);
  dn.upload(n_valid);
  topk(dx.get(), stride, dn.get(), Rows{dreq.get(), dpos.get(), rows}, 4, k, dout.get(), nullptr);
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = dout.download();
  // The multi-CTA form (chunks of 8192 keys) gives the same lists; run it twice on one workspace.
  Buf<std::int32_t> work(static_cast<std::size_t>(topk_workspace_bytes(rows, stride) / 4)),
      dout_mc(std::size_t(rows) * k);
  for (int rep = 0; rep < 2; ++rep) {
    dout_mc.upload(std::vector<std::int32_t>(std::size_t(rows) * k, 12345));
    topk(dx.get(), stride, dn.get(), Rows{dreq.get(), dpos.get(), rows}, 4, k, dout_mc.get(),
         work.get(), stride, nullptr);
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(dout_mc.download(), out) << rep;
  }
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row(x.begin() + std::int64_t{r} * stride,
                           x.begin() + std::int64_t{r + 1} * stride);
    // -0 and +0 are equal scores; the reference's sort keeps them tied, so do the GPU's keys.
    for (float& v : row)
      if (v == 0.0f) v = 0.0f;
    EXPECT_EQ(row_ints(out, r, k), qsa_ref::topk_blocks(row, n_valid[r], k)) << "row " << r;
  }
}

// The store writes the mirror with exactly the pool's bytes (codes and scales), never
// re-quantised, and leaves -1 pages untouched.
TEST(QsaGpu, StoreMirrorWriteThroughIsBitIdentical) {
  REQUIRE_GPU();
  for (bool fp8 : {false, true}) {
    const qsa_ref::Dims d = gpu_dims(16);
    const int n = 50, ps = 7, pages = (n + ps - 1) / ps;
    qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 41);
    const std::size_t elems = std::size_t(pages + 1) * ps * d.kv_heads * d.head_dim;
    const std::size_t bytes = elems * (fp8 ? 1 : 2), scales = std::size_t(pages + 1) * ps * 2;
    Buf<std::uint8_t> pk(bytes), pv(bytes), mk(bytes, true), mv(bytes, true);
    Buf<float> pks(scales), pvs(scales), mks(scales, true), mvs(scales, true);
    std::vector<std::int32_t> pool_t(pages), mirror_t(pages);
    for (int p = 0; p < pages; ++p) {
      pool_t[p] = (p * 3) % pages;
      mirror_t[p] = p;
    }
    Buf<std::int32_t> dpt(pages), dmt(pages), req(n), pos(n);
    dpt.upload(pool_t);
    dmt.upload(mirror_t);
    std::vector<std::int32_t> z(n, 0), ps_(n);
    std::iota(ps_.begin(), ps_.end(), 0);
    req.upload(z);
    pos.upload(ps_);
    Buf<std::uint16_t> k(in.k.size()), v(in.v.size());
    k.upload(to_bf16(in.k));
    v.upload(to_bf16(in.v));
    const KvBanks pool{pk.get(), pv.get(), pks.get(), pvs.get(), fp8, ps, d.kv_heads, false};
    const KvBanks mirror{mk.get(), mv.get(), mks.get(), mvs.get(), fp8, ps, d.kv_heads, true};
    store_kv(k.get(), v.get(), Rows{req.get(), pos.get(), n}, pool, {dpt.get(), pages, pages},
             mirror, {dmt.get(), pages, pages}, nullptr);
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto a = pk.download(), b = mk.download();
    const auto as = pks.download(), bs = mks.download();
    const std::size_t tb = std::size_t(d.kv_heads) * d.head_dim * (fp8 ? 1 : 2);
    for (int t = 0; t < n; ++t) {
      const std::size_t at = std::size_t(pool_t[t / ps]) * ps + t % ps;
      const std::size_t bt = std::size_t(t);
      EXPECT_EQ(std::memcmp(&a[at * tb], &b[bt * tb], tb), 0) << t;
      if (fp8) {
        EXPECT_EQ(std::memcmp(&as[at * 2], &bs[bt * 2], 8), 0) << t;
      } else {
        std::uint16_t first;
        std::memcpy(&first, &a[at * tb], 2);
        EXPECT_EQ(first, qsa_ref::bf16_bits(static_cast<float>(in.k(t, 0))));
      }
    }
    // The spare page (never in a table) still holds the poison: nothing wrote it.
    EXPECT_EQ(b[std::size_t(pages) * ps * tb], 0xff);
  }
}

// The merge of an attend's partials gives the same bits in one block per (row, head) and in four
// slices of its dims (attend takes four for fewer (row, head) pairs than SMs), on both sides of
// each form's held limit (72 and 136 splits), with splits and whole heads that saw no token
// (m = -inf); and it matches the fp64 log-sum-exp merge of the same partials.
TEST(QsaGpu, MergeSlicesGiveTheSameBits) {
  REQUIRE_GPU();
  const int q_heads = 24;
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f), mlog(-12.0f, 12.0f), lsum(0.5f, 40.0f);
  for (const int rows : {1, 3}) {
    for (const int splits : {1, 5, 64, 72, 73, 132, 136, 137, 264}) {
      const std::size_t heads = std::size_t(rows) * q_heads;
      std::vector<float> work(
          static_cast<std::size_t>(attend_workspace_floats(rows, q_heads, splits)));
      float* acc = work.data();
      float* ml = work.data() + heads * splits * kHeadDim;
      for (std::size_t i = 0; i < heads * splits * kHeadDim; ++i)
        acc[i] = val(rng);
      for (std::size_t h = 0; h < heads; ++h)
        for (int sp = 0; sp < splits; ++sp) {
          // head 1 saw nothing; elsewhere every 7th split is empty
          const bool empty = h == 1 || (sp % 7 == 3 && splits > 1);
          ml[(h * splits + sp) * 2] = empty ? -inf : mlog(rng);
          ml[(h * splits + sp) * 2 + 1] = empty ? 0.0f : lsum(rng);
        }
      Buf<float> dwork(work.size());
      dwork.upload(work);
      std::vector<std::vector<float>> outs, lses;
      for (const int slices : {1, 4}) {
        Buf<float> o(heads * kHeadDim), lse(heads);
        merge(dwork.get(), rows, q_heads, splits, o.get(), lse.get(), slices, nullptr);
        KVT_CUDA_CHECK(cudaDeviceSynchronize());
        outs.push_back(o.download());
        lses.push_back(lse.download());
      }
      const std::string at = "rows " + std::to_string(rows) + " splits " + std::to_string(splits);
      EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4), 0) << at;
      EXPECT_EQ(std::memcmp(lses[0].data(), lses[1].data(), lses[0].size() * 4), 0) << at;
      for (std::size_t h = 0; h < heads; ++h) {
        double mx = -inf;
        for (int sp = 0; sp < splits; ++sp)
          mx = std::max(mx, double(ml[(h * splits + sp) * 2]));
        if (std::isinf(mx)) {
          EXPECT_TRUE(std::isinf(lses[1][h]) && lses[1][h] < 0) << at << " head " << h;
          EXPECT_EQ(outs[1][h * kHeadDim], 0.0f) << at << " head " << h;
          continue;
        }
        double l = 0;
        std::vector<double> want(kHeadDim, 0.0);
        for (int sp = 0; sp < splits; ++sp) {
          const double m = ml[(h * splits + sp) * 2];
          if (std::isinf(m)) continue;
          const double w = std::exp2(m - mx);
          l += ml[(h * splits + sp) * 2 + 1] * w;
          for (int d = 0; d < kHeadDim; ++d)
            want[d] += acc[(h * splits + sp) * kHeadDim + d] * w;
        }
        double err = 0, norm = 0;
        for (int d = 0; d < kHeadDim; ++d) {
          const double e = outs[1][h * kHeadDim + d] - want[d] / l;
          err += e * e;
          norm += (want[d] / l) * (want[d] / l);
        }
        EXPECT_LT(std::sqrt(err / std::max(norm, 1e-30)), 1e-5) << at << " head " << h;
        EXPECT_NEAR(lses[1][h], mx + std::log2(l), 1e-4) << at << " head " << h;
      }
    }
  }
  EXPECT_EQ(merge_default_slices(1, q_heads, 132), sm_count() > q_heads ? 4 : 1);
  EXPECT_EQ(merge_default_slices(1, q_heads, 72), 1);
  EXPECT_EQ(merge_default_slices(64, q_heads, 132), 1);
  std::vector<float> none(static_cast<std::size_t>(attend_workspace_floats(1, q_heads, 2)));
  Buf<float> dnone(none.size()), o(std::size_t(q_heads) * kHeadDim);
  EXPECT_THROW(merge(dnone.get(), 1, q_heads, 2, o.get(), nullptr, 2, nullptr), std::exception);
}

}  // namespace
}  // namespace kvtier::qsa::testing
