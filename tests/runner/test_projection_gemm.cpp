// The runner's projections (runner::Gemm and the kernels it picks by rows: skinny_gemm for 1,
// mma_gemm 2..64, cuBLAS beyond) against fp64 sums of the same bf16 products, at row counts
// that fill, split and overrun the 8-row tiles; grouped launches, the f32 accumulate, graph
// replay, and the bits: same run to run, a row's independent of the rows beside it, one row
// exactly skinny_gemm's and 2..64 rows exactly mma_gemm's. Label gpu; skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/runner/gemm.hpp"
#include "cuda/runner/mma_gemm.hpp"
#include "cuda/runner/skinny_gemm.hpp"
#include "cuda/weights/safetensors.hpp"
#include "tests/runner/runner_gpu_util.hpp"

namespace kvtier::runner_test {
namespace {

using cuda::DeviceArray;
using Bf16 = std::vector<std::uint16_t>;

constexpr std::uint16_t kPoison = 0xffff;  // a bf16 NaN: an unwritten output never passes

// Uniform(-1, 1) values rounded to bf16 (never all zero), from a printed seed.
Bf16 random_bf16(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Bf16 v(n);
  for (auto& e : v)
    e = weights::float_to_bf16(u(rng));
  return v;
}

template <class T>
DeviceArray<T> to_device(const std::vector<T>& v) {
  DeviceArray<T> d(v.size());
  KVT_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <class T>
std::vector<T> to_host(const DeviceArray<T>& d, std::size_t n) {
  std::vector<T> v(n);
  KVT_CUDA_CHECK(cudaMemcpy(v.data(), d.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// fp64 sums of x [rows][in] . W^T and of their magnitudes, [rows][out].
struct Exact {
  std::vector<double> sum, mag;
};
Exact exact_products(const Bf16& x, const Bf16& w, int rows, int in, int out) {
  Exact e{std::vector<double>(static_cast<std::size_t>(rows) * out),
          std::vector<double>(static_cast<std::size_t>(rows) * out)};
  std::vector<double> xf(x.size()), wf(w.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    xf[i] = weights::bf16_to_float(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i)
    wf[i] = weights::bf16_to_float(w[i]);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = 0, m = 0;
      const double* xr = &xf[static_cast<std::size_t>(r) * in];
      const double* wr = &wf[static_cast<std::size_t>(o) * in];
      for (int i = 0; i < in; ++i) {
        s += xr[i] * wr[i];
        m += std::abs(xr[i] * wr[i]);
      }
      e.sum[static_cast<std::size_t>(r) * out + o] = s;
      e.mag[static_cast<std::size_t>(r) * out + o] = m;
    }
  }
  return e;
}

// Gemm at every row count of `row_counts` on a prefix of the same x: bf16 out (poisoned first,
// a guard of poison past the end must stay), fp32 out with accumulate onto y0, fp32 out without.
// fp32 within 1e-4 of the magnitude sum (fp32 accumulation, the tensor cores' included); bf16
// within one bf16 rounding of the exact sum beyond that.
void check_gemm(int in, int out, const std::vector<int>& row_counts, std::uint64_t seed) {
  int max_rows = 0;
  for (int r : row_counts)
    max_rows = std::max(max_rows, r);
  std::printf("in %d, out %d, seed %llu\n", in, out, static_cast<unsigned long long>(seed));
  const Bf16 x = random_bf16(static_cast<std::size_t>(max_rows) * in, seed);
  const Bf16 w = random_bf16(static_cast<std::size_t>(out) * in, seed + 1);
  const Exact e = exact_products(x, w, max_rows, in, out);
  std::mt19937_64 rng(seed + 2);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> y0(static_cast<std::size_t>(max_rows) * out);
  for (auto& v : y0)
    v = u(rng);
  const auto dx = to_device(x);
  const auto dw = to_device(w);
  const std::size_t guard = 64;
  runner::Gemm gemm;
  double worst_f32 = 0;  // largest |error| / magnitude sum seen
  for (int rows : row_counts) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const std::size_t n = static_cast<std::size_t>(rows) * out;
    const auto dyb = to_device(Bf16(n + guard, kPoison));
    const auto dya = to_device(std::vector<float>(y0.begin(), y0.begin() + n));
    const auto dyf = to_device(std::vector<float>(n, std::nanf("")));
    gemm.bf16_out(dx.get(), dw.get(), rows, in, out, dyb.get());
    gemm.f32_out(dx.get(), dw.get(), rows, in, out, dya.get(), true);
    gemm.f32_out(dx.get(), dw.get(), rows, in, out, dyf.get(), false);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Bf16 yb = to_host(dyb, n + guard);
    const std::vector<float> ya = to_host(dya, n), yf = to_host(dyf, n);
    int bad = 0;
    for (std::size_t i = 0; i < n && bad < 5; ++i) {
      const double tol = 1e-4 * e.mag[i] + 1e-5;
      const double b = weights::bf16_to_float(yb[i]);
      worst_f32 = std::max(worst_f32, std::abs(yf[i] - e.sum[i]) / (e.mag[i] + 1e-30));
      const bool ok = std::abs(yf[i] - e.sum[i]) <= tol &&
                      std::abs(ya[i] - (e.sum[i] + y0[i])) <= tol &&
                      std::abs(b - e.sum[i]) <= std::abs(e.sum[i]) / 256 + tol;
      if (!ok) {
        ++bad;
        ADD_FAILURE() << "row " << i / out << " column " << i % out << ": exact " << e.sum[i]
                      << ", fp32 " << yf[i] << ", accumulated " << ya[i] << " (onto " << y0[i]
                      << "), bf16 " << b;
      }
    }
    for (std::size_t i = n; i < n + guard; ++i)
      ASSERT_EQ(yb[i], kPoison) << "written past the output at " << i;
  }
  std::printf("  largest fp32 |error| / sum |x w|: %.3g\n", worst_f32);
}

TEST(ProjectionGemm, EveryRowCountMatchesExactSums) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  std::vector<int> all;
  for (int r = 1; r <= runner::kMmaMaxRows + 1; ++r)  // 65: cuBLAS
    all.push_back(r);
  // 264 inputs: 9 chunks of 32, the last a quarter (one warp of K); 77 columns: a partial tile
  check_gemm(264, 77, all, 11);
  // 2,568 inputs: 81 chunks over 8 warps of K, the last slice short; 41 columns: 2 tiles and a bit
  check_gemm(2568, 41, all, 12);
  // the output projection's K (6,144) and columns over several blocks
  check_gemm(6144, 300, {1, 8, 9, 16, 17, 32, 33, 64}, 13);
}

// Gemm is skinny_gemm at one row and mma_gemm from 2 to 8 rows, bit for bit (the rule in
// gemm.cpp: mma_gemm reads W about once at any of these row counts, skinny_gemm once per pair).
TEST(ProjectionGemm, OneRowIsTheSkinnyGemmThenTheMmaGemm) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int in = 2560, out = 300;
  const auto dx = to_device(random_bf16(static_cast<std::size_t>(8) * in, 21));
  const auto dw = to_device(random_bf16(static_cast<std::size_t>(out) * in, 22));
  runner::Gemm gemm;
  for (int rows = 1; rows <= runner::kSkinnyMaxRows; ++rows) {
    const std::size_t n = static_cast<std::size_t>(rows) * out;
    DeviceArray<std::uint16_t> a(n), b(n);
    DeviceArray<float> fa(n), fb(n);
    gemm.bf16_out(dx.get(), dw.get(), rows, in, out, a.get());
    gemm.f32_out(dx.get(), dw.get(), rows, in, out, fa.get(), false);
    if (rows <= runner::kGemmSkinnyRows) {
      runner::skinny_gemm(dx.get(), dw.get(), rows, in, out, b.get(), false, false, nullptr);
      runner::skinny_gemm(dx.get(), dw.get(), rows, in, out, fb.get(), true, false, nullptr);
    } else {
      runner::mma_gemm(dx.get(), dw.get(), rows, in, out, b.get(), false, false, nullptr);
      runner::mma_gemm(dx.get(), dw.get(), rows, in, out, fb.get(), true, false, nullptr);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(to_host(a, n), to_host(b, n)) << "rows " << rows;
    EXPECT_EQ(to_host(fa, n), to_host(fb, n)) << "rows " << rows;
  }
}

// A grouped launch (the runner groups the six projections of the normed hidden state): each
// matrix within bf16 rounding of the exact sums, through Gemm; and each the bits of its own
// launch with the group's tiling.
TEST(ProjectionGemm, MmaGroupMatchesExactSumsAndOneCallPerMatrix) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int in = 2568;
  const std::vector<int> outs{77, 8, 1, 300, 16, 2560};
  runner::Gemm gemm;
  for (int rows : {9, 24, 33, 64}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const Bf16 x = random_bf16(static_cast<std::size_t>(rows) * in, 31 + rows);
    const auto dx = to_device(x);
    std::vector<Bf16> w;
    std::vector<DeviceArray<std::uint16_t>> dw, alone, grouped;
    std::vector<runner::ProjectionOutput> group;
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const std::size_t n = static_cast<std::size_t>(rows) * outs[j];
      w.push_back(random_bf16(static_cast<std::size_t>(outs[j]) * in, 40 + j));
      dw.push_back(to_device(w.back()));
      alone.push_back(to_device(Bf16(n, kPoison)));
      grouped.push_back(to_device(Bf16(n, kPoison)));
      group.push_back({dw.back().get(), outs[j], grouped.back().get()});
    }
    const runner::MmaTiling t = runner::mma_gemm_tiling(rows, in, group);
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const runner::ProjectionOutput o{dw[j].get(), outs[j], alone[j].get()};
      runner::mma_gemm_tiled(dx.get(), rows, in, {&o, 1}, false, false, t, nullptr);
    }
    gemm.bf16_out_group(dx.get(), rows, in, group);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (std::size_t j = 0; j < outs.size(); ++j) {
      const std::size_t n = static_cast<std::size_t>(rows) * outs[j];
      const Bf16 g = to_host(grouped[j], n);
      EXPECT_EQ(to_host(alone[j], n), g) << "matrix " << j;
      const Exact e = exact_products(x, w[j], rows, in, outs[j]);
      int bad = 0;
      for (std::size_t i = 0; i < n && bad < 5; ++i) {
        const double b = weights::bf16_to_float(g[i]);
        if (!(std::abs(b - e.sum[i]) <= std::abs(e.sum[i]) / 256 + 1e-4 * e.mag[i] + 1e-5)) {
          ++bad;
          ADD_FAILURE() << "matrix " << j << " row " << i / outs[j] << " column " << i % outs[j]
                        << ": exact " << e.sum[i] << ", bf16 " << b;
        }
      }
    }
  }
}

// Same bits run to run; for a given tiling a row's bits do not depend on how many rows share
// the launch nor on the column tiles (only on k_split); every tiling within fp32 accumulation
// error of the exact sums; a captured graph replays the eager bits.
TEST(ProjectionGemm, MmaBitsAreDeterministicAndPerRow) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int in = 6144, out = 2560, most = runner::kMmaMaxRows;
  const Bf16 hx = random_bf16(static_cast<std::size_t>(most) * in, 51);
  const Bf16 hw = random_bf16(static_cast<std::size_t>(out) * in, 52);
  const auto dx = to_device(hx);
  const auto dw = to_device(hw);
  const std::size_t n = static_cast<std::size_t>(most) * out;
  auto run = [&](int rows, runner::MmaTiling t, cudaStream_t s) {
    DeviceArray<float> y(n);
    const runner::ProjectionOutput o{dw.get(), out, y.get()};
    runner::mma_gemm_tiled(dx.get(), rows, in, {&o, 1}, true, false, t, s);
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    return to_host(y, static_cast<std::size_t>(rows) * out);
  };
  const runner::ProjectionOutput shape{dw.get(), out, nullptr};
  const runner::MmaTiling t = runner::mma_gemm_tiling(most, in, {&shape, 1});
  const std::vector<float> ref = run(most, t, nullptr);
  EXPECT_EQ(run(most, t, nullptr), ref) << "second run";
  for (int rows : {9, 16, 17, 32, 33, 63}) {
    const std::vector<float> part = run(rows, t, nullptr);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), ref.begin())) << "rows " << rows;
  }
  runner::MmaTiling other = t;
  other.col_tiles = 3 - t.col_tiles;
  EXPECT_EQ(run(most, other, nullptr), ref) << "col_tiles " << other.col_tiles;

  // every tiling, 33 rows, against the exact sums of the first 300 columns
  const int rows = 33, cols = 300;
  const Exact e = exact_products(
      hx, Bf16(hw.begin(), hw.begin() + static_cast<std::ptrdiff_t>(cols) * in), rows, in, cols);
  for (int ct : {1, 2}) {
    for (int ks : {1, 2, 4, 8}) {
      const std::vector<float> y = run(rows, {ct, ks}, nullptr);
      int bad = 0;
      for (int r = 0; r < rows && bad < 3; ++r) {
        for (int c = 0; c < cols && bad < 3; ++c) {
          const std::size_t i = static_cast<std::size_t>(r) * cols + c;
          const float v = y[static_cast<std::size_t>(r) * out + c];
          if (!(std::abs(v - e.sum[i]) <= 1e-4 * e.mag[i] + 1e-5)) {
            ++bad;
            ADD_FAILURE() << "col_tiles " << ct << " k_split " << ks << " row " << r << " column "
                          << c << ": exact " << e.sum[i] << ", got " << v;
          }
        }
      }
    }
  }

  // bf16 out through a captured graph against eager
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const std::size_t m = static_cast<std::size_t>(24) * out;
  const auto eager = to_device(Bf16(m, kPoison));
  const auto replay = to_device(Bf16(m, kPoison));
  runner::mma_gemm(dx.get(), dw.get(), 24, in, out, eager.get(), false, false, s);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  runner::mma_gemm(dx.get(), dw.get(), 24, in, out, replay.get(), false, false, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(to_host(eager, m), to_host(replay, m));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(ProjectionGemm, MmaRefusesWhatItDoesNotTake) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  EXPECT_FALSE(runner::mma_gemm_fits(0, 256));
  EXPECT_FALSE(runner::mma_gemm_fits(runner::kMmaMaxRows + 1, 256));
  EXPECT_FALSE(runner::mma_gemm_fits(9, 260));
  EXPECT_TRUE(runner::mma_gemm_fits(9, 264));
  const int in = 256;
  DeviceArray<std::uint16_t> x(static_cast<std::size_t>(64) * in + 8),
      w(static_cast<std::size_t>(16) * in), y(1024);
  const runner::ProjectionOutput o{w.get(), 16, y.get()};
  const std::vector<runner::ProjectionOutput> nine(runner::kProjectionMaxGroup + 1, o);
  EXPECT_THROW(runner::mma_gemm_group(x.get(), 9, in, {}, nullptr), std::invalid_argument);
  EXPECT_THROW(runner::mma_gemm_group(x.get(), 9, in, nine, nullptr), std::invalid_argument);
  EXPECT_THROW(runner::mma_gemm(x.get(), w.get(), 65, in, 16, y.get(), false, false, nullptr),
               std::invalid_argument);
  EXPECT_THROW(runner::mma_gemm(x.get() + 1, w.get(), 9, in, 16, y.get(), false, false, nullptr),
               std::invalid_argument);
  EXPECT_THROW(runner::mma_gemm_tiled(x.get(), 9, in, {&o, 1}, false, false, {3, 1}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(runner::mma_gemm_tiled(x.get(), 9, in, {&o, 1}, false, false, {1, 3}, nullptr),
               std::invalid_argument);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace kvtier::runner_test
