#include "validation/fit/points_file.hpp"

#include <boost/json.hpp>
#include <cmath>

#include "model/calibration_terms.hpp"
#include "model/config_error.hpp"
#include "model/json_read.hpp"

namespace kvtier::fit {
namespace {

namespace json = boost::json;

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw ConfigError("points file" + (where.empty() ? std::string() : " " + where) + ": " + why);
}

std::string text(const json::object& o, const char* key, const std::string& where) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string() || v->as_string().empty()) {
    fail(where, std::string("\"") + key + "\" must be a non-empty string");
  }
  return std::string(v->as_string());
}

double number(const json::value& v, const std::string& where) {
  const std::optional<double> x = json_number(v);
  if (!x) fail(where, "expected a number, got " + json::serialize(v));
  if (!std::isfinite(*x) || *x < 0) fail(where, "expected a finite number >= 0");
  return *x;
}

void only(const json::object& o, std::initializer_list<std::string_view> keys,
          const std::string& where) {
  for (const auto& kv : o) {
    bool known = false;
    for (std::string_view k : keys)
      known = known || kv.key() == k;
    if (!known) fail(where, "unknown field \"" + std::string(kv.key()) + "\"");
  }
}

PointSeries read_series(const json::value& v, std::size_t index) {
  std::string where = "series " + std::to_string(index);
  if (!v.is_object()) fail(where, "expected an object");
  const json::object& o = v.as_object();
  only(o, {"term", "inputs", "unit", "points"}, where);
  PointSeries s;
  s.term = text(o, "term", where);
  where = "series '" + s.term + "'";
  const CalibrationTerm* term = find_calibration_term(s.term);
  if (term == nullptr) {
    std::string known;
    for (const auto& t : calibration_terms())
      known += (known.empty() ? "" : ", ") + std::string(t.term);
    fail(where, "unknown term (known: " + known + ")");
  }
  if (text(o, "unit", where) != "us") fail(where, "\"unit\" must be \"us\"");
  const json::value* inputs = o.if_contains("inputs");
  std::string expected;
  for (std::string_view in : term->inputs)
    expected += (expected.empty() ? "" : ", ") + std::string(in);
  if (inputs == nullptr || !inputs->is_array() ||
      inputs->as_array().size() != term->inputs.size()) {
    fail(where, "\"inputs\" must be [" + expected + "]");
  }
  for (std::size_t j = 0; j < term->inputs.size(); ++j) {
    const json::value& in = inputs->as_array()[j];
    if (!in.is_string() || in.as_string() != term->inputs[j]) {
      fail(where, "\"inputs\" must be [" + expected + "] in that order");
    }
    s.samples.inputs.emplace_back(term->inputs[j]);
  }
  const json::value* points = o.if_contains("points");
  if (points == nullptr || !points->is_array()) fail(where, "missing \"points\" array");
  const std::size_t k = term->inputs.size();
  for (std::size_t i = 0; i < points->as_array().size(); ++i) {
    const std::string at = where + " point " + std::to_string(i);
    const json::value& p = points->as_array()[i];
    if (!p.is_array() || p.as_array().size() != k + 1) {
      fail(at, "expected [" + expected + ", y us]");
    }
    std::vector<double> x(k);
    for (std::size_t j = 0; j < k; ++j)
      x[j] = number(p.as_array()[j], at);
    s.samples.x.push_back(std::move(x));
    s.samples.y.push_back(number(p.as_array()[k], at));
  }
  return s;
}

}  // namespace

const PointSeries* PointsFile::find(std::string_view term) const {
  for (const PointSeries& s : series) {
    if (s.term == term) return &s;
  }
  return nullptr;
}

PointsFile read_points(const std::string& json_text) {
  const json::object o = parse_json_object(json_text, "points file");
  only(o, {"card", "driver", "date", "command", "series"}, "");
  PointsFile p;
  p.card = text(o, "card", "");
  p.driver = text(o, "driver", "");
  p.date = text(o, "date", "");
  p.command = text(o, "command", "");
  const json::value* series = o.if_contains("series");
  if (series == nullptr || !series->is_array()) fail("", "missing \"series\" array");
  for (std::size_t i = 0; i < series->as_array().size(); ++i) {
    PointSeries s = read_series(series->as_array()[i], i);
    if (p.find(s.term) != nullptr) fail("series '" + s.term + "'", "given twice");
    p.series.push_back(std::move(s));
  }
  return p;
}

std::string write_points(const PointsFile& p) {
  json::array series;
  for (const PointSeries& s : p.series) {
    json::array inputs;
    for (const std::string& in : s.samples.inputs)
      inputs.emplace_back(in);
    json::array points;
    for (std::size_t i = 0; i < s.samples.y.size(); ++i) {
      json::array point;
      for (double x : s.samples.x[i])
        point.emplace_back(x);
      point.emplace_back(s.samples.y[i]);
      points.emplace_back(std::move(point));
    }
    series.push_back({{"term", s.term},
                      {"inputs", std::move(inputs)},
                      {"unit", "us"},
                      {"points", std::move(points)}});
  }
  const json::object o{{"card", p.card},
                       {"driver", p.driver},
                       {"date", p.date},
                       {"command", p.command},
                       {"series", std::move(series)}};
  return json::serialize(o);
}

}  // namespace kvtier::fit
