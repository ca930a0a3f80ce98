#include "model/hardware_profile.hpp"

#include <boost/json.hpp>
#include <utility>

#include "model/config_error.hpp"

namespace kvtier {
namespace {

namespace json = boost::json;

struct Field {
  const char* name;
  double HardwareProfile::*member;
};

// Every numeric field a profile must give. Order is the order of the table in docs.
constexpr Field kFields[] = {
    {"device_memory_gib", &HardwareProfile::device_memory_gib},
    {"pcie_h2d_gbps", &HardwareProfile::pcie_h2d_gbps},
    {"pcie_d2h_gbps", &HardwareProfile::pcie_d2h_gbps},
    {"pcie_latency_us", &HardwareProfile::pcie_latency_us},
    {"zero_copy_read_gbps", &HardwareProfile::zero_copy_read_gbps},
    {"zero_copy_write_gbps", &HardwareProfile::zero_copy_write_gbps},
    {"hbm_gbps", &HardwareProfile::hbm_gbps},
    {"launch_us", &HardwareProfile::launch_us},
    {"graph_launch_us", &HardwareProfile::graph_launch_us},
    {"indexer_ns_per_row_block", &HardwareProfile::indexer_ns_per_row_block},
    {"topk_ns_per_row_block", &HardwareProfile::topk_ns_per_row_block},
    {"ensure_fixed_us", &HardwareProfile::ensure_fixed_us},
    {"ensure_ns_per_lookup", &HardwareProfile::ensure_ns_per_lookup},
    {"ensure_ns_per_slot", &HardwareProfile::ensure_ns_per_slot},
    {"ensure_ns_per_miss", &HardwareProfile::ensure_ns_per_miss},
    {"attention_fixed_us", &HardwareProfile::attention_fixed_us},
    {"non_qsa_forward_us", &HardwareProfile::non_qsa_forward_us},
    {"non_qsa_token_us", &HardwareProfile::non_qsa_token_us},
};

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw ConfigError("hardware profile " + where + ": " + why);
}

double number(const json::value& v, const std::string& where) {
  if (v.is_double()) return v.as_double();
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  fail(where, "expected a number, got " + json::serialize(v));
}

}  // namespace

void HardwareProfile::validate() const {
  if (name.empty()) fail("name", "must not be empty");
  for (const Field& f : kFields) {
    if (!(this->*f.member > 0)) fail(name + "." + f.name, "must be positive");
  }
}

HardwareProfile hardware_profile_from_json(const std::string& json_text) {
  json::value root;
  try {
    root = json::parse(json_text);
  } catch (const std::exception& e) {
    fail("", std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) fail("", "expected a JSON object");
  const json::object& o = root.as_object();
  HardwareProfile p;
  for (const auto& kv : o) {
    const std::string key(kv.key());
    if (key == "name" && kv.value().is_string()) {
      p.name = std::string(kv.value().as_string());
    } else if (key == "description" && kv.value().is_string()) {
      p.description = std::string(kv.value().as_string());
    } else if (key != "params") {
      fail(key, "unknown field (expected name, description, params)");
    }
  }
  const std::string who = p.name.empty() ? std::string("?") : p.name;
  const json::value* params = o.if_contains("params");
  if (params == nullptr || !params->is_object()) fail(who, "missing \"params\" object");
  for (const auto& kv : params->as_object()) {
    const std::string key(kv.key());
    const Field* field = nullptr;
    for (const Field& f : kFields) {
      if (key == f.name) field = &f;
    }
    if (field == nullptr) fail(who + "." + key, "unknown parameter");
    if (!kv.value().is_object()) fail(who + "." + key, "expected {\"value\": x, \"source\": s}");
    const json::object& e = kv.value().as_object();
    const json::value* value = e.if_contains("value");
    const json::value* source = e.if_contains("source");
    if (value == nullptr) fail(who + "." + key, "missing value");
    if (source == nullptr || !source->is_string() || source->as_string().empty()) {
      fail(who + "." + key, "every value needs a non-empty \"source\"");
    }
    p.*(field->member) = number(*value, who + "." + key);
    p.sources.emplace_back(key, std::string(source->as_string()));
  }
  p.validate();
  return p;
}

}  // namespace kvtier
