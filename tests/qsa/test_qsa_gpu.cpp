// GPU tests of the QSA layer against the CPU reference (label gpu; skipped without a device):
// the whole layer and its steps, dense attention within the budget, chunked prefill, and
// forwards replayed from CUDA graphs. The kernels one by one: test_qsa_kernels_gpu.cpp.
//
// KVTIER_QSA_TEST_SMALL=1 (set by the compute-sanitizer runs, which are too slow at full size):
// ChunkedPrefillIsBitIdentical runs a shorter prefill (see the test).
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

#include "tests/qsa/qsa_gpu_checks.hpp"
#include "tests/qsa/qsa_gpu_runner.hpp"

namespace kvtier::qsa::testing {
namespace {

using qsa_ref::Mat;
using qsa_ref::Vec;

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

}  // namespace
}  // namespace kvtier::qsa::testing
