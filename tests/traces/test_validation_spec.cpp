// The C++ validator against the one spec of trace validation that the Python writer formats
// its messages from (traces/python/kvtier_trace/validation.json): every case's last record
// must fail with the rule's message, word for word, and every record before it must pass.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <iterator>
#include <set>

#include "traces/validate.hpp"

namespace kvtier::traces {
namespace {

namespace json = boost::json;

json::object load_spec() {
  std::ifstream f(KVTIER_VALIDATION_SPEC);
  const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  return json::parse(text).as_object();
}

std::int64_t num(const json::object& o, const char* key, std::int64_t fallback) {
  const json::value* v = o.if_contains(key);
  return v ? v->to_number<std::int64_t>() : fallback;
}

// A record in the JSON-lines form, read as the spec means it (negative values and unknown
// kinds included, which the readers' parsers would refuse before the validator sees them).
Record record_of(const json::object& o) {
  if (const json::value* b = o.if_contains("begin")) {
    const json::object& x = b->as_object();
    return RequestBegin{static_cast<RequestId>(num(x, "id", 0)), num(x, "prompt_tokens", 0),
                        static_cast<RequestId>(num(x, "shared_with", 0)),
                        num(x, "shared_pages", 0)};
  }
  if (const json::value* e = o.if_contains("end")) {
    return RequestEnd{static_cast<RequestId>(num(e->as_object(), "id", 0))};
  }
  const json::object& f = o.at("forward").as_object();
  Forward fw;
  for (const json::value& r : f.at("rows").as_array()) {
    const json::object& x = r.as_object();
    const std::string kind(x.at("kind").as_string());
    fw.rows.push_back({static_cast<RequestId>(num(x, "request", 0)), num(x, "position", 0),
                       static_cast<std::int32_t>(num(x, "count", 1)),
                       kind == "decode"    ? RowKind::decode
                       : kind == "prefill" ? RowKind::prefill
                                           : static_cast<RowKind>(7)});
  }
  const json::array& sel = f.at("selections").as_array();
  fw.layers = static_cast<int>(sel.size());
  fw.offsets.assign(1, 0);
  for (const json::value& per_row : sel) {
    for (const json::value& ids : per_row.as_array()) {
      for (const json::value& id : ids.as_array())
        fw.ids.push_back(static_cast<std::int32_t>(id.to_number<std::int64_t>()));
      fw.offsets.push_back(static_cast<std::int64_t>(fw.ids.size()));
    }
  }
  return fw;
}

std::string render(std::string text, const json::object& params) {
  for (const auto& [key, value] : params) {
    const std::string slot = "{" + std::string(key) + "}";
    const std::string v = value.is_string() ? std::string(value.get_string())
                                            : std::to_string(value.to_number<std::int64_t>());
    for (std::size_t at; (at = text.find(slot)) != std::string::npos;)
      text.replace(at, slot.size(), v);
  }
  EXPECT_EQ(text.find('{'), std::string::npos) << "a placeholder left: " << text;
  return text;
}

TEST(TraceValidationSpec, EveryCaseFailsWithItsRulesMessageOnTheCppValidator) {
  const json::object spec = load_spec();
  std::map<std::string, std::string> messages;
  for (const auto& [kind, rules] : spec.at("rules").as_object()) {
    for (const json::value& r : rules.as_array()) {
      messages[std::string(r.at("name").as_string())] = std::string(r.at("message").as_string());
    }
  }
  const Geometry g = geometry_from_json(json::serialize(spec.at("cases_geometry")));
  std::set<std::string> covered;
  for (const json::value& c : spec.at("cases").as_array()) {
    const json::object& cs = c.as_object();
    const std::string rule(cs.at("rule").as_string());
    SCOPED_TRACE("rule " + rule);
    ASSERT_TRUE(messages.count(rule));
    covered.insert(rule);
    json::object params = cs.at("params").as_object();
    params["max_context"] = g.max_context(true);
    params["block_topk"] = g.block_topk();
    params["qsa_layers"] = g.qsa_layers();
    TraceValidator v(g);
    const json::array& recs = cs.at("records").as_array();
    for (std::size_t i = 0; i + 1 < recs.size(); ++i) {
      ASSERT_EQ(v.check(record_of(recs[i].as_object())), "") << "record " << i;
    }
    EXPECT_EQ(v.check(record_of(recs.back().as_object())), render(messages[rule], params));
  }
  for (const auto& [rule, message] : messages)
    EXPECT_TRUE(covered.count(rule)) << "no case for rule " << rule;
}

TEST(TraceValidationSpec, GeometryDefaultsAreKvtiersOwn) {
  const json::object d = load_spec().at("geometry_defaults").as_object();
  const Geometry g;
  EXPECT_EQ(d.at("compress_ratio").to_number<int>(), g.compress_ratio);
  EXPECT_EQ(d.at("select_budget").to_number<int>(), g.select_budget);
  EXPECT_EQ(d.at("page_size").to_number<int>(), g.page_size);
  EXPECT_EQ(d.at("rope_max_positions").to_number<std::int64_t>(), g.rope_max_positions);
  EXPECT_EQ(d.at("yarn_factor").to_number<double>(), g.yarn_factor);
}

}  // namespace
}  // namespace kvtier::traces
