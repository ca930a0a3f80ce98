#pragma once
// The needle construction (docs/needle.md): synthetic weights and a prompt in which one
// planted position's index key and attention key match the last query far above every other
// position, in every QSA layer, so that the last row's attention output points to the planted
// position's value.
//
// In short: two hidden dimensions are reserved (N for the needle, Q for the query). Only the
// needle token's embedding has a component on N, only the query token's on Q, both large; no
// output projection writes N or Q, so they stay clean through the residual stream. In every
// QSA layer, column N of k_proj / indexer wk and column Q of q_proj / indexer wq carry one
// non-rotated coordinate (the first dimension past rope_dims, so RoPE leaves it alone and the
// match does not depend on the distance), scaled so that the needle's attention logit is
// about `target_logit` (natural units) and its compressed index key is dominated by the
// needle's raw key. Everything else stays random.
#include <cstdint>
#include <string>
#include <vector>

#include "model/geometry.hpp"

namespace kvtier::weights {

struct NeedlePlan {
  int needle_dim = 0;             // hidden dim N = hidden - 1
  int query_dim = 0;              // hidden dim Q = hidden - 2
  std::int64_t needle_token = 0;  // vocab - 1
  std::int64_t query_token = 0;   // vocab - 2
  int key_coord = 0;              // coordinate within an attention head that carries the match
  int index_coord = 0;            // coordinate within an index head that carries the match
  double target_logit = 30.0;     // needle's q.k / sqrt(head_dim), natural log units
  double embed_scale = 0.0;       // E: the needle / query embedding's component on N / Q
  double attn_beta = 0.0;         // the planted entries of q_proj / k_proj
  double index_alpha = 0.0;       // the planted entries of indexer wq / wk
  int head_dim = 0;               // copied from the geometry: rows of q/k_proj per head
  int index_head_dim = 0;         // rows of indexer wq/wk per head

  bool operator==(const NeedlePlan&) const = default;
};

// The plan for a geometry and vocabulary. Throws ConfigError when the geometry cannot carry
// a needle: rope_dims must be below head_dim and index_head_dim (a non-rotated coordinate is
// needed), index_kv_heads must be 1, hidden_size >= 3 and vocab >= 3.
NeedlePlan needle_plan(const Geometry& g, std::int64_t vocab);

std::string needle_plan_to_json(const NeedlePlan& p);
// Throws ConfigError on malformed JSON or a missing field.
NeedlePlan needle_plan_from_json(const std::string& text);

}  // namespace kvtier::weights

namespace kvtier::weights {

// The needle prompt: `length` filler tokens (uniform over the vocabulary without the two
// reserved tokens, from `seed`), the needle token at `needle_pos`, the query token last.
// Throws ConfigError unless 0 <= needle_pos < length - 1.
std::vector<std::int32_t> needle_prompt(const NeedlePlan& plan, std::int64_t vocab,
                                        std::int64_t length, std::int64_t needle_pos,
                                        std::uint64_t seed);

// Cosine between an attention output [q_heads][head_dim] and the needle's value
// [kv_heads][head_dim] repeated for the query heads of each KV head (consecutive groups).
double needle_cosine(const std::vector<float>& attention, const std::vector<float>& value,
                     int q_heads, int kv_heads, int head_dim);

}  // namespace kvtier::weights
