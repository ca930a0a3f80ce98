#include "sim/report_parts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvtier::sim::report {

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

double objective_value(const PointSummary& p, Objective o) {
  return o == Objective::prefill ? p.prefill_tps : p.decode_tps;
}

std::pair<double, double> memory_range(const PlanResult& r) {
  double lo = gib(r.ideal.device_bytes), hi = lo;
  auto take = [&](std::int64_t bytes) {
    lo = std::min(lo, gib(bytes));
    hi = std::max(hi, gib(bytes));
  };
  if (r.has_host) take(r.host.device_bytes);
  for (const UnitSweep& us : r.units)
    for (const PointSummary& p : us.points)
      take(p.device_bytes);
  take(r.budget.kv_bytes);
  take(r.budget.card_bytes);
  return {lo, hi};
}

std::optional<svg::TopAxis> slots_axis(const PlanResult& r, double x_lo, double x_hi) {
  for (const UnitSweep& us : r.units) {
    if (us.sizes.size() < 2 || us.sizes.back() == us.sizes.front()) continue;
    const double s0 = static_cast<double>(us.sizes.front());
    const double s1 = static_cast<double>(us.sizes.back());
    const double g0 = gib(us.points.front().device_bytes);
    const double g1 = gib(us.points.back().device_bytes);
    const double per_slot = (g1 - g0) / (s1 - s0);
    if (!(per_slot > 0)) continue;
    const double fixed = g0 - per_slot * s0;
    svg::TopAxis a;
    a.label = "pool slots (" + std::string(to_string(us.unit)) + " unit; per layer)";
    // From half the smallest size swept: smaller pools hold not even one batch's selection.
    a.lo = std::max({1.0, s0 / 2, (x_lo - fixed) / per_slot});
    a.hi = (x_hi - fixed) / per_slot;
    a.to_x = [fixed, per_slot](double slots) { return fixed + per_slot * slots; };
    if (a.hi > a.lo) return a;
  }
  return std::nullopt;
}

std::vector<svg::VLine> budget_lines(const PlanResult& r) {
  char b[96];
  const double card = gib(r.budget.card_bytes), kv = gib(r.budget.kv_bytes);
  if (r.budget.kv_bytes == r.budget.card_bytes) {
    std::snprintf(b, sizeof b, "KV budget = card, %.3g GiB", card);
    return {{card, b, "#b35900"}};
  }
  std::vector<svg::VLine> v;
  std::snprintf(b, sizeof b, "KV budget %.3g GiB", kv);
  v.push_back({kv, b, "#b35900"});
  std::snprintf(b, sizeof b, "card %.3g GiB", card);
  v.push_back({card, b, "#555", true});
  return v;
}

std::vector<svg::Band> budget_bands(const PlanResult& r, double x_hi) {
  // Sizes that drop pages, merged over the units: from just below the first such size to
  // half way (geometrically) to the next size that drops nothing.
  std::vector<std::pair<double, double>> drops;
  for (const UnitSweep& us : r.units) {
    for (std::size_t i = 0; i < us.points.size(); ++i) {
      if (us.points[i].drops == 0) continue;
      const double x = gib(us.points[i].device_bytes);
      const double lo = i > 0 ? std::sqrt(x * gib(us.points[i - 1].device_bytes)) : x / 1.04;
      const double hi =
          i + 1 < us.points.size() ? std::sqrt(x * gib(us.points[i + 1].device_bytes)) : x * 1.04;
      drops.emplace_back(lo, hi);
    }
  }
  std::sort(drops.begin(), drops.end());
  std::vector<svg::Band> out;
  for (const auto& [lo, hi] : drops) {
    if (!out.empty() && lo <= out.back().x1) {
      out.back().x1 = std::max(out.back().x1, hi);
    } else {
      out.push_back({lo, hi, "rgba(90,90,90,0.16)", ""});
    }
  }
  if (!out.empty()) out.front().label = "sizes that drop pages (hollow)";
  if (r.budget.kv_bytes > 0)
    out.push_back({gib(r.budget.kv_bytes), x_hi * 2, "rgba(214,39,40,0.07)",
                   r.budget.kv_bytes < r.budget.card_bytes ? "over the KV budget"
                                                           : "over the KV budget (the card)"});
  return out;
}

svg::Chart memory_chart(const PlanResult& r, const std::string& title, const std::string& ylabel,
                        const svg::TopAxis* top) {
  const auto [lo, hi] = memory_range(r);
  svg::Chart c;
  c.title = title;
  c.y_label = ylabel;
  c.x_label = "device memory, GiB (log scale): pool, staging, selection and table buffers";
  c.log_x = true;
  c.x_min = lo;
  c.x_max = hi;
  c.vlines = budget_lines(r);
  c.bands = budget_bands(r, hi);
  c.top = top;
  return c;
}

}  // namespace kvtier::sim::report
