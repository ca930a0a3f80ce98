#include "cuda/weights/needle.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <random>

#include "model/config_error.hpp"

namespace kvtier::weights {

namespace json = boost::json;

NeedlePlan needle_plan(const Geometry& g, std::int64_t vocab) {
  g.validate();
  if (g.rope_dims >= g.head_dim)
    throw ConfigError(
        "needle: rope_dims must be below head_dim (a non-rotated coordinate is needed)");
  if (g.rope_dims >= g.index_head_dim)
    throw ConfigError(
        "needle: rope_dims must be below index_head_dim (a non-rotated coordinate is needed)");
  if (g.index_kv_heads != 1) throw ConfigError("needle: index_kv_heads must be 1");
  if (g.hidden_size < 3) throw ConfigError("needle: hidden_size must be at least 3");
  if (vocab < 3) throw ConfigError("needle: vocab must be at least 3");
  NeedlePlan p;
  const double h = g.hidden_size;
  p.needle_dim = g.hidden_size - 1;
  p.query_dim = g.hidden_size - 2;
  p.needle_token = vocab - 1;
  p.query_token = vocab - 2;
  p.head_dim = g.head_dim;
  p.index_head_dim = g.index_head_dim;
  p.key_coord = g.rope_dims;
  p.index_coord = g.rope_dims;
  // After the input RMSNorm the needle's hidden vector is ~ sqrt(H) e_N (and the query's
  // sqrt(H) e_Q), so q[key_coord] = k[key_coord] = beta sqrt(H) and the logit is
  // beta^2 H / sqrt(head_dim) = target.
  p.attn_beta = std::sqrt(p.target_logit * std::sqrt(static_cast<double>(g.head_dim)) / h);
  // The needle's raw index key alpha sqrt(H) = 8 sqrt(index_dim) is 8x the norm of a random
  // token's raw key, so the block mean stays within a few degrees of the planted direction.
  p.index_alpha = 8.0 * std::sqrt(static_cast<double>(g.index_head_dim) / h);
  // 16x a random embedding's norm: the attention outputs added by earlier layers cannot pull
  // the normed needle / query vector far from e_N / e_Q.
  p.embed_scale = 16.0 * std::sqrt(h);
  return p;
}

std::string needle_plan_to_json(const NeedlePlan& p) {
  json::object o{{"needle_dim", p.needle_dim},     {"query_dim", p.query_dim},
                 {"needle_token", p.needle_token}, {"query_token", p.query_token},
                 {"key_coord", p.key_coord},       {"index_coord", p.index_coord},
                 {"target_logit", p.target_logit}, {"embed_scale", p.embed_scale},
                 {"attn_beta", p.attn_beta},       {"index_alpha", p.index_alpha},
                 {"head_dim", p.head_dim},         {"index_head_dim", p.index_head_dim}};
  return json::serialize(o);
}

NeedlePlan needle_plan_from_json(const std::string& text) {
  json::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) throw ConfigError("needle plan: not a JSON object");
  const json::object& o = v.get_object();
  auto num = [&](const char* k) -> double {
    const json::value* x = o.if_contains(k);
    if (!x || !x->is_number()) throw ConfigError(std::string("needle plan: no number '") + k + "'");
    return x->to_number<double>();
  };
  NeedlePlan p;
  p.needle_dim = static_cast<int>(num("needle_dim"));
  p.query_dim = static_cast<int>(num("query_dim"));
  p.needle_token = static_cast<std::int64_t>(num("needle_token"));
  p.query_token = static_cast<std::int64_t>(num("query_token"));
  p.key_coord = static_cast<int>(num("key_coord"));
  p.index_coord = static_cast<int>(num("index_coord"));
  p.target_logit = num("target_logit");
  p.embed_scale = num("embed_scale");
  p.attn_beta = num("attn_beta");
  p.index_alpha = num("index_alpha");
  p.head_dim = static_cast<int>(num("head_dim"));
  p.index_head_dim = static_cast<int>(num("index_head_dim"));
  return p;
}

}  // namespace kvtier::weights

namespace kvtier::weights {

std::vector<std::int32_t> needle_prompt(const NeedlePlan& plan, std::int64_t vocab,
                                        std::int64_t length, std::int64_t needle_pos,
                                        std::uint64_t seed) {
  if (length < 2 || needle_pos < 0 || needle_pos >= length - 1)
    throw ConfigError("needle: the position must be 0.." + std::to_string(length - 2) +
                      " (before the query token that ends the prompt), got " +
                      std::to_string(needle_pos));
  if (vocab > INT32_MAX) throw ConfigError("needle: the vocabulary must fit 32 bits");
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(length));
  for (auto& x : t) {
    std::int64_t v;
    do {
      v = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(vocab));
    } while (v == plan.needle_token || v == plan.query_token);
    x = static_cast<std::int32_t>(v);
  }
  t[static_cast<std::size_t>(needle_pos)] = static_cast<std::int32_t>(plan.needle_token);
  t.back() = static_cast<std::int32_t>(plan.query_token);
  return t;
}

double needle_cosine(const std::vector<float>& attention, const std::vector<float>& value,
                     int q_heads, int kv_heads, int head_dim) {
  const auto n = static_cast<std::size_t>(q_heads) * head_dim;
  if (attention.size() != n || value.size() != static_cast<std::size_t>(kv_heads) * head_dim ||
      kv_heads < 1 || q_heads % kv_heads != 0)
    throw ConfigError("needle: attention / value shapes do not match the heads");
  const int group = q_heads / kv_heads;
  double dot = 0, aa = 0, vv = 0;
  for (int h = 0; h < q_heads; ++h) {
    for (int d = 0; d < head_dim; ++d) {
      const double a = attention[static_cast<std::size_t>(h) * head_dim + d];
      const double v = value[static_cast<std::size_t>(h / group) * head_dim + d];
      dot += a * v;
      aa += a * a;
      vv += v * v;
    }
  }
  return aa > 0 && vv > 0 ? dot / std::sqrt(aa * vv) : 0.0;
}

}  // namespace kvtier::weights
