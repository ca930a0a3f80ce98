#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/kv_dtype.hpp"

namespace kvtier {

// The largest context any geometry may declare (rope_max_positions x yarn_factor): 2^32
// tokens, four thousand times the 1M the reference model reaches with YaRN, and small enough that
// sums over a row's tokens (count x position) and page and block counts fit in an int64.
inline constexpr std::int64_t kMaxContextTokens = std::int64_t{1} << 32;

// The shape of a QSA model as far as the KV tier cares. Defaults are the "Flash-Next"
// reference geometry (docs/architecture.md, "The QSA model"); every field can be overridden from
// JSON.
struct Geometry {
  int total_layers = 48;
  // Ids of the layers that hold KV pages, ascending; the others hold none.
  std::vector<int> qsa_layer_ids = {3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47};
  int hidden_size = 2560;
  int q_heads = 24;
  int kv_heads = 2;
  int head_dim = 256;
  int rope_dims = 64;  // partial NeoX RoPE on the first rope_dims of each head
  double rope_theta = 1e7;
  int index_q_heads = 4;
  int index_kv_heads = 1;
  int index_head_dim = 128;
  int compress_ratio = 4;    // raw tokens per compressed indexer key ("block")
  int select_budget = 2048;  // tokens the indexer keeps per query row
  int page_size = 64;        // tokens per KV page
  std::int64_t rope_max_positions = 262144;
  double yarn_factor = 4.0;  // context multiplier when YaRN scaling is switched on

  // Throws ConfigError naming the first field that is out of range or inconsistent (sizes
  // are 1 .. 2^20; the context is bounded by kMaxContextTokens).
  void validate() const;

  int qsa_layers() const { return static_cast<int>(qsa_layer_ids.size()); }
  int gqa_group() const { return q_heads / kv_heads; }
  int block_topk() const { return select_budget / compress_ratio; }
  // Tokens one query row attends: the chosen blocks plus the open group's causal tail.
  int select_width_tokens() const { return select_budget + compress_ratio - 1; }
  std::int64_t max_context(bool yarn) const {
    return yarn ? static_cast<std::int64_t>(static_cast<double>(rope_max_positions) * yarn_factor)
                : rope_max_positions;
  }

  // K+V bytes of one token in one QSA layer. fp8: e4m3 codes plus one fp32 scale per
  // (KV head, K|V).
  std::int64_t kv_bytes_per_token(KvDtype d) const;
  std::int64_t kv_bytes_per_page(KvDtype d) const { return kv_bytes_per_token(d) * page_size; }
  // Bytes of one bank (K or V) of one token: codes only, scales separately.
  std::int64_t code_bytes_per_token_bank(KvDtype d) const;
  std::int64_t scale_bytes_per_token_bank(KvDtype d) const;
  // Indexer slab: one compressed bf16 key per block, always on the GPU.
  std::int64_t slab_bytes_per_token() const {
    return std::int64_t{index_head_dim} * 2 / compress_ratio;
  }
  // bf16 weight bytes of a QSA layer's projections, as the runner groups them: the six that read
  // the normed hidden state in one call (q, k, v, index q, index k (one head), output gate) and
  // the output projection (the attention's heads back to the hidden size).
  std::int64_t input_projection_bytes() const {
    return std::int64_t{hidden_size} * 2 *
           (2 * q_heads * head_dim + 2 * kv_heads * head_dim + index_q_heads * index_head_dim +
            index_head_dim);
  }
  std::int64_t output_projection_bytes() const {
    return std::int64_t{q_heads} * head_dim * hidden_size * 2;
  }
  std::int64_t pages_for_context(std::int64_t tokens) const {
    return (tokens + page_size - 1) / page_size;
  }
  // Most distinct pages one row's selection can touch at a context of `tokens`: every chosen
  // block in its own page plus the causal tail's page, and never more pages than exist.
  std::int64_t max_pages_per_row(std::int64_t tokens) const;

  bool operator==(const Geometry&) const = default;
};

// JSON text <-> Geometry. Fields missing from the JSON keep their defaults; unknown fields
// are errors (a typo must not silently fall back to a default). Both throw ConfigError: text
// that is not JSON says the line and column where it stopped, a bad field names the field
// ("geometry.page_size: ...") and what it expected.
Geometry geometry_from_json(const std::string& json_text);
std::string geometry_to_json(const Geometry& g);

}  // namespace kvtier
