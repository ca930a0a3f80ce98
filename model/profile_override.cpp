#include "model/profile_override.hpp"

#include <boost/json.hpp>
#include <string_view>

#include "model/config_error.hpp"
#include "model/json_read.hpp"
#include "model/profile_trust.hpp"

namespace kvtier {
namespace {

namespace json = boost::json;

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw ConfigError(where + ": " + why);
}

std::string known_params() {
  std::string s;
  for (std::string_view f : hardware_profile_params())
    s += (s.empty() ? "" : ", ") + std::string(f);
  return s;
}

// A non-empty string, or ConfigError naming `where`.
std::string text(const json::value& v, const std::string& where) {
  if (!v.is_string() || v.as_string().empty()) fail(where, "expected a non-empty string");
  return std::string(v.as_string());
}

bool is_param(std::string_view key) {
  for (std::string_view f : hardware_profile_params()) {
    if (f == key) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> profile_override_base(const std::string& json_text) {
  const json::object o = parse_json_object(json_text, "hardware profile");
  const json::value* base = o.if_contains("base");
  if (base == nullptr) return std::nullopt;
  return text(*base, "base (a built-in profile name or a .json file)");
}

HardwareProfile apply_profile_override(const HardwareProfile& base, const std::string& json_text) {
  const json::object o = parse_json_object(json_text, "hardware profile");
  for (const auto& kv : o) {
    const std::string_view key = kv.key();
    if (key == "validation" || key == "scaled_from_datasheets") {
      fail(std::string(key),
           "not allowed in a profile over a base: it belongs to the complete set of values it "
           "was established with (write a complete profile to carry one)");
    }
    if (key != "name" && key != "base" && key != "description" && key != "params") {
      fail(std::string(key),
           "unknown field (a profile over a base has name, base, description, "
           "params)");
    }
  }
  const json::value* name = o.if_contains("name");
  if (name == nullptr) fail("name", "missing (the derived profile's own name)");
  HardwareProfile p = base;
  p.name = text(*name, "name") + " (over " + base.name + ")";
  if (const json::value* d = o.if_contains("description")) p.description = text(*d, "description");

  const json::value* params = o.if_contains("params");
  if (params == nullptr || !params->is_object()) {
    fail("params",
         "missing: an object of the fields changed, {\"<field>\": {\"value\": x, "
         "\"source\": \"...\"}, ...}");
  }
  ProfileDerivation d;
  d.base = base.name;
  for (const auto& kv : params->as_object()) {
    const std::string key(kv.key());
    const std::string where = "params." + key;
    if (!is_param(key)) fail(where, "unknown parameter (known: " + known_params() + ")");
    if (!kv.value().is_object()) fail(where, "expected {\"value\": x, \"source\": \"...\"}");
    const json::object& e = kv.value().as_object();
    for (const auto& f : e) {
      if (f.key() != "value" && f.key() != "source") {
        fail(where + "." + std::string(f.key()), "unknown field (expected value, source)");
      }
    }
    const json::value* value = e.if_contains("value");
    if (value == nullptr) fail(where, "missing \"value\"");
    const std::optional<double> x = json_number(*value);
    if (!x) fail(where + ".value", "expected a number, got " + json::serialize(*value));
    const json::value* source = e.if_contains("source");
    if (source == nullptr) {
      fail(where,
           "missing \"source\": every changed value says where it comes from (a "
           "measurement, a datasheet, or \"estimate: why\")");
    }
    p.set(key, *x, text(*source, where + ".source"));
    d.changed.push_back(key);
  }
  if (p.validation) {
    for (const std::string& f : d.changed) {
      if (validation_covers(f)) d.voided_validation.push_back(f);
    }
    if (!d.voided_validation.empty()) p.validation.reset();
  }
  p.derived_from = std::move(d);
  p.validate();
  return p;
}

}  // namespace kvtier
