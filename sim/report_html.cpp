// The planner's self-contained HTML report: inline SVG charts, no scripts, no external files.
// It shows the decision first: every configuration by the device memory it needs (pool slots
// on a second axis), the budget B and the card as lines, the sizes that drop pages shaded, the
// recommended and the within-5 % sizes marked; then the miss curves, per-layer hit rates, the
// per-request latency section and every figure in a table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/planner.hpp"
#include "sim/report_parts.hpp"
#include "sim/report_svg.hpp"

namespace kvtier::sim {
namespace {

using report::gib;
using svg::esc;
using svg::tick_label;

const char* kUnitColours[] = {"#1f77b4", "#ff7f0e"};

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

const PointSummary* point_of(const PlanResult& r, const ConfigFigures& c) {
  if (c.placement == Placement::device) return &r.ideal;
  if (c.placement == Placement::host) return r.has_host ? &r.host : nullptr;
  for (const UnitSweep& us : r.units) {
    if (us.unit != c.unit) continue;
    for (std::size_t i = 0; i < us.sizes.size(); ++i)
      if (us.sizes[i] == c.slots) return &us.points[i];
  }
  return nullptr;
}

// The smallest pool within --within of the recommendation: at the chosen unit when a mirror
// is recommended, else the least device memory over the units.
const MirrorSizes* within_size(const PlanResult& r) {
  const MirrorSizes* best = nullptr;
  for (const MirrorSizes& m : r.decision.mirror) {
    if (m.within_slots == 0) continue;
    if (r.decision.chosen.placement == Placement::mirror && m.unit != r.decision.chosen.unit)
      continue;
    if (!best || m.within_device_bytes < best->within_device_bytes) best = &m;
  }
  return best;
}

// The decision: the objective's figure of every configuration by the device memory it needs.
std::string decision_chart(const PlanResult& r, const svg::TopAxis* top) {
  const Objective o = r.decision.objective.kind;
  const std::string what = o == Objective::prefill ? "prefill tokens/s" : "decode tokens/s";
  svg::Chart c = report::memory_chart(r, "The decision: " + what + " by device memory", what, top);
  c.width = 1000;
  c.height = 420;
  int k = 0;
  for (const UnitSweep& us : r.units) {
    svg::Series s{"mirror " + std::string(to_string(us.unit)), kUnitColours[k++ % 2], {}, {}};
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      s.x.push_back(gib(us.points[i].device_bytes));
      s.y.push_back(report::objective_value(us.points[i], o));
      s.hollow.push_back(us.points[i].drops != 0);
    }
    c.series.push_back(s);
  }
  svg::Series dev{
      "device (ideal)", "#222", {gib(r.ideal.device_bytes)}, {report::objective_value(r.ideal, o)}};
  dev.line = false;
  dev.square = true;
  dev.marker_r = 4;
  c.series.push_back(dev);
  if (r.has_host) {
    svg::Series host{"host (in place)",
                     "#d62728",
                     {gib(r.host.device_bytes)},
                     {report::objective_value(r.host, o)}};
    host.line = false;
    host.square = true;
    host.marker_r = 4;
    c.series.push_back(host);
  }
  if (r.decision.found) {
    if (const PointSummary* p = point_of(r, r.decision.chosen))
      c.callouts.push_back(
          {gib(p->device_bytes), report::objective_value(*p, o), "recommended", "#2ca02c"});
  }
  if (const MirrorSizes* m = within_size(r)) {
    const bool same = r.decision.chosen.placement == Placement::mirror &&
                      r.decision.chosen.unit == m->unit &&
                      r.decision.chosen.slots == m->within_slots;
    ConfigFigures at;
    at.placement = Placement::mirror;
    at.unit = m->unit;
    at.slots = m->within_slots;
    const PointSummary* p = point_of(r, at);
    if (p && !same)
      c.callouts.push_back({gib(p->device_bytes), report::objective_value(*p, o),
                            "within " + fixed(r.within * 100, 0) + " %: " +
                                tick_label(static_cast<double>(m->within_slots)) + " slots",
                            "#1f5fbf"});
  }
  return svg::render(c);
}

// Miss ratio by device memory: the core's simulated misses (solid, what the decisions use),
// the one-pass classic-LRU curve and the Belady bound (dashed references: they admit every
// row whole, with no step ties, truncation or bypass).
std::string miss_chart(const PlanResult& r, const svg::TopAxis* top) {
  svg::Chart c = report::memory_chart(
      r, "Miss ratio: the core's (simulated), classic LRU (MRC) and the Belady bound", "miss ratio",
      top);
  c.percent_y = true;
  c.width = 1000;
  c.height = 340;
  c.bands.clear();  // the decision chart shades; here the curves alone
  int k = 0;
  for (const UnitSweep& us : r.units) {
    const std::string colour = kUnitColours[k++ % 2];
    const double denom = static_cast<double>(std::max<std::int64_t>(1, us.lookups));
    svg::Series core{"core (sim) " + std::string(to_string(us.unit)), colour, {}, {}};
    svg::Series lru{"classic LRU " + std::string(to_string(us.unit)), colour, {}, {}};
    svg::Series opt{"Belady " + std::string(to_string(us.unit)), colour, {}, {}};
    lru.dashed = true;
    opt.dashed = true;
    opt.square = true;
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      const double x = gib(us.points[i].device_bytes);
      core.x.push_back(x);
      core.y.push_back(static_cast<double>(us.points[i].misses) / denom);
      lru.x.push_back(x);
      lru.y.push_back(static_cast<double>(us.classic_lru_misses[i]) / denom);
      if (!us.belady_misses.empty() && us.belady_misses[i] != kNoBelady) {
        opt.x.push_back(x);
        opt.y.push_back(static_cast<double>(us.belady_misses[i]) / denom);
      }
    }
    c.series.push_back(core);
    c.series.push_back(lru);
    if (!opt.x.empty()) c.series.push_back(opt);
  }
  return svg::render(c);
}

// Per-layer hit rate at each unit's within size (else its chosen size, else its cliff).
std::string layer_chart(const PlanResult& r) {
  svg::Chart c;
  c.title = "Hit rate per QSA layer (simulated, at the size named)";
  c.y_label = "hit rate";
  c.x_label = "QSA layer (1 = first)";
  c.log_x = false;
  c.integer_x = true;
  c.percent_y = true;
  c.y_top = 1;
  c.y_from_zero = false;
  c.width = 640;
  int k = 0;
  for (const UnitSweep& us : r.units) {
    const std::int64_t want = us.within_slots != 0   ? us.within_slots
                              : us.chosen_slots != 0 ? us.chosen_slots
                                                     : us.cliff_slots;
    const std::size_t i =
        static_cast<std::size_t>(std::find(us.sizes.begin(), us.sizes.end(), want) -
                                 us.sizes.begin()) %
        us.sizes.size();
    svg::Series s{
        std::string(to_string(us.unit)) + " @ " + tick_label(static_cast<double>(us.sizes[i])),
        kUnitColours[k++ % 2],
        {},
        {}};
    for (std::size_t l = 0; l < us.points[i].layer_hit_rate.size(); ++l) {
      s.x.push_back(static_cast<double>(l + 1));
      s.y.push_back(us.points[i].layer_hit_rate[l]);
    }
    c.series.push_back(s);
  }
  return svg::render(c);
}

std::string table(const PlanResult& r) {
  std::string h =
      "<h2>Every configuration simulated</h2><p>The recommended row is green; rows that drop "
      "selected pages are grey; device memory over the KV budget is red.</p><table><tr>"
      "<th>placement</th><th>unit</th><th>slots</th><th>decode tok/s</th><th>prefill tok/s</th>"
      "<th>ms per decode token</th><th>QSA stack ms</th><th>hit rate</th><th>core "
      "misses</th><th>classic-LRU misses (MRC)</th><th>Belady misses</th><th>drops</th><th>PCIe "
      "H2D use</th><th>device "
      "memory</th><th>host memory</th></tr>";
  const ConfigFigures& pick = r.decision.chosen;
  auto row = [&](Placement p, const std::string& u, std::int64_t slots, const PointSummary& s,
                 const std::string& lru, const std::string& opt) {
    const bool chosen =
        r.decision.found && pick.placement == p &&
        (p != Placement::mirror || (pick.unit == (u == "layer" ? ResidencyUnit::layer_page
                                                               : ResidencyUnit::all_layers_page) &&
                                    pick.slots == slots));
    const std::string style = chosen        ? " style='background:#dff3df;font-weight:bold'"
                              : s.drops > 0 ? " style='color:#888'"
                                            : "";
    h += "<tr" + style + "><td>" + std::string(to_string(p)) + "</td><td>" + u + "</td><td>" +
         (p == Placement::mirror ? tick_label(static_cast<double>(slots)) : "-") + "</td><td>" +
         fixed(s.decode_tps, 1) + "</td><td>" + fixed(s.prefill_tps, 1) + "</td><td>" +
         fixed(tpot_ms(s), 2) + "</td><td>" + fixed(s.qsa_us / 1e3, 2) + "</td><td>" +
         (s.has_lookups ? fixed(s.hit_rate * 100, 2) + " %" : "n/a") + "</td><td>" +
         (s.has_lookups ? tick_label(static_cast<double>(s.misses)) : "-") + "</td><td>" + lru +
         "</td><td>" + opt + "</td><td>" + tick_label(static_cast<double>(s.drops)) + "</td><td>" +
         fixed(s.h2d_util * 100, 1) + " %</td><td" + (s.fits_device ? "" : " style='color:#c00'") +
         ">" + fixed(gib(s.device_bytes), 2) + " GiB" + (s.fits_device ? "" : " (over budget)") +
         "</td><td>" + fixed(gib(s.host_bytes), 2) + " GiB</td></tr>";
  };
  row(Placement::device, r.has_device ? "-" : "(ideal)", 0, r.ideal, "-", "-");
  if (r.has_host) row(Placement::host, "-", 0, r.host, "-", "-");
  for (const UnitSweep& us : r.units) {
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      row(Placement::mirror, std::string(to_string(us.unit)), us.sizes[i], us.points[i],
          tick_label(static_cast<double>(us.classic_lru_misses[i])),
          us.belady_misses.empty() || us.belady_misses[i] == kNoBelady
              ? "-"
              : tick_label(static_cast<double>(us.belady_misses[i])));
    }
  }
  return h + "</table>";
}

}  // namespace

std::string plan_to_html(const PlanResult& r) {
  std::string h =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>kvtier plan</title><style>"
      "body{font-family:sans-serif;margin:24px;color:#222;max-width:1320px}"
      "table{border-collapse:collapse;font-size:13px}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}"
      "th{background:#f4f4f4;white-space:normal}"
      ".decision{border-left:5px solid #2ca02c;background:#f3faf3;padding:8px 14px;margin:12px 0}"
      ".codes{color:#666;font-size:12px}.charts{display:flex;flex-wrap:wrap;gap:12px}"
      "</style></head><body>";
  h += "<h1>kvtier capacity plan</h1><p>trace <b>" + esc(r.trace) + "</b>, profile <b>" +
       esc(r.profile) + "</b>, " + std::string(to_string(r.dtype)) + ", mirror policy " +
       std::string(to_string(r.policy)) + "; " + std::to_string(r.stats.forwards) + " forwards, " +
       std::to_string(r.stats.requests) + " requests, " + std::to_string(r.stats.decode_tokens) +
       " decode and " + std::to_string(r.stats.prefill_tokens) +
       " prefill tokens. Smallest pool: " + tick_label(static_cast<double>(r.min_slots)) +
       " slots.</p>";
  h += "<p><b>Device memory:</b> " + esc(describe(r.budget)) +
       (r.host_capacity_bytes > 0 ? "; host RAM " + fixed(gib(r.host_capacity_bytes), 1) + " GiB"
                                  : "") +
       ".</p>";
  const Recommendation& d = r.decision;
  h += "<div class='decision'><p><b>Recommendation</b> (objective: " +
       std::string(to_string(d.objective.kind)) +
       (d.objective.kind == Objective::tpot
            ? ", TPOT target " + fixed(d.objective.tpot_target_ms, 2) + " ms"
            : "") +
       "): " + esc(d.sentence) + "</p><p class='codes'>reasons: ";
  for (std::size_t i = 0; i < d.reasons.size(); ++i)
    h += (i ? ", " : "") + esc(d.reasons[i]);
  h += "</p></div>";
  h += "<p><b>Profile " + esc(r.profile) + ":</b> " + esc(r.trust) + ".</p>";
  h += "<p><b>Rest of the model</b> (the non-QSA layers, not simulated): " +
       fixed(r.rest.forward_us, 1) + " us per forward + " + fixed(r.rest.token_us, 3) +
       " us per token, " + fixed(r.rest_us / 1e3, 1) + " ms over the trace; " + esc(r.rest.label) +
       ". Tokens/s include it; the QSA stack column does not.</p><ul>";
  auto slots_or_none = [](std::int64_t v) {
    return v != 0 ? tick_label(static_cast<double>(v)) + " slots" : std::string("none");
  };
  for (const UnitSweep& us : r.units) {
    h += "<li>mirror, unit " + std::string(to_string(us.unit)) + ": cliff at " +
         slots_or_none(us.cliff_slots) + "; within " + fixed(r.within * 100, 0) +
         " % of the recommendation: " + slots_or_none(us.within_slots) + "; within " +
         fixed(r.chosen * 100, 0) + " %: " + slots_or_none(us.chosen_slots) +
         (us.belady_note.empty() ? "" : "; Belady " + esc(us.belady_note)) + "</li>";
  }
  h += "</ul>";
  const auto [lo, hi] = report::memory_range(r);
  const std::optional<svg::TopAxis> top = report::slots_axis(r, lo / 1.15, hi * 1.15);
  const svg::TopAxis* t = top ? &*top : nullptr;
  h += "<div class='charts'>" + decision_chart(r, t);
  if (!r.units.empty()) h += miss_chart(r, t) + layer_chart(r);
  h += "</div>" + report::latency_section(r, t) + table(r);
  h += "<p>Generated by kvtier plan. Times come from the cost model of the profile; device "
       "memory from the core's memory budget; see docs/planner.md for what each figure "
       "means.</p></body></html>\n";
  return h;
}

}  // namespace kvtier::sim
