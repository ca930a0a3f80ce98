#include "validation/compare/forward_results.hpp"

#include <boost/json.hpp>
#include <cmath>

#include "model/config_error.hpp"
#include "model/json_read.hpp"

namespace kvtier::validation {
namespace {

namespace json = boost::json;

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw ConfigError(where + ": " + why);
}

const json::value& field(const json::object& o, const char* key, const std::string& where) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) fail(where, std::string("missing \"") + key + "\"");
  return *v;
}

double number(const json::object& o, const char* key, const std::string& where) {
  if (const auto x = json_number(field(o, key, where))) return *x;
  fail(where, std::string("\"") + key + "\" is not a number");
}

std::int64_t integer(const json::object& o, const char* key, const std::string& where) {
  const json::value& v = field(o, key, where);
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64()) return static_cast<std::int64_t>(v.as_uint64());
  fail(where, std::string("\"") + key + "\" is not an integer");
}

std::string text_or_empty(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

std::int64_t integer_or_zero(const json::object& o, const char* key, const std::string& where) {
  return o.contains(key) ? integer(o, key, where) : 0;
}

// Where one side keeps its figures: the GPU replay's JSON or the simulator's.
struct Side {
  const char* dtype_key;
  const char* slots_key;
  const char* list_key;
  const char* us_key;
  const char* entry;      // "step" or "forward", for messages
  const char* producer;   // the command that writes it
  const char* list_hint;  // said when the list is not an array
  bool gpu;
};

constexpr Side kGpu{"kv_dtype",
                    "pool_pages",
                    "steps",
                    "gpu_us",
                    "step",
                    "kvtier run --trace --json",
                    " (the per-forward steps)",
                    true};
constexpr Side kSim{"dtype",
                    "slots",
                    "per_forward",
                    "qsa_us",
                    "forward",
                    "kvtier sim --json",
                    " of per-forward predictions (run `kvtier sim --forward trace-replay "
                    "--per-forward --json`)",
                    false};

ForwardResults read_side(const std::string& json_text, const std::string& file, const Side& side) {
  const json::object o = parse_json_object(json_text, file);
  ForwardResults r;
  r.file = file;
  r.trace = text_or_empty(o, "trace");
  r.placement = text_or_empty(o, "placement");
  r.dtype = text_or_empty(o, side.dtype_key);
  r.slots = integer_or_zero(o, side.slots_key, file);
  if (r.placement.empty()) {
    fail(file, std::string("missing \"placement\" (is this `") + side.producer + "`?)");
  }
  if (!o.contains(side.list_key)) {
    fail(file, std::string("missing \"") + side.list_key + "\"" + side.list_hint);
  }
  const json::value& list = field(o, side.list_key, file);
  if (!list.is_array()) {
    fail(file, std::string("\"") + side.list_key + "\" is not an array" + side.list_hint);
  }
  for (std::size_t i = 0; i < list.as_array().size(); ++i) {
    const std::string where = file + " " + side.entry + " " + std::to_string(i);
    const json::value& v = list.as_array()[i];
    if (!v.is_object()) fail(where, "expected an object");
    const json::object& e = v.as_object();
    ForwardResult f;
    f.forward = integer(e, "forward", where);
    f.hits = integer(e, "hits", where);
    f.misses = integer(e, "misses", where);
    f.evictions = integer(e, "evictions", where);
    f.us = number(e, side.us_key, where);
    // A GPU time divides the error, so it must be > 0; a prediction may be 0.
    if (!std::isfinite(f.us) || (side.gpu ? !(f.us > 0) : !(f.us >= 0))) {
      fail(where,
           std::string("\"") + side.us_key + "\" must be a time " + (side.gpu ? "> 0" : ">= 0"));
    }
    if (side.gpu) {
      const std::int64_t tokens = integer(e, "tokens", where);
      f.decode = tokens > 0 && integer(e, "decode_tokens", where) == tokens;
    }
    r.forwards.push_back(f);
  }
  return r;
}

}  // namespace

ForwardResults read_gpu_run(const std::string& json_text, const std::string& file) {
  return read_side(json_text, file, kGpu);
}

ForwardResults read_sim_forwards(const std::string& json_text, const std::string& file) {
  return read_side(json_text, file, kSim);
}

}  // namespace kvtier::validation
