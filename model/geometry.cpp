#include "model/geometry.hpp"

#include <algorithm>
#include <boost/json.hpp>

#include "model/config_error.hpp"
#include "model/json_read.hpp"

namespace kvtier {
namespace {

namespace json = boost::json;

[[noreturn]] void fail(const std::string& field, const std::string& why) {
  throw ConfigError("geometry." + field + ": " + why);
}

// Sizes of a geometry stay below 2^20, so that products of three of them (bytes of a page:
// heads x head_dim x page_size) fit an int64 with room to multiply by counts.
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 20;

void require_positive(const std::string& field, std::int64_t v) {
  if (v <= 0) fail(field, "must be positive, got " + std::to_string(v));
  if (v > kMaxDimension)
    fail(field, "must be at most " + std::to_string(kMaxDimension) + ", got " + std::to_string(v));
}

std::int64_t as_int(const json::value& v, const std::string& field) {
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64() && v.as_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(v.as_uint64());
  }
  fail(field, "expected an integer, got " + json::serialize(v));
}

int as_int32(const json::value& v, const std::string& field) {
  std::int64_t x = as_int(v, field);
  if (x < INT32_MIN || x > INT32_MAX) fail(field, "out of 32-bit range: " + std::to_string(x));
  return static_cast<int>(x);
}

double as_double(const json::value& v, const std::string& field) {
  if (v.is_double()) return v.as_double();
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  fail(field, "expected a number, got " + json::serialize(v));
}

}  // namespace

void Geometry::validate() const {
  require_positive("total_layers", total_layers);
  if (qsa_layer_ids.empty()) fail("qsa_layer_ids", "must name at least one layer");
  for (std::size_t i = 0; i < qsa_layer_ids.size(); ++i) {
    int id = qsa_layer_ids[i];
    if (id < 0 || id >= total_layers) {
      fail("qsa_layer_ids",
           "layer " + std::to_string(id) + " is outside 0.." + std::to_string(total_layers - 1));
    }
    if (i > 0 && id <= qsa_layer_ids[i - 1]) fail("qsa_layer_ids", "must be strictly ascending");
  }
  require_positive("hidden_size", hidden_size);
  require_positive("q_heads", q_heads);
  require_positive("kv_heads", kv_heads);
  if (q_heads % kv_heads != 0) {
    fail("q_heads", "must be a multiple of kv_heads (" + std::to_string(kv_heads) + ")");
  }
  require_positive("head_dim", head_dim);
  if (rope_dims < 0 || rope_dims % 2 != 0) fail("rope_dims", "must be even and >= 0");
  if (rope_dims > head_dim) fail("rope_dims", "must not exceed head_dim");
  if (!(rope_theta > 0)) fail("rope_theta", "must be positive");
  require_positive("index_q_heads", index_q_heads);
  require_positive("index_kv_heads", index_kv_heads);
  require_positive("index_head_dim", index_head_dim);
  if (rope_dims > index_head_dim) fail("rope_dims", "must not exceed index_head_dim");
  require_positive("compress_ratio", compress_ratio);
  require_positive("select_budget", select_budget);
  if (select_budget % compress_ratio != 0) {
    fail("select_budget", "must be a multiple of compress_ratio (" +
                              std::to_string(compress_ratio) + "), got " +
                              std::to_string(select_budget));
  }
  require_positive("page_size", page_size);
  if (page_size % compress_ratio != 0) {
    fail("page_size", "must be a multiple of compress_ratio (" + std::to_string(compress_ratio) +
                          "), got " + std::to_string(page_size));
  }
  if (rope_max_positions <= 0)
    fail("rope_max_positions", "must be positive, got " + std::to_string(rope_max_positions));
  if (!(yarn_factor >= 1.0)) fail("yarn_factor", "must be >= 1");
  // Compared in double before max_context() converts, so that no factor overflows the cast.
  if (static_cast<double>(rope_max_positions) * yarn_factor >
      static_cast<double>(kMaxContextTokens)) {
    fail("yarn_factor", "rope_max_positions x yarn_factor must be at most " +
                            std::to_string(kMaxContextTokens) + " tokens");
  }
}

std::int64_t Geometry::code_bytes_per_token_bank(KvDtype d) const {
  const std::int64_t elem = d == KvDtype::bf16 ? 2 : 1;
  return std::int64_t{kv_heads} * head_dim * elem;
}

std::int64_t Geometry::scale_bytes_per_token_bank(KvDtype d) const {
  return d == KvDtype::fp8 ? std::int64_t{kv_heads} * 4 : 0;
}

std::int64_t Geometry::kv_bytes_per_token(KvDtype d) const {
  return 2 * (code_bytes_per_token_bank(d) + scale_bytes_per_token_bank(d));
}

std::int64_t Geometry::max_pages_per_row(std::int64_t tokens) const {
  return std::min<std::int64_t>(block_topk() + 1, pages_for_context(tokens));
}

Geometry geometry_from_json(const std::string& json_text) {
  const json::object root = parse_json_object(json_text, "geometry");
  Geometry g;
  for (const auto& [key_sv, v] : root) {
    const std::string key(key_sv);
    if (key == "total_layers")
      g.total_layers = as_int32(v, key);
    else if (key == "qsa_layer_ids") {
      if (!v.is_array()) fail(key, "expected an array of layer ids");
      g.qsa_layer_ids.clear();
      for (const auto& x : v.as_array())
        g.qsa_layer_ids.push_back(as_int32(x, key));
    } else if (key == "hidden_size")
      g.hidden_size = as_int32(v, key);
    else if (key == "q_heads")
      g.q_heads = as_int32(v, key);
    else if (key == "kv_heads")
      g.kv_heads = as_int32(v, key);
    else if (key == "head_dim")
      g.head_dim = as_int32(v, key);
    else if (key == "rope_dims")
      g.rope_dims = as_int32(v, key);
    else if (key == "rope_theta")
      g.rope_theta = as_double(v, key);
    else if (key == "index_q_heads")
      g.index_q_heads = as_int32(v, key);
    else if (key == "index_kv_heads")
      g.index_kv_heads = as_int32(v, key);
    else if (key == "index_head_dim")
      g.index_head_dim = as_int32(v, key);
    else if (key == "compress_ratio")
      g.compress_ratio = as_int32(v, key);
    else if (key == "select_budget")
      g.select_budget = as_int32(v, key);
    else if (key == "page_size")
      g.page_size = as_int32(v, key);
    else if (key == "rope_max_positions")
      g.rope_max_positions = as_int(v, key);
    else if (key == "yarn_factor")
      g.yarn_factor = as_double(v, key);
    else
      fail(key, "unknown field");
  }
  g.validate();
  return g;
}

std::string geometry_to_json(const Geometry& g) {
  json::object o;
  o["total_layers"] = g.total_layers;
  json::array ids;
  for (int id : g.qsa_layer_ids)
    ids.push_back(id);
  o["qsa_layer_ids"] = std::move(ids);
  o["hidden_size"] = g.hidden_size;
  o["q_heads"] = g.q_heads;
  o["kv_heads"] = g.kv_heads;
  o["head_dim"] = g.head_dim;
  o["rope_dims"] = g.rope_dims;
  o["rope_theta"] = g.rope_theta;
  o["index_q_heads"] = g.index_q_heads;
  o["index_kv_heads"] = g.index_kv_heads;
  o["index_head_dim"] = g.index_head_dim;
  o["compress_ratio"] = g.compress_ratio;
  o["select_budget"] = g.select_budget;
  o["page_size"] = g.page_size;
  o["rope_max_positions"] = g.rope_max_positions;
  o["yarn_factor"] = g.yarn_factor;
  return json::serialize(o);
}

}  // namespace kvtier
