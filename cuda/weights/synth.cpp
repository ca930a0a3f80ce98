#include "cuda/weights/synth.hpp"

#include <cmath>
#include <cstring>
#include <optional>

namespace kvtier::weights {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint64_t tensor_key(const QsaTensor& t, std::uint64_t seed) {
  return splitmix64(seed ^ splitmix64(fnv1a(t.spec.name)));
}

// Uniform in [-1, 1) from 24 random bits (exact in float).
float unit_uniform(std::uint64_t key, std::int64_t index) {
  const std::uint64_t r =
      splitmix64(key + static_cast<std::uint64_t>(index) * 0xd1b54a32d192ed03ull);
  return static_cast<float>(static_cast<std::int64_t>(r >> 40) - (std::int64_t{1} << 23)) /
         static_cast<float>(std::int64_t{1} << 23);
}

// Standard deviation of the random entries of a tensor.
double random_sd(const QsaTensor& t) {
  switch (t.kind) {
    case TensorKind::embedding:
      return 1.0;
    case TensorKind::norm:
      return 0.05;
    case TensorKind::projection:
    case TensorKind::output_projection:
    case TensorKind::lm_head:
      return 1.0 / std::sqrt(static_cast<double>(t.spec.shape.at(1)));
  }
  return 1.0;
}

// A column of a projection that carries the needle: `value` on coordinate `coord` of every
// head of `head_dim` rows, 0 on the other rows.
double head_column(std::int64_t row, int head_dim, int coord, double value) {
  return row % head_dim == coord ? value : 0.0;
}

// The planted value of element (row, col) of `t` (docs/needle.md), or nothing where the random
// value stays.
std::optional<double> planted(const QsaTensor& t, std::int64_t row, std::int64_t col,
                              const NeedlePlan& p) {
  const bool on_n = col == p.needle_dim, on_q = col == p.query_dim;
  switch (t.role) {
    case Role::embed:
      if (row == p.needle_token) return on_n ? p.embed_scale : 0.0;
      if (row == p.query_token) return on_q ? p.embed_scale : 0.0;
      if (on_n || on_q) return 0.0;
      return std::nullopt;
    case Role::o:  // nothing writes the reserved dims of the residual stream
      if (row == p.needle_dim || row == p.query_dim) return 0.0;
      return std::nullopt;
    case Role::q:  // queries read Q only
      if (on_n) return 0.0;
      if (on_q) return head_column(row, p.head_dim, p.key_coord, p.attn_beta);
      return std::nullopt;
    case Role::k:  // keys read N only
      if (on_q) return 0.0;
      if (on_n) return head_column(row, p.head_dim, p.key_coord, p.attn_beta);
      return std::nullopt;
    case Role::index_q:
      if (on_n) return 0.0;
      if (on_q) return head_column(row, p.index_head_dim, p.index_coord, p.index_alpha);
      return std::nullopt;
    case Role::index_k:
      if (on_q) return 0.0;
      if (on_n) return head_column(row, p.index_head_dim, p.index_coord, p.index_alpha);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace

namespace {

// The per-tensor constants of the generator, computed once per chunk.
struct TensorStream {
  std::uint64_t key;
  float scale;
};
TensorStream stream_of(const QsaTensor& t, std::uint64_t seed) {
  // Uniform [-a, a) has standard deviation a / sqrt(3).
  return {tensor_key(t, seed), static_cast<float>(random_sd(t) * std::sqrt(3.0))};
}

float value_at(const QsaTensor& t, const TensorStream& s, std::int64_t index,
               const NeedlePlan* needle) {
  if (needle && t.spec.shape.size() == 2) {
    const std::int64_t cols = t.spec.shape[1];
    if (auto v = planted(t, index / cols, index % cols, *needle)) return static_cast<float>(*v);
  }
  return s.scale * unit_uniform(s.key, index);
}

}  // namespace

float synth_value(const QsaTensor& t, std::int64_t index, std::uint64_t seed,
                  const NeedlePlan* needle) {
  return value_at(t, stream_of(t, seed), index, needle);
}

void synth_fill(const QsaTensor& t, std::uint64_t seed, const NeedlePlan* needle,
                std::int64_t offset, std::span<std::byte> out) {
  const TensorStream s = stream_of(t, seed);
  const std::int64_t first = offset / 2;
  const std::int64_t n = static_cast<std::int64_t>(out.size()) / 2;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t b = float_to_bf16(value_at(t, s, first + i, needle));
    out[static_cast<std::size_t>(2 * i)] = static_cast<std::byte>(b & 0xff);
    out[static_cast<std::size_t>(2 * i + 1)] = static_cast<std::byte>(b >> 8);
  }
}

void write_synthetic_weights(const std::string& path, const Geometry& g, std::int64_t vocab,
                             const SynthOptions& opt, const WriteProgress& progress) {
  const std::vector<QsaTensor> tensors = qsa_tensors(g, vocab);
  std::optional<NeedlePlan> plan;
  if (opt.needle) plan = needle_plan(g, vocab);
  std::vector<TensorSpec> specs;
  std::int64_t total = 0, done = 0;
  for (const QsaTensor& t : tensors) {
    specs.push_back(t.spec);
    total += t.spec.bytes();
  }
  Metadata meta{{"format", "pt"},
                {kMetaGeometry, geometry_to_json(g)},
                {kMetaVocab, std::to_string(vocab)},
                {kMetaSeed, std::to_string(opt.seed)}};
  if (plan) meta[kMetaNeedle] = needle_plan_to_json(*plan);
  std::size_t at = 0;  // specs are filled in order, each tensor's chunks ascending
  write_safetensors(path, specs, meta,
                    [&](const TensorSpec& s, std::int64_t offset, std::span<std::byte> out) {
                      while (tensors[at].spec.name != s.name)
                        ++at;
                      synth_fill(tensors[at], opt.seed, plan ? &*plan : nullptr, offset, out);
                      done += static_cast<std::int64_t>(out.size());
                      if (progress) progress(done, total);
                    });
}

}  // namespace kvtier::weights
