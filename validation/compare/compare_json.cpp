#include "validation/compare/compare_json.hpp"

#include <boost/json.hpp>

namespace kvtier::validation {
namespace {

namespace json = boost::json;

json::value stats(const ErrorStats& s) {
  if (s.forwards == 0) return nullptr;
  return json::object{{"forwards", s.forwards},         {"median_abs_error", s.median_abs},
                      {"p95_abs_error", s.p95_abs},     {"max_abs_error", s.max_abs},
                      {"worst_error", s.worst},         {"median_error", s.median},
                      {"gpu_total_us", s.gpu_total_us}, {"sim_total_us", s.sim_total_us},
                      {"total_error", s.total}};
}

}  // namespace

std::string comparison_to_json(const Comparison& c) {
  json::array pairs;
  for (const PairComparison& p : c.pairs) {
    json::array fw;
    for (const ForwardError& f : p.forwards) {
      fw.push_back({{"forward", f.forward},
                    {"gpu_us", f.gpu_us},
                    {"sim_us", f.sim_us},
                    {"decode", f.decode},
                    {"error", f.error()}});
    }
    pairs.push_back({{"label", p.label},
                     {"placement", p.placement},
                     {"all", stats(p.all)},
                     {"decode", stats(p.decode)},
                     {"prefill", stats(p.prefill)},
                     {"counters",
                      {{"exact", p.counters.exact()},
                       {"hits_differ", p.counters.hits_differ},
                       {"misses_differ", p.counters.misses_differ},
                       {"evictions_differ", p.counters.evictions_differ},
                       {"first_forward", p.counters.first_forward}}},
                     {"forwards", std::move(fw)}});
  }
  auto summary = [&](const PlacementSummary& s) -> json::value {
    return {{"placement", s.placement},    {"pairs", s.pairs},
            {"all", stats(s.all)},         {"decode", stats(s.decode)},
            {"prefill", stats(s.prefill)}, {"counters_exact", s.counters_exact}};
  };
  json::array placements;
  for (const PlacementSummary& s : c.placements)
    placements.push_back(summary(s));
  const json::object o{{"error", "(sim - gpu) / gpu, per forward; fractions"},
                       {"placements", std::move(placements)},
                       {"pooled", summary(c.pooled)},
                       {"pairs", std::move(pairs)}};
  return json::serialize(o);
}

}  // namespace kvtier::validation
