// The needle construction (docs/needle.md) checked with the CPU reference of the QSA stack:
// in every QSA layer the planted block ranks first in the last row's index scores, far above
// the rest, the planted position's attention logit is far above every other selected token's,
// and the last row's attention output points to the planted value (cosine > 0.9). Without the
// planted weights the same prompt gives no such thing (the check can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cuda/weights/needle.hpp"
#include "cuda/weights/synth.hpp"
#include "tests/runner/cpu_stack.hpp"
#include "tests/weights/weights_test_util.hpp"

namespace kvtier::runner_test {
namespace {

using weights::test::TempDir;

// hidden 128, 4 query heads / 2 KV heads of 64 (16 rope dims), indexer 4 heads of 32, ratio 4,
// budget 64 tokens (16 blocks); three QSA layers.
Geometry needle_geometry() {
  Geometry g;
  g.total_layers = 6;
  g.qsa_layer_ids = {1, 3, 5};
  g.hidden_size = 128;
  g.q_heads = 4;
  g.kv_heads = 2;
  g.head_dim = 64;
  g.rope_dims = 16;
  g.rope_theta = 10000.0;
  g.index_q_heads = 4;
  g.index_kv_heads = 1;
  g.index_head_dim = 32;
  g.compress_ratio = 4;
  g.select_budget = 64;
  g.page_size = 16;
  g.rope_max_positions = 512;  // so that a context of 1024 needs YaRN when it is on
  g.validate();
  return g;
}

constexpr std::int64_t kVocab = 200;

// Filler tokens (never the needle or query token), the needle token at `pos`, the query
// token last.
std::vector<std::int64_t> needle_prompt(std::int64_t n, std::int64_t pos,
                                        const weights::NeedlePlan& p, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) {
    do {
      x = static_cast<std::int64_t>(rng() % kVocab);
    } while (x == p.needle_token || x == p.query_token);
  }
  t[static_cast<std::size_t>(pos)] = p.needle_token;
  t.back() = p.query_token;
  return t;
}

struct LayerFigures {
  double cosine = 0.0;          // last row's attention output vs the planted value
  bool in_tail = false;         // the planted position is in the last row's causal tail
  bool block_selected = false;  // the planted block is in the last row's top-k
  int block_rank = -1;          // 0 = highest index score
  double score_ratio = 0.0;     // planted block's score / the best other block's
  double logit_margin = 0.0;    // planted logit - best other selected logit (natural units)
};

// Runs the stack on the prompt and measures the last row of every QSA layer.
std::vector<LayerFigures> run_needle(const std::string& path, const Geometry& g,
                                     const std::vector<std::int64_t>& tokens, std::int64_t pos,
                                     bool yarn, qsa_ref::Storage storage) {
  weights::SafetensorsFile f(path);
  const qsa_ref::Dims d = dims_of(g, yarn);
  Mat x = embed(f, tokens);
  const std::int64_t n = x.rows(), last = n - 1, block = pos / g.compress_ratio;
  std::vector<LayerFigures> out;
  for (int id : g.qsa_layer_ids) {
    const CpuLayerResult r = cpu_layer(load_layer(f, id), x, d, storage);
    LayerFigures m;
    // The planted value as stored, repeated for the query heads of each KV head.
    Eigen::RowVectorXd target(std::int64_t{g.q_heads} * g.head_dim);
    for (int h = 0; h < g.q_heads; ++h)
      target.segment(std::int64_t{h} * g.head_dim, g.head_dim) =
          r.qsa.v_stored.row(pos).segment(std::int64_t{h / g.gqa_group()} * g.head_dim, g.head_dim);
    m.cosine = cosine(r.attn.row(last), target);
    const auto& blocks = r.qsa.blocks[static_cast<std::size_t>(last)];
    m.block_selected = std::find(blocks.begin(), blocks.end(), block) != blocks.end();
    const auto& sc = r.qsa.scores[static_cast<std::size_t>(last)];
    m.in_tail = block >= static_cast<std::int64_t>(sc.size());  // not yet a closed block
    if (!m.in_tail) {
      float best_other = 0.0f;
      m.block_rank = 0;
      for (std::size_t b = 0; b < sc.size(); ++b) {
        if (static_cast<std::int64_t>(b) == block) continue;
        best_other = std::max(best_other, sc[b]);
        if (sc[b] >= sc[static_cast<std::size_t>(block)]) ++m.block_rank;
      }
      m.score_ratio = sc[static_cast<std::size_t>(block)] / std::max(best_other, 1e-9f);
    }
    // Attention logits of query head 0 over the tokens it attended.
    const auto tokens_sel =
        qsa_ref::expand_tokens(blocks, last, g.compress_ratio, g.select_width_tokens());
    const double scale = 1.0 / std::sqrt(static_cast<double>(g.head_dim));
    auto logit = [&](std::int64_t t) {
      return r.qsa.q_rot.row(last)
                 .segment(0, g.head_dim)
                 .dot(r.qsa.k_stored.row(t).segment(0, g.head_dim)) *
             scale;
    };
    double best = -1e300;
    for (std::int32_t t : tokens_sel)
      if (t >= 0 && t != pos) best = std::max(best, logit(t));
    m.logit_margin = logit(pos) - best;
    out.push_back(m);
    x = r.y;
  }
  return out;
}

struct NeedleCase {
  std::int64_t context;
  std::int64_t pos;
  bool yarn;
  qsa_ref::Storage storage = qsa_ref::Storage::bf16;  // how K/V pages are stored
};

class NeedleCpu : public ::testing::TestWithParam<NeedleCase> {};

TEST_P(NeedleCpu, EveryLayerPointsToThePlantedValue) {
  const NeedleCase c = GetParam();
  const Geometry g = needle_geometry();
  TempDir dir("needle-cpu");
  const std::string planted = dir.file("needle.safetensors");
  weights::write_synthetic_weights(planted, g, kVocab, {42, true});
  const weights::NeedlePlan plan = weights::needle_plan(g, kVocab);
  const auto tokens = needle_prompt(c.context, c.pos, plan, 7);
  const auto figures = run_needle(planted, g, tokens, c.pos, c.yarn, c.storage);
  for (std::size_t l = 0; l < figures.size(); ++l) {
    const LayerFigures& m = figures[l];
    SCOPED_TRACE("layer " + std::to_string(g.qsa_layer_ids[l]));
    std::printf("layer %d: cosine %.5f, block rank %d, score ratio %.2f, logit margin %.1f\n",
                g.qsa_layer_ids[l], m.cosine, m.block_rank, m.score_ratio, m.logit_margin);
    if (c.pos / g.compress_ratio < c.context / g.compress_ratio) {
      EXPECT_FALSE(m.in_tail);
      EXPECT_TRUE(m.block_selected);
      EXPECT_EQ(m.block_rank, 0);
      EXPECT_GT(m.score_ratio, 1.5);
    } else {
      EXPECT_TRUE(m.in_tail);  // attended as the open group's causal tail
    }
    EXPECT_GT(m.logit_margin, 15.0);
    EXPECT_GT(m.cosine, 0.9);
  }
  // Control: the same prompt over weights without the needle finds nothing of the kind.
  const std::string plain = dir.file("plain.safetensors");
  weights::write_synthetic_weights(plain, g, kVocab, {42, false});
  for (const LayerFigures& m : run_needle(plain, g, tokens, c.pos, c.yarn, c.storage)) {
    std::printf("control: cosine %.5f, block rank %d, logit margin %.1f\n", m.cosine, m.block_rank,
                m.logit_margin);
    EXPECT_LT(m.cosine, 0.5);
    EXPECT_LT(m.logit_margin, 5.0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Contexts, NeedleCpu,
    ::testing::Values(NeedleCase{1024, 301, false},   // 256 blocks, top 16
                      NeedleCase{1024, 0, false},     // the very first token
                      NeedleCase{1024, 1018, false},  // the last closed block
                      NeedleCase{1024, 1021, false},  // the query's own block
                      NeedleCase{1023, 1021, false},  // in the causal tail
                      NeedleCase{1024, 555, true},
                      NeedleCase{1024, 777, false, qsa_ref::Storage::fp8}));  // YaRN, past rope max

}  // namespace
}  // namespace kvtier::runner_test
