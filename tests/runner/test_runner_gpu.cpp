// The runner (device placement) against the CPU reference of the stack (tests/runner/
// cpu_stack.hpp) on a small geometry with the compiled head sizes (256 / 128): each QSA
// layer's output hidden states, the last row's logits, and the greedy tokens whatever the
// prefill chunking. Label gpu; skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cuda/runner/qsa_runner.hpp"
#include "cuda/runner/skinny_gemm.hpp"
#include "cuda/weights/needle.hpp"
#include "cuda/weights/synth.hpp"
#include "model/config_error.hpp"
#include "tests/runner/cpu_stack.hpp"
#include "tests/runner/runner_gpu_util.hpp"
#include "tests/weights/weights_test_util.hpp"

namespace kvtier::runner_test {
namespace {

using weights::test::TempDir;

constexpr std::int64_t kVocab = 64;
constexpr int kPrompt = 300;

// The small geometry's synthetic weights of `seed` (no needle), written to a fresh directory and
// opened.
struct SmallModel {
  SmallModel(const char* dir_name, std::uint64_t seed)
      : dir(dir_name), f(written(dir.file("w.safetensors"), g, seed)) {}
  static std::string written(const std::string& path, const Geometry& g, std::uint64_t seed) {
    weights::write_synthetic_weights(path, g, kVocab, {seed, false});
    return path;
  }
  const Geometry g = small_gpu_geometry();
  TempDir dir;
  weights::SafetensorsFile f;
};

std::vector<std::int32_t> prompt_tokens(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> t(kPrompt);
  for (auto& x : t)
    x = static_cast<std::int32_t>(rng() % kVocab);
  return t;
}

TEST(RunnerGpu, LayersAndLogitsMatchTheCpuReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const SmallModel m("runner-gpu", 5);
  const Geometry& g = m.g;
  const weights::SafetensorsFile& f = m.f;
  const auto prompt = prompt_tokens(9);

  runner::RunnerConfig rc;
  rc.max_rows = 128;
  rc.max_context = 512;
  runner::QsaRunner gpu(f, g, kVocab, rc);
  gpu.set_capture(true);
  gpu.generate(prompt, 128, 1);  // three forwards: 128 + 128 + 44 rows

  const qsa_ref::Dims d = dims_of(g, false);
  Mat x = embed(f, std::vector<std::int64_t>(prompt.begin(), prompt.end()));
  for (std::size_t li = 0; li < g.qsa_layer_ids.size(); ++li) {
    SCOPED_TRACE("layer " + std::to_string(g.qsa_layer_ids[li]));
    const CpuLayerResult r =
        cpu_layer(load_layer(f, g.qsa_layer_ids[li]), x, d, qsa_ref::Storage::bf16);
    const auto& cap = gpu.captured()[li];
    ASSERT_EQ(cap.size(), static_cast<std::size_t>(kPrompt) * g.hidden_size);
    std::vector<double> rel;
    for (int t = 0; t < kPrompt; ++t) {
      Eigen::RowVectorXd y(g.hidden_size);
      for (int i = 0; i < g.hidden_size; ++i)
        y[i] = cap[static_cast<std::size_t>(t) * g.hidden_size + i];
      ASSERT_FALSE(y.hasNaN()) << t;
      // Error relative to what the layer added (the residual alone would hide it).
      rel.push_back((y - r.y.row(t)).norm() / (r.y.row(t) - x.row(t)).norm());
    }
    std::vector<double> sorted = rel;
    std::sort(sorted.begin(), sorted.end());
    std::printf("layer %d: relative error of the layer's update: median %.2e, p90 %.2e, max %.2e\n",
                g.qsa_layer_ids[li], sorted[sorted.size() / 2], sorted[sorted.size() * 9 / 10],
                sorted.back());
    EXPECT_LT(sorted[sorted.size() / 2], 2e-2);
    EXPECT_LT(sorted[sorted.size() * 9 / 10], 5e-2);
    x = r.y;
  }
  // Final norm and LM head of the last row.
  const Vec fn = tensor_mat(f, weights::kFinalNormName).row(0).transpose();
  const Vec xn = qsa_ref::rms_norm(x.row(kPrompt - 1).transpose(), fn, d.norm_eps);
  const Vec logits = tensor_mat(f, weights::kLmHeadName) * xn;
  const auto& gl = gpu.last_logits();
  ASSERT_EQ(gl.size(), static_cast<std::size_t>(kVocab));
  Vec glv(kVocab);
  for (int i = 0; i < kVocab; ++i)
    glv[i] = gl[static_cast<std::size_t>(i)];
  const double lrel = (glv - logits).norm() / logits.norm();
  std::printf("last row logits: relative error %.2e\n", lrel);
  EXPECT_LT(lrel, 5e-2);
}

// Chunked prefill gives the same logits (up to the projections' accumulation order, which
// cuBLAS may pick by shape) and the same next token; greedy decode then runs on one row at a
// time.
TEST(RunnerGpu, PrefillChunksAgreeAndDecodeRuns) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const SmallModel m("runner-gpu-chunks", 6);
  const Geometry& g = m.g;
  const weights::SafetensorsFile& f = m.f;
  const auto prompt = prompt_tokens(10);
  runner::RunnerConfig rc;
  rc.max_rows = kPrompt;
  rc.max_context = 512;
  std::vector<std::vector<float>> logits;
  std::vector<std::int32_t> first;
  for (int chunk : {kPrompt, 128, 37, 1}) {
    runner::QsaRunner gpu(f, g, kVocab, rc);
    gpu.set_capture(true);
    first.push_back(gpu.generate(prompt, chunk, 1).at(0));
    logits.push_back(gpu.last_logits());
    EXPECT_EQ(gpu.position(), kPrompt);
  }
  auto top2_margin = [](const std::vector<float>& l) {
    std::vector<float> s = l;
    std::sort(s.rbegin(), s.rend());
    return s[0] - s[1];
  };
  for (std::size_t i = 1; i < logits.size(); ++i) {
    double num = 0, den = 0;
    for (std::size_t j = 0; j < logits[0].size(); ++j) {
      num += (logits[i][j] - logits[0][j]) * (logits[i][j] - logits[0][j]);
      den += logits[0][j] * logits[0][j];
    }
    std::printf(
        "chunking %zu: logits relative difference %.2e, next token %d (one forward: %d, "
        "top-2 margin %.3f)\n",
        i, std::sqrt(num / den), first[i], first[0], top2_margin(logits[0]));
    EXPECT_LT(std::sqrt(num / den), 1e-2) << i;
    if (top2_margin(logits[0]) > 0.05f) {
      EXPECT_EQ(first[i], first[0]) << i;
    }
  }
  runner::QsaRunner gpu(f, g, kVocab, rc);
  const auto out = gpu.generate(prompt, 128, 16);
  ASSERT_EQ(out.size(), 16u);
  EXPECT_EQ(out[0], first[1]);
  EXPECT_EQ(gpu.position(), kPrompt + 15);
  std::printf("greedy tokens:");
  for (std::int32_t t : out) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, kVocab);
    std::printf(" %d", t);
  }
  std::printf("\n");
}

// The needle (docs/needle.md) through the runner: in every QSA layer the last row's update of
// the residual stream is what the layer would add if its attention output were exactly the
// needle's value: o_proj(sigmoid(gate) * v_needle), computed on the CPU from the GPU's own
// layer inputs. Without the planted weights it is not.
double needle_update_cosine(const std::string& path, const Geometry& g, std::int64_t context,
                            std::int64_t pos, std::vector<double>* per_layer) {
  weights::SafetensorsFile f(path);
  const weights::NeedlePlan plan = weights::needle_plan(g, kVocab);
  std::mt19937_64 rng(3);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(context));
  for (auto& t : tokens) {
    do {
      t = static_cast<std::int32_t>(rng() % kVocab);
    } while (t == plan.needle_token || t == plan.query_token);
  }
  tokens[static_cast<std::size_t>(pos)] = static_cast<std::int32_t>(plan.needle_token);
  tokens.back() = static_cast<std::int32_t>(plan.query_token);
  runner::RunnerConfig rc;
  rc.max_rows = 512;
  rc.max_context = context;
  runner::QsaRunner gpu(f, g, kVocab, rc);
  gpu.set_capture(true);
  gpu.generate(tokens, 512, 1);
  const int H = g.hidden_size;
  const Mat emb = embed(f, {plan.needle_token, plan.query_token});
  auto row = [&](std::size_t layer, std::int64_t t) {  // input of QSA layer `layer` at row t
    Eigen::RowVectorXd x(H);
    if (layer == 0) return Eigen::RowVectorXd(emb.row(t == pos ? 0 : 1));
    for (int i = 0; i < H; ++i)
      x[i] = gpu.captured()[layer - 1][static_cast<std::size_t>(t) * H + i];
    return x;
  };
  double worst = 1.0;
  for (std::size_t li = 0; li < g.qsa_layer_ids.size(); ++li) {
    const CpuLayerWeights w = load_layer(f, g.qsa_layer_ids[li]);
    const Vec xl = rms_norm_rows(row(li, context - 1), w.input_norm, 1e-6).row(0).transpose();
    const Vec xp = rms_norm_rows(row(li, pos), w.input_norm, 1e-6).row(0).transpose();
    const Vec v = w.v * xp;  // [kv_heads * head_dim]
    Vec attn(std::int64_t{g.q_heads} * g.head_dim);
    for (int h = 0; h < g.q_heads; ++h)
      attn.segment(std::int64_t{h} * g.head_dim, g.head_dim) =
          v.segment(std::int64_t{h / g.gqa_group()} * g.head_dim, g.head_dim);
    const Vec gate = (w.gate * xl).unaryExpr([](double z) { return 1.0 / (1.0 + std::exp(-z)); });
    const Vec expect = w.o * gate.cwiseProduct(attn);
    Eigen::RowVectorXd y(H);
    for (int i = 0; i < H; ++i)
      y[i] = gpu.captured()[li][static_cast<std::size_t>(context - 1) * H + i];
    const Eigen::RowVectorXd update = y - row(li, context - 1);
    const double c = cosine(update, expect.transpose());
    if (per_layer) per_layer->push_back(c);
    worst = std::min(worst, c);
  }
  return worst;
}

// The warm-up's calls write only buffers a forward writes before it reads them: the same
// prompt gives the same logits, bit for bit, and the same tokens, with and without it (rows past
// 64 take cuBLAS, the calls it warms; 44 the tensor-core kernel).
TEST(RunnerGpu, WarmUpLeavesTheForwardsAsTheyWere) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const SmallModel m("runner-gpu-warm", 6);
  const Geometry& g = m.g;
  const weights::SafetensorsFile& f = m.f;
  const auto prompt = prompt_tokens(11);
  runner::RunnerConfig rc;
  rc.max_rows = kPrompt;
  rc.max_context = 512;
  rc.stand_in_width = 96;
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<std::int32_t>> tokens;
  for (const bool warm : {false, true}) {
    runner::QsaRunner gpu(f, g, kVocab, rc);
    gpu.set_capture(true);
    if (warm) gpu.warm_up({kPrompt, 44, 100000});  // past max_rows: clamped
    tokens.push_back(gpu.generate(prompt, kPrompt, 4));
    logits.push_back(gpu.last_logits());
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_TRUE(std::equal(logits[0].begin(), logits[0].end(), logits[1].begin()));
}

// A decode shape's first forward (kernels loaded) and, with graphs, its second (captured) are
// left out of the steady figure; every later decode forward is in it.
TEST(RunnerGpu, SteadyDecodeLeavesOutEachShapesFirstForwardAndCapture) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const SmallModel m("runner-gpu-steady", 6);
  const Geometry& g = m.g;
  const weights::SafetensorsFile& f = m.f;
  const auto prompt = prompt_tokens(12);
  for (const bool graphs : {true, false}) {
    runner::RunnerConfig rc;
    rc.max_rows = kPrompt;
    rc.max_context = 512;
    rc.graphs = graphs;
    runner::QsaRunner gpu(f, g, kVocab, rc);
    gpu.generate(prompt, kPrompt, 7);  // a prefill forward, then 6 decode forwards of one row
    const runner::RunnerStats& s = gpu.stats();
    EXPECT_EQ(s.decode_steady_forwards, graphs ? 4 : 5) << "graphs " << graphs;
    EXPECT_GT(s.decode_steady_ms, 0.0);
    EXPECT_LT(s.decode_steady_ms, s.decode_ms);
    EXPECT_EQ(s.graph_forwards, graphs ? 5 : 0);
  }
}

TEST(RunnerGpu, NeedleUpdatePointsToThePlantedValue) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Geometry g = small_gpu_geometry();
  TempDir dir("runner-gpu-needle");
  weights::write_synthetic_weights(dir.file("n"), g, kVocab, {21, true});
  weights::write_synthetic_weights(dir.file("p"), g, kVocab, {21, false});
  std::vector<double> planted, plain;
  // 4,096 tokens: 1,024 blocks, the row selects 16 of them.
  EXPECT_GT(needle_update_cosine(dir.file("n"), g, 4096, 1234, &planted), 0.9);
  needle_update_cosine(dir.file("p"), g, 4096, 1234, &plain);
  for (std::size_t l = 0; l < planted.size(); ++l) {
    std::printf(
        "layer %d: cosine of the last row's update with the needle's: %.4f (control %.4f)\n",
        g.qsa_layer_ids[l], planted[l], plain[l]);
    EXPECT_LT(plain[l], 0.5);
  }
}

// The decode projections (skinny_gemm) against fp64 sums of the same bf16 products: fp32 out
// within fp32 accumulation error, bf16 out within one bf16 rounding, accumulate adds.
TEST(RunnerGpu, SkinnyGemmMatchesExactSums) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // 264 inputs: one partial batch of loads per lane; 2568: two batches, the second partial
  for (const auto& [in, out] : {std::pair{264, 77}, std::pair{2568, 41}}) {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto bf16 = [](float f) { return weights::float_to_bf16(f); };
    std::vector<std::uint16_t> w(static_cast<std::size_t>(in) * out);
    for (auto& v : w)
      v = bf16(u(rng));
    for (int rows = 1; rows <= runner::kSkinnyMaxRows; ++rows) {
      std::vector<std::uint16_t> x(static_cast<std::size_t>(rows) * in);
      for (auto& v : x)
        v = bf16(u(rng));
      std::vector<float> y0(static_cast<std::size_t>(rows) * out);
      for (auto& v : y0)
        v = u(rng);
      std::uint16_t *dx, *dw, *dyb;
      float* dyf;
      ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dw, w.size() * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dyb, y0.size() * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dyf, y0.size() * 4), cudaSuccess);
      cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dyf, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice);
      runner::skinny_gemm(dx, dw, rows, in, out, dyb, false, false, nullptr);
      runner::skinny_gemm(dx, dw, rows, in, out, dyf, true, true, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<std::uint16_t> yb(y0.size());
      std::vector<float> yf(y0.size());
      cudaMemcpy(yb.data(), dyb, yb.size() * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(yf.data(), dyf, yf.size() * 4, cudaMemcpyDeviceToHost);
      cudaFree(dx);
      cudaFree(dw);
      cudaFree(dyb);
      cudaFree(dyf);
      for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < out; ++o) {
          double exact = 0, mag = 0;
          for (int i = 0; i < in; ++i) {
            const double t = static_cast<double>(weights::bf16_to_float(x[r * in + i])) *
                             weights::bf16_to_float(w[static_cast<std::size_t>(o) * in + i]);
            exact += t;
            mag += std::abs(t);
          }
          const std::size_t at = static_cast<std::size_t>(r) * out + o;
          EXPECT_NEAR(yf[at], exact + y0[at], 1e-5 * (mag + 1)) << rows << " " << r << " " << o;
          EXPECT_NEAR(weights::bf16_to_float(yb[at]), exact, std::abs(exact) / 256 + 1e-5 * mag)
              << in << " " << rows << " " << r << " " << o;
        }
      }
    }
  }
  EXPECT_FALSE(runner::skinny_gemm_fits(9, 264));
  EXPECT_FALSE(runner::skinny_gemm_fits(1, 260));
}

// One launch over several matrices gives each the bits of its own launch (the runner groups
// the six projections that read the normed hidden state).
TEST(RunnerGpu, SkinnyGroupEqualsOneCallPerMatrix) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int in = 2568;
  const std::vector<int> outs{77, 8, 1, 300, 16};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int rows : {1, 3, runner::kSkinnyMaxRows}) {
    std::vector<std::uint16_t> x(static_cast<std::size_t>(rows) * in);
    for (auto& v : x)
      v = weights::float_to_bf16(u(rng));
    std::uint16_t* dx = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
    cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
    std::vector<std::uint16_t*> dw, alone, grouped;
    std::vector<runner::ProjectionOutput> group;
    for (int out : outs) {
      std::vector<std::uint16_t> w(static_cast<std::size_t>(in) * out);
      for (auto& v : w)
        v = weights::float_to_bf16(u(rng));
      std::uint16_t *w_d, *a_d, *g_d;
      ASSERT_EQ(cudaMalloc(&w_d, w.size() * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&a_d, static_cast<std::size_t>(rows) * out * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&g_d, static_cast<std::size_t>(rows) * out * 2), cudaSuccess);
      cudaMemcpy(w_d, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
      runner::skinny_gemm(dx, w_d, rows, in, out, a_d, false, false, nullptr);
      dw.push_back(w_d);
      alone.push_back(a_d);
      grouped.push_back(g_d);
      group.push_back({w_d, out, g_d});
    }
    runner::skinny_gemm_group(dx, rows, in, group, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const std::size_t n = static_cast<std::size_t>(rows) * outs[j];
      std::vector<std::uint16_t> a(n), b(n);
      cudaMemcpy(a.data(), alone[j], n * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(b.data(), grouped[j], n * 2, cudaMemcpyDeviceToHost);
      EXPECT_EQ(a, b) << "rows " << rows << " matrix " << j;
      cudaFree(dw[j]);
      cudaFree(alone[j]);
      cudaFree(grouped[j]);
    }
    cudaFree(dx);
  }
  EXPECT_THROW(runner::skinny_gemm_group(nullptr, 1, in, {}, nullptr), std::invalid_argument);
}

TEST(RunnerGpu, RejectsGeometriesTheKernelsDoNotCompile) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  Geometry g = small_gpu_geometry();
  g.head_dim = 128;
  g.rope_dims = 64;
  TempDir dir("runner-gpu-bad");
  const std::string path = dir.file("w.safetensors");
  weights::write_synthetic_weights(path, g, kVocab, {1, false});
  weights::SafetensorsFile f(path);
  EXPECT_THROW(runner::QsaRunner(f, g, kVocab, {}), ConfigError);
}

}  // namespace
}  // namespace kvtier::runner_test
