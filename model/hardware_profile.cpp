#include "model/hardware_profile.hpp"

#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "model/config_error.hpp"
#include "model/json_read.hpp"

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
    {"sm_count", &HardwareProfile::sm_count},
    {"launch_us", &HardwareProfile::launch_us},
    {"graph_launch_us", &HardwareProfile::graph_launch_us},
    {"indexer_fixed_us", &HardwareProfile::indexer_fixed_us},
    {"indexer_ns_per_row_block", &HardwareProfile::indexer_ns_per_row_block},
    {"indexer_prefill_fixed_us", &HardwareProfile::indexer_prefill_fixed_us},
    {"indexer_prefill_ns_per_row_block", &HardwareProfile::indexer_prefill_ns_per_row_block},
    {"topk_fixed_us", &HardwareProfile::topk_fixed_us},
    {"topk_ns_per_row_block", &HardwareProfile::topk_ns_per_row_block},
    {"topk_one_cta_fixed_us", &HardwareProfile::topk_one_cta_fixed_us},
    {"topk_one_cta_ns_per_row_block", &HardwareProfile::topk_one_cta_ns_per_row_block},
    {"topk_one_cta_ns_per_row", &HardwareProfile::topk_one_cta_ns_per_row},
    {"topk_chain_fixed_us", &HardwareProfile::topk_chain_fixed_us},
    {"topk_chain_ns_per_row_block", &HardwareProfile::topk_chain_ns_per_row_block},
    {"projection_fixed_us", &HardwareProfile::projection_fixed_us},
    {"projection_gbps", &HardwareProfile::projection_gbps},
    {"projection_ns_per_row", &HardwareProfile::projection_ns_per_row},
    {"projection_wide_fixed_us", &HardwareProfile::projection_wide_fixed_us},
    {"projection_wide_tflops", &HardwareProfile::projection_wide_tflops},
    {"layer_ops_fixed_us", &HardwareProfile::layer_ops_fixed_us},
    {"layer_ops_ns_per_row", &HardwareProfile::layer_ops_ns_per_row},
    {"ensure_fixed_us", &HardwareProfile::ensure_fixed_us},
    {"ensure_ns_per_lookup", &HardwareProfile::ensure_ns_per_lookup},
    {"ensure_ns_per_slot", &HardwareProfile::ensure_ns_per_slot},
    {"ensure_ns_per_miss", &HardwareProfile::ensure_ns_per_miss},
    {"step_beside_fixed_us", &HardwareProfile::step_beside_fixed_us},
    {"step_beside_us_per_row_doubling", &HardwareProfile::step_beside_us_per_row_doubling},
    {"step_beside_ns_per_page", &HardwareProfile::step_beside_ns_per_page},
    {"step_beside_ns_per_slot", &HardwareProfile::step_beside_ns_per_slot},
    {"step_beside_ns_per_miss", &HardwareProfile::step_beside_ns_per_miss},
    {"step_beside_ns_per_page_missing", &HardwareProfile::step_beside_ns_per_page_missing},
    {"step_beside_us_missing", &HardwareProfile::step_beside_us_missing},
    {"step_beside_wide_fixed_us", &HardwareProfile::step_beside_wide_fixed_us},
    {"step_beside_wide_ns_per_row", &HardwareProfile::step_beside_wide_ns_per_row},
    {"step_beside_wide_ns_per_page", &HardwareProfile::step_beside_wide_ns_per_page},
    {"step_beside_wide_ns_per_slot", &HardwareProfile::step_beside_wide_ns_per_slot},
    {"step_beside_wide_ns_per_miss", &HardwareProfile::step_beside_wide_ns_per_miss},
    {"step_beside_wide_ns_per_page_missing",
     &HardwareProfile::step_beside_wide_ns_per_page_missing},
    {"step_beside_copy_us", &HardwareProfile::step_beside_copy_us},
    {"step_beside_copy_gbps", &HardwareProfile::step_beside_copy_gbps},
    {"attention_fixed_us", &HardwareProfile::attention_fixed_us},
    {"attention_ns_per_cta", &HardwareProfile::attention_ns_per_cta},
    {"attention_ns_per_cta_token", &HardwareProfile::attention_ns_per_cta_token},
    {"attention_waves_fixed_us", &HardwareProfile::attention_waves_fixed_us},
    {"attention_waves_ns_per_cta", &HardwareProfile::attention_waves_ns_per_cta},
    {"attention_waves_gbps", &HardwareProfile::attention_waves_gbps},
    {"staging_fixed_us", &HardwareProfile::staging_fixed_us},
    {"staging_gbps", &HardwareProfile::staging_gbps},
    {"window_fold_fixed_us", &HardwareProfile::window_fold_fixed_us},
    {"window_fold_ns_per_row", &HardwareProfile::window_fold_ns_per_row},
    {"fold_reset_fixed_us", &HardwareProfile::fold_reset_fixed_us},
    {"fold_reset_ns_per_row", &HardwareProfile::fold_reset_ns_per_row},
    {"attention_l2_reuse_us", &HardwareProfile::attention_l2_reuse_us},
    {"attention_l2_reuse_full_bytes", &HardwareProfile::attention_l2_reuse_full_bytes},
    {"attention_l2_reuse_none_bytes", &HardwareProfile::attention_l2_reuse_none_bytes},
    {"attention_fp8_fixed_us", &HardwareProfile::attention_fp8_fixed_us},
    {"attention_fp8_gbps", &HardwareProfile::attention_fp8_gbps},
    {"attention_fp8_ns_per_row", &HardwareProfile::attention_fp8_ns_per_row},
    {"attention_fp8_knee_bytes", &HardwareProfile::attention_fp8_knee_bytes},
    {"attention_fp8_ns_per_kib", &HardwareProfile::attention_fp8_ns_per_kib},
    {"attention_fp8_host_fixed_us", &HardwareProfile::attention_fp8_host_fixed_us},
    {"attention_fp8_host_gbps", &HardwareProfile::attention_fp8_host_gbps},
    {"attention_fp8_host_ns_per_row", &HardwareProfile::attention_fp8_host_ns_per_row},
    {"attention_fp8_host_knee_bytes", &HardwareProfile::attention_fp8_host_knee_bytes},
    {"attention_fp8_host_ns_per_kib", &HardwareProfile::attention_fp8_host_ns_per_kib},
    {"store_fixed_us", &HardwareProfile::store_fixed_us},
    {"store_hbm_gbps", &HardwareProfile::store_hbm_gbps},
    {"store_knee_bytes", &HardwareProfile::store_knee_bytes},
    {"store_ns_per_kib", &HardwareProfile::store_ns_per_kib},
    {"store_host_us", &HardwareProfile::store_host_us},
    {"store_host_knee_bytes", &HardwareProfile::store_host_knee_bytes},
    {"store_host_ns_per_kib", &HardwareProfile::store_host_ns_per_kib},
    {"store_fp8_fixed_us", &HardwareProfile::store_fp8_fixed_us},
    {"store_fp8_hbm_gbps", &HardwareProfile::store_fp8_hbm_gbps},
    {"store_fp8_knee_bytes", &HardwareProfile::store_fp8_knee_bytes},
    {"store_fp8_ns_per_kib", &HardwareProfile::store_fp8_ns_per_kib},
    {"store_fp8_host_us", &HardwareProfile::store_fp8_host_us},
    {"store_fp8_host_knee_bytes", &HardwareProfile::store_fp8_host_knee_bytes},
    {"store_fp8_host_ns_per_kib", &HardwareProfile::store_fp8_host_ns_per_kib},
    {"store_fp8_host_gbps", &HardwareProfile::store_fp8_host_gbps},
    {"non_qsa_forward_us", &HardwareProfile::non_qsa_forward_us},
    {"non_qsa_token_us", &HardwareProfile::non_qsa_token_us},
};

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw ConfigError("hardware profile " + where + ": " + why);
}

double number(const json::value& v, const std::string& where) {
  if (const auto x = json_number(v)) return *x;
  fail(where, "expected a number, got " + json::serialize(v));
}

const Field* find_field(std::string_view name) {
  for (const Field& f : kFields) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

const Field& field_or_fail(std::string_view name) {
  const Field* f = find_field(name);
  if (f == nullptr) fail(std::string(name), "unknown parameter");
  return *f;
}

std::string text_of(const json::object& o, const char* key, const std::string& where) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string() || v->as_string().empty()) {
    fail(where, std::string("\"") + key + "\" must be a non-empty string");
  }
  return std::string(v->as_string());
}

double error_of(const json::value& v, const std::string& where) {
  const double x = number(v, where);
  if (!std::isfinite(x) || x < 0) fail(where, "expected a fraction >= 0");
  return x;
}

// The validation's errors that a profile may leave out, read and written by one list.
struct OptionalError {
  const char* name;
  std::optional<double> ProfileValidation::*member;
};
constexpr OptionalError kOptionalErrors[] = {
    {"prefill_median_error", &ProfileValidation::prefill_median_error},
    {"model_decode_median_error", &ProfileValidation::model_decode_median_error},
    {"model_decode_worst_error", &ProfileValidation::model_decode_worst_error},
    {"model_prefill_worst_error", &ProfileValidation::model_prefill_worst_error},
};
const OptionalError* find_optional_error(std::string_view key) {
  for (const OptionalError& e : kOptionalErrors) {
    if (key == e.name) return &e;
  }
  return nullptr;
}

ProfileValidation validation_from_json(const json::value& v, const std::string& who) {
  const std::string where = who + ".validation";
  if (!v.is_object()) fail(where, "expected an object");
  const json::object& o = v.as_object();
  ProfileValidation pv;
  for (const auto& kv : o) {
    const std::string key(kv.key());
    if (key == "card" || key == "date") continue;
    if (key == "decode_median_error") {
      pv.decode_median_error = error_of(kv.value(), where + "." + key);
    } else if (key == "decode_p95_error") {
      pv.decode_p95_error = error_of(kv.value(), where + "." + key);
    } else if (const OptionalError* e = find_optional_error(key)) {
      pv.*(e->member) = error_of(kv.value(), where + "." + key);
    } else if (key == "traces") {
      if (!kv.value().is_array()) fail(where + ".traces", "expected an array of strings");
      for (const json::value& t : kv.value().as_array()) {
        if (!t.is_string()) fail(where + ".traces", "expected an array of strings");
        pv.traces.emplace_back(t.as_string());
      }
    } else {
      fail(where + "." + key, "unknown field");
    }
  }
  pv.card = text_of(o, "card", where);
  pv.date = text_of(o, "date", where);
  for (const char* key : {"decode_median_error", "decode_p95_error", "traces"}) {
    if (!o.contains(key)) fail(where, std::string("missing \"") + key + "\"");
  }
  return pv;
}

// The shortest text that reads back as the same double ("131", "54.9", "1e-07"), where
// Boost.JSON would write "1.31E2".
std::string number_text(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string string_text(const std::string& s) {
  return json::serialize(json::value(s));
}

std::string validation_text(const ProfileValidation& pv) {
  std::string traces;
  for (const std::string& t : pv.traces)
    traces += (traces.empty() ? "" : ", ") + string_text(t);
  std::string o = "{\"card\": " + string_text(pv.card) + ", \"date\": " + string_text(pv.date) +
                  ", \"decode_median_error\": " + number_text(pv.decode_median_error) +
                  ", \"decode_p95_error\": " + number_text(pv.decode_p95_error);
  for (const OptionalError& e : kOptionalErrors) {
    if (const std::optional<double>& v = pv.*(e.member))
      o += std::string(", \"") + e.name + "\": " + number_text(*v);
  }
  return o + ", \"traces\": [" + traces + "]}";
}

}  // namespace

std::vector<std::string_view> hardware_profile_params() {
  std::vector<std::string_view> names;
  for (const Field& f : kFields)
    names.emplace_back(f.name);
  return names;
}

double HardwareProfile::param(std::string_view field) const {
  return this->*field_or_fail(field).member;
}

void HardwareProfile::set(std::string_view field, double value, std::string source_text) {
  this->*field_or_fail(field).member = value;
  for (auto& [key, src] : sources) {
    if (key == field) {
      src = std::move(source_text);
      return;
    }
  }
  sources.emplace_back(std::string(field), std::move(source_text));
}

std::string HardwareProfile::source(std::string_view field) const {
  for (const auto& [key, src] : sources) {
    if (key == field) return src;
  }
  return {};
}

namespace {

// The range a figure of this kind may take (by the name's unit) so that every op it prices stays
// within what the simulator times: a rate of 1e-12 GB/s or a fixed cost of a year is no GPU's.
// Rates have no ceiling (a rate of 1e9 GB/s makes a term free, as tests and what-if profiles
// do). Nothing for a field of no such unit.
struct Plausible {
  double low, high;
  const char* unit;
};
std::optional<Plausible> plausible_range(std::string_view field) {
  const auto has = [field](std::string_view part) {
    return field.find(part) != std::string_view::npos;
  };
  constexpr double kNoCeiling = std::numeric_limits<double>::max();
  if (field.ends_with("_gbps")) return Plausible{1e-6, kNoCeiling, "GB/s"};  // 1 KB/s
  if (field.ends_with("_tflops")) return Plausible{1e-6, kNoCeiling, "TFLOP/s"};
  if (has("_ns_per_")) return Plausible{0, 1e9, "ns"};  // a second per unit
  if (field.ends_with("_us") || has("_us_per_")) return Plausible{0, 1e6, "us"};    // a second
  if (field.ends_with("_bytes")) return Plausible{0, 1125899906842624.0, "bytes"};  // 1 PiB
  if (field == "device_memory_gib") return Plausible{0, 1048576, "GiB"};            // 1 PiB
  return std::nullopt;
}

}  // namespace

void HardwareProfile::validate() const {
  if (name.empty()) fail("name", "must not be empty");
  for (const Field& f : kFields) {
    // The rest of the model is an input that may be 0 (the QSA stack alone), and a knee may
    // sit at 0 bytes with nothing below it; every other figure prices real work.
    const bool may_be_zero = f.member == &HardwareProfile::non_qsa_forward_us ||
                             f.member == &HardwareProfile::non_qsa_token_us ||
                             f.member == &HardwareProfile::store_host_knee_bytes ||
                             f.member == &HardwareProfile::store_host_ns_per_kib ||
                             f.member == &HardwareProfile::store_fp8_host_knee_bytes ||
                             f.member == &HardwareProfile::store_fp8_host_ns_per_kib ||
                             f.member == &HardwareProfile::store_knee_bytes ||
                             f.member == &HardwareProfile::store_ns_per_kib ||
                             f.member == &HardwareProfile::store_fp8_knee_bytes ||
                             f.member == &HardwareProfile::store_fp8_ns_per_kib ||
                             f.member == &HardwareProfile::attention_fp8_knee_bytes ||
                             f.member == &HardwareProfile::attention_fp8_ns_per_kib ||
                             f.member == &HardwareProfile::attention_fp8_host_knee_bytes ||
                             f.member == &HardwareProfile::attention_fp8_host_ns_per_kib ||
                             f.member == &HardwareProfile::attention_l2_reuse_us ||
                             f.member == &HardwareProfile::attention_l2_reuse_full_bytes ||
                             f.member == &HardwareProfile::attention_l2_reuse_none_bytes ||
                             f.member == &HardwareProfile::attention_waves_fixed_us ||
                             f.member == &HardwareProfile::attention_waves_ns_per_cta ||
                             f.member == &HardwareProfile::attention_waves_gbps ||
                             f.member == &HardwareProfile::staging_fixed_us ||
                             f.member == &HardwareProfile::staging_gbps ||
                             f.member == &HardwareProfile::window_fold_fixed_us ||
                             f.member == &HardwareProfile::window_fold_ns_per_row ||
                             f.member == &HardwareProfile::fold_reset_fixed_us ||
                             f.member == &HardwareProfile::fold_reset_ns_per_row ||
                             f.member == &HardwareProfile::topk_one_cta_ns_per_row;
    const double v = this->*f.member;
    if (!std::isfinite(v) || (may_be_zero ? !(v >= 0) : !(v > 0))) {
      fail(name + "." + f.name,
           std::string(may_be_zero ? "must be 0 or more" : "must be positive") +
               " and finite, got " + number_text(v));
    }
    // A figure that may be 0 (a term not in use) is held to the range only when set.
    if (const auto r = plausible_range(f.name);
        r && !(may_be_zero && v == 0) && (v < r->low || v > r->high)) {
      fail(name + "." + f.name, (r->high == std::numeric_limits<double>::max()
                                     ? "must be at least " + number_text(r->low) + " " + r->unit
                                     : "must be within " + number_text(r->low) + " .. " +
                                           number_text(r->high) + " " + r->unit) +
                                    " (no GPU is outside it), got " + number_text(v));
    }
  }
  if (attention_l2_reuse_us > 0 && !(attention_l2_reuse_none_bytes > attention_l2_reuse_full_bytes))
    fail(name + ".attention_l2_reuse_none_bytes", "must be above attention_l2_reuse_full_bytes (" +
                                                      number_text(attention_l2_reuse_full_bytes) +
                                                      ") where attention_l2_reuse_us > 0, got " +
                                                      number_text(attention_l2_reuse_none_bytes));
  if (attention_waves_gbps > 0 && !(attention_waves_fixed_us > 0 && attention_waves_ns_per_cta > 0))
    fail(name + ".attention_waves_fixed_us",
         "attention_waves_fixed_us and attention_waves_ns_per_cta must be positive where "
         "attention_waves_gbps > 0 (0: the one-wave terms price every attend)");
  if (staging_gbps > 0 && !(window_fold_ns_per_row > 0 && fold_reset_ns_per_row > 0))
    fail(name + ".window_fold_ns_per_row",
         "window_fold_ns_per_row and fold_reset_ns_per_row must be positive where staging_gbps > "
         "0 (0: staged windows priced as copies)");
  if (sm_count != std::floor(sm_count) || sm_count > 65535)
    fail(name + ".sm_count",
         "must be a whole number of multiprocessors, got " + number_text(sm_count));
}

HardwareProfile hardware_profile_from_json(const std::string& json_text) {
  const json::object o = parse_json_object(json_text, "hardware profile");
  HardwareProfile p;
  for (const auto& kv : o) {
    const std::string key(kv.key());
    if (key == "name" && kv.value().is_string()) {
      p.name = std::string(kv.value().as_string());
    } else if (key == "description" && kv.value().is_string()) {
      p.description = std::string(kv.value().as_string());
    } else if (key == "scaled_from_datasheets" && kv.value().is_bool()) {
      p.scaled_from_datasheets = kv.value().as_bool();
    } else if (key != "params" && key != "validation") {
      fail(key,
           "unknown field (expected name, description, scaled_from_datasheets, validation, "
           "params)");
    }
  }
  const std::string who = p.name.empty() ? std::string("?") : p.name;
  if (const json::value* v = o.if_contains("validation"))
    p.validation = validation_from_json(*v, who);
  if (p.scaled_from_datasheets && p.validation) {
    fail(who, "a profile scaled from datasheets cannot carry a validation");
  }
  const json::value* params = o.if_contains("params");
  if (params == nullptr || !params->is_object()) fail(who, "missing \"params\" object");
  for (const auto& kv : params->as_object()) {
    const std::string key(kv.key());
    const Field* field = find_field(key);
    if (field == nullptr && key.starts_with("ensure_beside"))
      fail(who + "." + key,
           "retired parameter: since 2026-12-03 the step beside the attention is priced by "
           "step_beside_* (its rows and pages); fit the profile again from a new points file "
           "(kvtier validate calibrate, then kvtier validate fit; docs/validation.md)");
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
  for (const Field& f : kFields) {
    if (p.source(f.name).empty()) {
      fail(who + "." + f.name,
           "missing (a complete profile gives every field; to give only the fields that change, "
           "name a \"base\" profile: docs/planner.md, \"Writing a profile\")");
    }
  }
  p.validate();
  return p;
}

std::string hardware_profile_to_json(const HardwareProfile& p) {
  // Written by hand in the layout of sim/profiles/*.json (two-space indent, one value and its
  // source per parameter), so that a fitted profile diffs cleanly against the shipped one.
  std::string out = "{\n  \"name\": " + string_text(p.name) +
                    ",\n  \"description\": " + string_text(p.description) + ",\n";
  if (p.scaled_from_datasheets) out += "  \"scaled_from_datasheets\": true,\n";
  if (p.validation) out += "  \"validation\": " + validation_text(*p.validation) + ",\n";
  out += "  \"params\": {\n";
  bool first = true;
  for (const Field& f : kFields) {
    const std::string src = p.source(f.name);
    if (src.empty()) fail(p.name + "." + f.name, "has no source to write");
    out += std::string(first ? "" : ",\n") + "    \"" + f.name +
           "\": {\n      \"value\": " + number_text(p.*f.member) +
           ",\n      \"source\": " + string_text(src) + "\n    }";
    first = false;
  }
  out += "\n  }\n}\n";
  return out;
}

}  // namespace kvtier
