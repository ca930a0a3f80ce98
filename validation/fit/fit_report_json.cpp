#include "validation/fit/fit_report_json.hpp"

#include <boost/json.hpp>

namespace kvtier::fit {
namespace {

namespace json = boost::json;

json::object quality_json(const FitQuality& q) {
  return {{"r2", q.r2},
          {"rms_us", q.rms},
          {"worst_residual_us", q.worst_abs},
          {"worst_residual_rel", q.worst_abs_rel},
          {"worst_residual_at", q.worst_abs_at},
          {"worst_rel", q.worst_rel},
          {"worst_rel_at", q.worst_rel_at}};
}

json::array strings(const std::vector<std::string>& v) {
  json::array a;
  for (const std::string& s : v)
    a.emplace_back(s);
  return a;
}

json::object series_json(const SeriesFit& s) {
  json::array slopes, fields, unpriced;
  for (double x : s.linear.slopes)
    slopes.emplace_back(x);
  for (const FieldFit& f : s.fields)
    fields.push_back(
        {{"field", f.field}, {"value", f.value}, {"was", f.base_value}, {"source", f.source}});
  for (const UnpricedPart& u : s.unpriced)
    unpriced.push_back({{"coefficient", u.coefficient}, {"value", u.value}, {"note", u.note}});
  json::object o{{"term", s.term},
                 {"inputs", strings(s.inputs)},
                 {"points", s.points},
                 {"linear",
                  {{"intercept_us", s.linear.intercept},
                   {"slopes_us", std::move(slopes)},
                   {"quality", quality_json(s.linear.quality)}}},
                 {"fields", std::move(fields)},
                 {"unpriced", std::move(unpriced)},
                 {"notes", strings(s.notes)}};
  if (s.knee) {
    json::array other;
    for (double x : s.knee->other_slopes)
      other.emplace_back(x);
    o["knee"] = {{"knee", s.knee->knee},
                 {"intercept_us", s.knee->intercept},
                 {"slope_below_us", s.knee->slope_below},
                 {"slope_above_us", s.knee->slope_above},
                 {"other_slopes_us", std::move(other)},
                 {"quality", quality_json(s.knee->quality)}};
  } else {
    o["knee"] = nullptr;
  }
  return o;
}

}  // namespace

json::object fit_report_to_json(const FitReport& r) {
  json::array series;
  for (const SeriesFit& s : r.series)
    series.push_back(series_json(s));
  return {{"card", r.card},
          {"driver", r.driver},
          {"date", r.date},
          {"command", r.command},
          {"series", std::move(series)},
          {"kept", strings(r.kept)},
          {"excluded", strings(r.excluded)}};
}

}  // namespace kvtier::fit
