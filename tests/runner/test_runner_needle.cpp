// The needle proof of issue 7 in the Flash-Next geometry (12 QSA layers, hidden 2560): at a
// 128k-token context the last row's attention output points to the planted value (cosine >
// 0.9) in every QSA layer, under `mirror` with a pool of 1/8 of the context's pages and under
// `host`. docs/needle.md has the construction. Label gpu; skips without a device. The context
// can be lowered with KVTIER_NEEDLE_CONTEXT (tokens) for a quick run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "cuda/runner/qsa_runner.hpp"
#include "cuda/weights/needle.hpp"
#include "cuda/weights/synth.hpp"
#include "tests/runner/runner_gpu_util.hpp"
#include "tests/weights/weights_test_util.hpp"

namespace kvtier::runner_test {
namespace {

using weights::test::TempDir;

constexpr std::int64_t kVocab = 1024;

std::int64_t context() {
  const char* e = std::getenv("KVTIER_NEEDLE_CONTEXT");
  return e != nullptr ? std::atoll(e) : 131072;
}

class Needle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_device()) return;
    dir_ = new TempDir("runner-needle");
    path_ = dir_->file("needle.safetensors");
    const auto t0 = std::chrono::steady_clock::now();
    weights::write_synthetic_weights(path_, Geometry{}, kVocab, {11, true});
    std::printf("weights: %.1f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // Prefills everything but the query token, decodes the query token, returns the cosine of
  // every QSA layer.
  static std::vector<double> cosines(Placement placement, std::int64_t pool_pages) {
    const Geometry g;
    const std::int64_t n = context();
    const std::int64_t at = n * 3 / 10 + 17;  // a closed block far from both ends
    weights::SafetensorsFile f(path_);
    const weights::NeedlePlan plan = weights::needle_plan(g, kVocab);
    auto prompt = weights::needle_prompt(plan, kVocab, n, at, 5);
    const std::int32_t query = prompt.back();
    prompt.pop_back();
    runner::RunnerConfig c;
    c.max_rows = 4096;
    c.max_context = n;
    c.placement = placement;
    c.pool_pages = pool_pages;
    runner::QsaRunner r(f, g, kVocab, c);
    r.set_probe(at);
    const auto t0 = std::chrono::steady_clock::now();
    r.generate({prompt}, 4096, 1);
    r.step({{0, {query}}});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> out;
    for (std::size_t l = 0; l < r.last_attention().size(); ++l)
      out.push_back(weights::needle_cosine(r.last_attention()[l], r.probe_values()[l], g.q_heads,
                                           g.kv_heads, g.head_dim));
    std::printf("%s, context %lld, needle at %lld: %.1f s; cosine per QSA layer:",
                std::string(to_string(placement)).c_str(), static_cast<long long>(n),
                static_cast<long long>(at), s);
    for (double x : out)
      std::printf(" %.4f", x);
    const auto& st = r.stats();
    std::printf("\n  hits %lld misses %lld drops %lld staged %.2f GiB in %lld windows\n",
                static_cast<long long>(st.hits), static_cast<long long>(st.misses),
                static_cast<long long>(st.drops), static_cast<double>(st.staged_bytes) / (1 << 30),
                static_cast<long long>(st.staged_windows));
    return out;
  }

  static TempDir* dir_;
  static std::string path_;
};
TempDir* Needle::dir_ = nullptr;
std::string Needle::path_;

TEST_F(Needle, MirrorWithAnEighthOfTheContextPointsToTheNeedle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Geometry g;
  const std::int64_t pool = g.pages_for_context(context()) / 8;
  const auto c = cosines(Placement::mirror, pool);
  ASSERT_EQ(c.size(), 12u);
  for (std::size_t l = 0; l < c.size(); ++l)
    EXPECT_GT(c[l], 0.9) << "QSA layer " << g.qsa_layer_ids[l];
}

TEST_F(Needle, HostPointsToTheNeedle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Geometry g;
  const auto c = cosines(Placement::host, 0);
  ASSERT_EQ(c.size(), 12u);
  for (std::size_t l = 0; l < c.size(); ++l)
    EXPECT_GT(c[l], 0.9) << "QSA layer " << g.qsa_layer_ids[l];
}

}  // namespace
}  // namespace kvtier::runner_test
