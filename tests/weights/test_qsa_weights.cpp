// The tensor list of a QSA stack, the check of a file against it, and the synthetic weights
// (deterministic, scaled, needle planted where asked).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda/weights/qsa_tensors.hpp"
#include "cuda/weights/synth.hpp"
#include "model/config_error.hpp"
#include "tests/weights/weights_test_util.hpp"

namespace kvtier::weights {
namespace {

using test::read_bytes;
using test::small_geometry;
using test::TempDir;

void zero_fill(const TensorSpec&, std::int64_t, std::span<std::byte> out) {
  std::fill(out.begin(), out.end(), std::byte{0});
}

std::vector<TensorSpec> specs_of(const Geometry& g, std::int64_t vocab) {
  std::vector<TensorSpec> s;
  for (const QsaTensor& t : qsa_tensors(g, vocab))
    s.push_back(t.spec);
  return s;
}

TEST(QsaTensors, ListHasEveryTensorWithItsShape) {
  const Geometry g;  // Flash-Next
  const auto t = qsa_tensors(g, 1000);
  ASSERT_EQ(t.size(), 3u + 10u * 12u);
  EXPECT_EQ(t.front().spec.name, "model.embed_tokens.weight");
  EXPECT_EQ(t.front().spec.shape, (Shape{1000, 2560}));
  EXPECT_EQ(t.back().spec.name, "lm_head.weight");
  const LayerNames n = layer_names(3);
  auto shape = [&](const std::string& name) {
    for (const auto& x : t)
      if (x.spec.name == name) return x.spec.shape;
    ADD_FAILURE() << name;
    return Shape{};
  };
  EXPECT_EQ(shape(n.q_proj), (Shape{24 * 256, 2560}));
  EXPECT_EQ(shape(n.k_proj), (Shape{2 * 256, 2560}));
  EXPECT_EQ(shape(n.v_proj), (Shape{2 * 256, 2560}));
  EXPECT_EQ(shape(n.index_q), (Shape{4 * 128, 2560}));
  EXPECT_EQ(shape(n.index_k), (Shape{128, 2560}));
  EXPECT_EQ(shape(n.index_q_norm), (Shape{128}));
  EXPECT_EQ(shape(n.gate_proj), (Shape{24 * 256, 2560}));
  EXPECT_EQ(shape(n.o_proj), (Shape{2560, 24 * 256}));
  EXPECT_EQ(shape(layer_names(47).input_norm), (Shape{2560}));
  for (const auto& x : t)
    EXPECT_EQ(x.spec.dtype, Dtype::bf16);
  EXPECT_THROW(qsa_tensors(g, 0), ConfigError);
}

TEST(QsaTensors, CheckNamesTheMissingMisshapedOrMistypedTensor) {
  const Geometry g = small_geometry();
  TempDir dir("qsa-check");
  const std::string path = dir.file("w.safetensors");
  const std::vector<TensorSpec> good = specs_of(g, 50);
  write_safetensors(path, good, {}, zero_fill);
  {
    SafetensorsFile f(path);
    EXPECT_NO_THROW(check_qsa_weights(f, g, 50));
  }
  auto message = [&](std::vector<TensorSpec> specs, std::int64_t vocab) -> std::string {
    write_safetensors(path, specs, {}, zero_fill);
    SafetensorsFile f(path);
    try {
      check_qsa_weights(f, g, vocab);
    } catch (const WeightsError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string k3 = layer_names(3).k_proj;
  {
    auto s = good;
    s.erase(s.begin() + 13);  // layer 3's k_proj
    const std::string e = message(s, 50);
    EXPECT_NE(e.find("'" + k3 + "' is missing"), std::string::npos) << e;
    EXPECT_NE(e.find(path), std::string::npos) << e;
  }
  {
    auto s = good;
    s[13].shape = {63, 64};
    const std::string e = message(s, 50);
    EXPECT_NE(e.find("'" + k3 + "' has shape [63, 64], expected [64, 64]"), std::string::npos) << e;
  }
  {
    auto s = good;
    s[13].dtype = Dtype::f32;
    const std::string e = message(s, 50);
    EXPECT_NE(e.find("'" + k3 + "' has dtype F32, expected BF16"), std::string::npos) << e;
  }
  {
    const std::string e = message(good, 51);  // a file for another vocabulary
    EXPECT_NE(e.find("'model.embed_tokens.weight' has shape [50, 64], expected [51, 64]"),
              std::string::npos)
        << e;
  }
  {
    auto s = good;
    s.push_back({"extra.tensor", Dtype::f32, {2}});  // extra tensors are fine
    EXPECT_EQ(message(s, 50), "no error");
  }
}

TEST(SyntheticWeights, SameSeedSameBytesOtherSeedOtherBytes) {
  const Geometry g = small_geometry();
  TempDir dir("synth-det");
  write_synthetic_weights(dir.file("a"), g, 97, {7, false});
  write_synthetic_weights(dir.file("b"), g, 97, {7, false});
  write_synthetic_weights(dir.file("c"), g, 97, {8, false});
  write_synthetic_weights(dir.file("n"), g, 97, {7, true});
  const auto a = read_bytes(dir.file("a"));
  EXPECT_EQ(a, read_bytes(dir.file("b")));
  EXPECT_NE(a, read_bytes(dir.file("c")));
  EXPECT_EQ(a.size(), read_bytes(dir.file("c")).size());
  EXPECT_NE(a, read_bytes(dir.file("n")));
  SafetensorsFile f(dir.file("a"));
  check_qsa_weights(f, g, 97);
  EXPECT_EQ(file_geometry(f), g);
  EXPECT_EQ(file_vocab(f), 97);
  EXPECT_EQ(f.metadata().at(kMetaSeed), "7");
  EXPECT_EQ(f.metadata().count(kMetaNeedle), 0u);
  SafetensorsFile fn(dir.file("n"));
  EXPECT_EQ(needle_plan_from_json(fn.metadata().at(kMetaNeedle)), needle_plan(g, 97));
}

// The progress callback (kvtier weights gen's bar) climbs to the data section's size.
TEST(SyntheticWeights, ProgressClimbsToTheDataSize) {
  const Geometry g = small_geometry();
  TempDir dir("synth-progress");
  std::int64_t last = 0, total = -1, calls = 0;
  write_synthetic_weights(dir.file("w"), g, 97, {3, false},
                          [&](std::int64_t done, std::int64_t all) {
                            EXPECT_GT(done, last);
                            EXPECT_TRUE(total < 0 || all == total);
                            last = done;
                            total = all;
                            ++calls;
                          });
  SafetensorsFile f(dir.file("w"));
  std::int64_t data = 0;
  for (const TensorInfo& t : f.tensors())
    data += t.end - t.begin;
  EXPECT_EQ(total, data);
  EXPECT_EQ(last, data);
  EXPECT_GE(calls, static_cast<std::int64_t>(f.tensors().size()));
}

// The file holds the generator's values rounded to BF16, chunking aside; each kind has the
// intended spread.
TEST(SyntheticWeights, ValuesMatchTheGeneratorAndAreScaled) {
  const Geometry g = small_geometry();
  TempDir dir("synth-scale");
  write_synthetic_weights(dir.file("w"), g, 200, {11, false});
  SafetensorsFile f(dir.file("w"));
  for (const QsaTensor& t : qsa_tensors(g, 200)) {
    const auto d = f.data(t.spec.name);
    const std::int64_t n = t.spec.elements();
    double sum2 = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto lo = static_cast<std::uint16_t>(d[static_cast<std::size_t>(2 * i)]);
      const auto hi = static_cast<std::uint16_t>(d[static_cast<std::size_t>(2 * i + 1)]);
      const float v = bf16_to_float(static_cast<std::uint16_t>(lo | (hi << 8)));
      ASSERT_EQ(v, bf16_to_float(float_to_bf16(synth_value(t, i, 11, nullptr))))
          << t.spec.name << " " << i;
      sum2 += double{v} * v;
    }
    const double sd = std::sqrt(sum2 / static_cast<double>(n));
    const double want = t.kind == TensorKind::embedding ? 1.0
                        : t.kind == TensorKind::norm    ? 0.05
                                                        : 1.0 / std::sqrt(double(t.spec.shape[1]));
    EXPECT_NEAR(sd, want, want * (n >= 1000 ? 0.1 : 0.35)) << t.spec.name;
  }
}

TEST(SyntheticWeights, NeedleEntriesArePlanted) {
  const Geometry g = small_geometry();
  const NeedlePlan p = needle_plan(g, 100);
  EXPECT_EQ(p.needle_dim, 63);
  EXPECT_EQ(p.query_dim, 62);
  EXPECT_EQ(p.key_coord, 8);
  EXPECT_NEAR(p.attn_beta * p.attn_beta * 64 / std::sqrt(32.0), p.target_logit, 1e-9);
  const auto t = qsa_tensors(g, 100);
  auto find = [&](const std::string& name) -> const QsaTensor& {
    for (const auto& x : t)
      if (x.spec.name == name) return x;
    throw std::runtime_error(name);
  };
  const LayerNames n = layer_names(5);
  auto at = [&](const std::string& name, std::int64_t r, std::int64_t c) {
    return synth_value(find(name), r * find(name).spec.shape[1] + c, 3, &p);
  };
  const auto beta = static_cast<float>(p.attn_beta);
  EXPECT_EQ(at(n.k_proj, 8, 63), beta);       // KV head 0, key coord, column N
  EXPECT_EQ(at(n.k_proj, 32 + 8, 63), beta);  // KV head 1
  EXPECT_EQ(at(n.k_proj, 9, 63), 0.0f);
  EXPECT_EQ(at(n.k_proj, 8, 62), 0.0f);  // keys never read Q
  EXPECT_EQ(at(n.q_proj, 3 * 32 + 8, 62), beta);
  EXPECT_EQ(at(n.q_proj, 8, 63), 0.0f);
  EXPECT_EQ(at(n.index_q, 16 + 8, 62), static_cast<float>(p.index_alpha));
  EXPECT_EQ(at(n.index_k, 8, 63), static_cast<float>(p.index_alpha));
  EXPECT_EQ(at(n.o_proj, 63, 5), 0.0f);
  EXPECT_EQ(at(n.o_proj, 62, 5), 0.0f);
  EXPECT_NE(at(n.o_proj, 61, 5), 0.0f);
  EXPECT_EQ(at(kEmbedName, 99, 63), static_cast<float>(p.embed_scale));
  EXPECT_EQ(at(kEmbedName, 99, 0), 0.0f);
  EXPECT_EQ(at(kEmbedName, 98, 62), static_cast<float>(p.embed_scale));
  EXPECT_EQ(at(kEmbedName, 17, 62), 0.0f);
  EXPECT_EQ(at(kEmbedName, 17, 63), 0.0f);
  EXPECT_NE(at(kEmbedName, 17, 5), 0.0f);
  Geometry bad = g;
  bad.rope_dims = 16;
  bad.index_head_dim = 16;
  EXPECT_THROW(needle_plan(bad, 100), ConfigError);
}

}  // namespace
}  // namespace kvtier::weights
