// CPU tests of the QSA reference (validation/qsa): each step on hand-checkable inputs, and the
// layer property "context <= budget + 3 => QSA == dense causal attention".
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "validation/qsa/qsa_reference.hpp"

namespace kvtier::qsa_ref {
namespace {

Dims small_dims() {
  Dims d;
  d.q_heads = 6;
  d.kv_heads = 2;
  d.head_dim = 16;
  d.rope_dims = 8;
  d.index_heads = 4;
  d.index_dim = 8;
  d.block_topk = 5;  // budget 20 tokens
  return d;
}

TEST(QsaReferenceFormats, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f + 0x1p-12f), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(QsaReferenceFormats, Fp8RoundTripsEveryCodeAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const float x = fp8_e4m3_decode(code);
    if (std::isnan(x)) continue;
    if (x == 0.0f) continue;  // +0 and -0 both encode by sign
    EXPECT_EQ(fp8_e4m3_encode(x), code) << c;
  }
  EXPECT_EQ(fp8_e4m3_decode(fp8_e4m3_encode(1000.0f)), 448.0f);
  EXPECT_EQ(fp8_e4m3_decode(fp8_e4m3_encode(-1000.0f)), -448.0f);
  EXPECT_EQ(fp8_e4m3_decode(fp8_e4m3_encode(1.0625f)), 1.0f);  // tie 1 | 1.125 -> even
  float x[4] = {0.5f, -2.0f, 1.0f, 0.0f};
  std::uint8_t codes[4];
  const float scale = fp8_quantize(x, 4, codes);
  EXPECT_FLOAT_EQ(scale, 2.0f / 448.0f);
  EXPECT_EQ(fp8_e4m3_decode(codes[1]) * scale, -2.0f);
  float zeros[2] = {0.0f, 0.0f};
  EXPECT_EQ(fp8_quantize(zeros, 2, codes), kFp8ScaleFloor);
}

TEST(QsaReferenceRope, RotatesNeoXHalvesOfThePartialDims) {
  Dims d = small_dims();
  std::vector<double> x(16, 0.0);
  x[0] = 1.0;   // pairs with x[4]
  x[10] = 3.0;  // beyond rope_dims: untouched
  apply_rope(x.data(), 5, d);
  const double f0 = 1.0;  // theta^0
  EXPECT_NEAR(x[0], std::cos(5 * f0), 1e-12);
  EXPECT_NEAR(x[4], std::sin(5 * f0), 1e-12);
  EXPECT_EQ(x[10], 3.0);
  // Position 0 is the identity; rotation keeps the norm.
  std::vector<double> y = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::vector<double> y0 = y;
  apply_rope(y.data(), 0, d);
  EXPECT_EQ(y, y0);
  apply_rope(y.data(), 123456, d);
  double n0 = 0, n1 = 0;
  for (int i = 0; i < 8; ++i) {
    n0 += y0[i] * y0[i];
    n1 += y[i] * y[i];
  }
  EXPECT_NEAR(n0, n1, 1e-9);
}

TEST(QsaReferenceRope, YarnKeepsHighFrequenciesAndStretchesLowOnes) {
  Dims d;  // reference geometry: 64 rope dims, theta 1e7, factor 4
  const std::vector<double> plain = rope_inv_freq(d);
  d.yarn = true;
  const std::vector<double> yarn = rope_inv_freq(d);
  ASSERT_EQ(plain.size(), 32u);
  EXPECT_DOUBLE_EQ(yarn[0], plain[0]);            // fastest: extrapolated
  EXPECT_NEAR(yarn[31], plain[31] / 4.0, 1e-20);  // slowest: interpolated by the factor
  for (std::size_t i = 0; i < yarn.size(); ++i) {
    EXPECT_LE(yarn[i], plain[i]);
    EXPECT_GE(yarn[i], plain[i] / 4.0 * (1 - 1e-12));
  }
  EXPECT_NEAR(rope_attention_factor(d), 0.1 * std::log(4.0) + 1.0, 1e-15);
}

TEST(QsaReferenceNorm, IsZeroCentred) {
  Vec x(4);
  x << 1, -1, 1, -1;
  Vec w = Vec::Zero(4);
  Vec y = rms_norm(x, w, 0.0);
  EXPECT_NEAR((y - x).norm(), 0.0, 1e-12);  // weight 0 means scale 1
  w << 1, 1, 1, 1;
  EXPECT_NEAR((rms_norm(x, w, 0.0) - 2 * x).norm(), 0.0, 1e-12);
}

TEST(QsaReferenceIndex, ScoresSumReluOverHeads) {
  Dims d = small_dims();
  Mat iq = Mat::Zero(4, 8);
  Mat slab = Mat::Zero(2, 8);
  iq(0, 0) = 2;
  iq(1, 0) = -3;  // negative dot: relu drops it
  iq(2, 1) = 1;
  slab(0, 0) = 1;
  slab(0, 1) = 4;
  slab(1, 0) = 1;
  Vec s = index_scores(iq, slab, 2, d);
  EXPECT_NEAR(s[0], (2.0 + 4.0) / std::sqrt(8.0), 1e-12);
  EXPECT_NEAR(s[1], 2.0 / std::sqrt(8.0), 1e-12);
}

TEST(QsaReferenceTopk, ExactSetAscendingTiesToLowerIds) {
  std::vector<float> s = {1, 5, 3, 5, 5, 0, 2};
  EXPECT_EQ(topk_blocks(s, 7, 3), (std::vector<std::int32_t>{1, 3, 4}));
  EXPECT_EQ(topk_blocks(s, 7, 2), (std::vector<std::int32_t>{1, 3}));
  EXPECT_EQ(topk_blocks(s, 3, 5), (std::vector<std::int32_t>{0, 1, 2, -1, -1}));
  const float ninf = -std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> t = {ninf, nan, 1, ninf};
  EXPECT_EQ(topk_blocks(t, 4, 2), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(topk_blocks(t, 0, 2), (std::vector<std::int32_t>{-1, -1}));
}

TEST(QsaReferenceExpand, BlocksThenCausalTail) {
  // pos 10: groups 0..1 closed (positions 0..7), open group 2 holds 8, 9, 10.
  EXPECT_EQ(expand_tokens({0, 2, -1}, 10, 4, 12),
            (std::vector<std::int32_t>{0, 1, 2, 3, 8, 9, 10, 11, 8, 9, 10, -1}));
  EXPECT_EQ(expand_tokens({1}, 7, 4, 8), (std::vector<std::int32_t>{4, 5, 6, 7, -1, -1, -1, -1}));
}

TEST(QsaReferenceAttend, UniformKeysAverageValues) {
  Dims d = small_dims();
  Mat q = Mat::Random(d.q_heads, d.head_dim);
  Mat k = Mat::Zero(3, d.kv_heads * d.head_dim);
  Mat v = Mat::Random(3, d.kv_heads * d.head_dim);
  AttnOut a = attend(q, k, v, {0, 2, -1}, d);
  for (int h = 0; h < d.q_heads; ++h) {
    const int g = h / d.group();
    for (int i = 0; i < d.head_dim; ++i)
      EXPECT_NEAR(a.o(h, i), 0.5 * (v(0, g * d.head_dim + i) + v(2, g * d.head_dim + i)), 1e-12);
    EXPECT_NEAR(a.lse[h], 1.0, 1e-12);  // log2(2 * 2^0)
  }
  AttnOut none = attend(q, k, v, {-1}, d);
  EXPECT_EQ(none.lse[0], -std::numeric_limits<double>::infinity());
}

TEST(QsaReferenceFold, DisjointPassesEqualOnePass) {
  Dims d = small_dims();
  LayerInput in = random_input(40, d, 7);
  Mat q = Eigen::Map<const Mat>(in.q.row(39).data(), d.q_heads, d.head_dim);
  std::vector<std::int32_t> all, a, b, c;
  for (int t = 0; t < 40; ++t) {
    all.push_back(t);
    (t < 13 ? a : t < 29 ? b : c).push_back(t);
  }
  AttnOut one = attend(q, in.k, in.v, all, d);
  AttnOut folded = fold(fold(attend(q, in.k, in.v, a, d), attend(q, in.k, in.v, b, d)),
                        attend(q, in.k, in.v, c, d));
  EXPECT_LT((one.o - folded.o).norm() / one.o.norm(), 1e-13);
  EXPECT_LT((one.lse - folded.lse).norm(), 1e-12);
  // Folding with an empty pass changes nothing.
  AttnOut e = fold(one, attend(q, in.k, in.v, {-1}, d));
  EXPECT_EQ((e.o - one.o).norm(), 0.0);
}

// With at most budget + 3 tokens of context (k blocks of 4 and the open group of up to 3) every
// block is selected and QSA is dense causal attention; beyond that it is not.
TEST(QsaReferenceLayer, ContextWithinBudgetPlus3IsDenseCausal) {
  for (Storage s : {Storage::none, Storage::bf16, Storage::fp8}) {
    Dims d = small_dims();
    const std::int64_t n = d.block_topk * d.ratio + d.ratio - 1;  // 23
    LayerInput in = random_input(n + 9, d, 11);
    LayerOutput out = qsa_layer(in, d, s);
    for (std::int64_t t = 0; t < n + 9; ++t) {
      Mat q = Eigen::Map<const Mat>(out.q_rot.row(t).data(), d.q_heads, d.head_dim);
      AttnOut dense = dense_causal(q, out.k_stored, out.v_stored, t, d);
      const double err = (out.o[t] - dense.o).norm() / dense.o.norm();
      if (t < n) {
        EXPECT_LT(err, 1e-13) << "row " << t;
        EXPECT_LT((out.lse[t] - dense.lse).cwiseAbs().maxCoeff(), 1e-12);
      } else {
        EXPECT_GT(err, 1e-6) << "row " << t << " should be sparse";
      }
    }
  }
}

TEST(QsaReferenceLayer, SelectionsHaveBudgetSizeAndAreCausal) {
  Dims d = small_dims();
  LayerInput in = random_input(64, d, 3);
  LayerOutput out = qsa_layer(in, d, Storage::bf16);
  for (std::int64_t t = 0; t < 64; ++t) {
    const std::int64_t visible = (t + 1) / d.ratio;
    int count = 0;
    for (std::int32_t b : out.blocks[t]) {
      if (b < 0) continue;
      ++count;
      EXPECT_LT(b, visible);
    }
    EXPECT_EQ(count, std::min<std::int64_t>(visible, d.block_topk));
    EXPECT_FALSE(out.o[t].hasNaN());
  }
}

}  // namespace
}  // namespace kvtier::qsa_ref
