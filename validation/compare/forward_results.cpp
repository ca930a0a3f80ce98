#include "validation/compare/forward_results.hpp"

#include <boost/json.hpp>
#include <cmath>

#include "model/config_error.hpp"

namespace kvtier::validation {
namespace {

namespace json = boost::json;

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw ConfigError(where + ": " + why);
}

json::object parse_object(const std::string& text, const std::string& file) {
  json::value root;
  try {
    root = json::parse(text);
  } catch (const std::exception& e) {
    fail(file, std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) fail(file, "expected a JSON object");
  return std::move(root.as_object());
}

const json::value& field(const json::object& o, const char* key, const std::string& where) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) fail(where, std::string("missing \"") + key + "\"");
  return *v;
}

double number(const json::object& o, const char* key, const std::string& where) {
  const json::value& v = field(o, key, where);
  if (v.is_double()) return v.as_double();
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
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

const json::array& entries(const json::object& o, const char* key, const std::string& file,
                           const std::string& hint) {
  const json::value& v = field(o, key, file);
  if (!v.is_array()) fail(file, std::string("\"") + key + "\" is not an array" + hint);
  return v.as_array();
}

ForwardResult counters(const json::object& e, const std::string& where) {
  ForwardResult f;
  f.forward = integer(e, "forward", where);
  f.hits = integer(e, "hits", where);
  f.misses = integer(e, "misses", where);
  f.evictions = integer(e, "evictions", where);
  return f;
}

}  // namespace

ForwardResults read_gpu_run(const std::string& json_text, const std::string& file) {
  const json::object o = parse_object(json_text, file);
  ForwardResults r;
  r.file = file;
  r.trace = text_or_empty(o, "trace");
  r.placement = text_or_empty(o, "placement");
  r.dtype = text_or_empty(o, "kv_dtype");
  r.slots = integer_or_zero(o, "pool_pages", file);
  if (r.placement.empty())
    fail(file, "missing \"placement\" (is this `kvtier run --trace --json`?)");
  const json::array& steps = entries(o, "steps", file, " (the per-forward steps)");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string where = file + " step " + std::to_string(i);
    if (!steps[i].is_object()) fail(where, "expected an object");
    const json::object& e = steps[i].as_object();
    ForwardResult f = counters(e, where);
    f.us = number(e, "gpu_us", where);
    if (!(f.us > 0) || !std::isfinite(f.us)) fail(where, "\"gpu_us\" must be a time > 0");
    const std::int64_t tokens = integer(e, "tokens", where);
    f.decode = tokens > 0 && integer(e, "decode_tokens", where) == tokens;
    r.forwards.push_back(f);
  }
  return r;
}

ForwardResults read_sim_forwards(const std::string& json_text, const std::string& file) {
  const json::object o = parse_object(json_text, file);
  ForwardResults r;
  r.file = file;
  r.trace = text_or_empty(o, "trace");
  r.placement = text_or_empty(o, "placement");
  r.dtype = text_or_empty(o, "dtype");
  r.slots = integer_or_zero(o, "slots", file);
  if (r.placement.empty()) fail(file, "missing \"placement\" (is this `kvtier sim --json`?)");
  const json::array& fw = entries(
      o, "forwards", file, " of per-forward predictions (run `kvtier sim --json --forwards`)");
  for (std::size_t i = 0; i < fw.size(); ++i) {
    const std::string where = file + " forward " + std::to_string(i);
    if (!fw[i].is_object()) fail(where, "expected an object");
    const json::object& e = fw[i].as_object();
    ForwardResult f = counters(e, where);
    f.us = number(e, "qsa_us", where);
    if (!(f.us >= 0) || !std::isfinite(f.us)) fail(where, "\"qsa_us\" must be a time >= 0");
    r.forwards.push_back(f);
  }
  return r;
}

}  // namespace kvtier::validation
