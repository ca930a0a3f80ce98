// The planner's self-contained HTML report: inline SVG charts, no scripts, no external files.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/planner.hpp"

namespace kvtier::sim {
namespace {

struct Series {
  std::string name;
  std::string colour;
  std::vector<double> x, y;
  bool dashed = false;
  bool dotted = false;  // a third style where one colour carries three lines (the miss chart)
};

std::string dash_of(const Series& se) {
  return se.dashed ? " stroke-dasharray='6 4'" : se.dotted ? " stroke-dasharray='2 3'" : "";
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// Axis labels: whole numbers with thousands separators, small values with 3 significant
// digits, ratios as percentages.
std::string tick(double v, bool percent) {
  char b[32];
  if (percent) {
    std::snprintf(b, sizeof b, "%.3g %%", v * 100);
    return b;
  }
  if (std::fabs(v) >= 1000 || v == std::round(v)) {
    std::string d = std::to_string(std::llround(v));
    for (int i = static_cast<int>(d.size()) - 3; i > (d[0] == '-' ? 1 : 0); i -= 3)
      d.insert(static_cast<std::size_t>(i), ",");
    return d;
  }
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

struct Marker {
  double x;
  std::string label;
  std::string colour;
};

struct Axes {
  bool log_x = true;
  std::string x_label = "pool slots (log scale)";
  bool percent_y = false;
  bool unit_top = false;  // y axis ends at 1 (hit rates) and starts near the lowest value
};

// A line chart over pool slots (log x) or layers (linear x), with vertical markers.
std::string chart(const std::string& title, const std::string& ylabel,
                  const std::vector<Series>& series, const std::vector<Marker>& markers = {},
                  const Axes& ax = {}) {
  const double W = 640, H = 320, L = 70, R = 170, T = 30, B = 45;
  double x0 = 1e300, x1 = 0, y0 = 0, y1 = 0, ymin = 1e300;
  for (const auto& s : series) {
    for (double v : s.x) {
      x0 = std::min(x0, v);
      x1 = std::max(x1, v);
    }
    for (double v : s.y) {
      y1 = std::max(y1, v);
      ymin = std::min(ymin, v);
    }
  }
  if (x0 <= 0) x0 = 1;
  if (!(x1 > x0)) x1 = x0 * 2 + 1;
  if (y1 <= 0) y1 = 1;
  if (ax.unit_top) {
    y1 = 1;
    y0 = std::clamp(std::floor(ymin * 20 - 1) / 20, 0.0, 0.95);
  } else {
    y1 *= 1.08;
  }
  auto fx = [&](double x) { return ax.log_x ? std::log(x) : x; };
  auto px = [&](double x) { return L + (fx(x) - fx(x0)) / (fx(x1) - fx(x0)) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(W) + "' height='" +
                  num(H) + "' font-family='sans-serif' font-size='11'>";
  s +=
      "<text x='" + num(L) + "' y='18' font-size='13' font-weight='bold'>" + esc(title) + "</text>";
  s += "<rect x='" + num(L) + "' y='" + num(T) + "' width='" + num(W - L - R) + "' height='" +
       num(H - T - B) + "' fill='none' stroke='#888'/>";
  for (int i = 0; i <= 4; ++i) {
    const double y = y0 + (y1 - y0) * i / 4;
    s += "<text x='" + num(L - 6) + "' y='" + num(py(y) + 4) + "' text-anchor='end'>" +
         tick(y, ax.percent_y) + "</text><line x1='" + num(L) + "' x2='" + num(W - R) + "' y1='" +
         num(py(y)) + "' y2='" + num(py(y)) + "' stroke='#eee'/>";
  }
  if (ax.log_x) {
    for (int i = 0; i <= 4; ++i) {
      const double x = std::exp(std::log(x0) + (std::log(x1) - std::log(x0)) * i / 4);
      s += "<text x='" + num(px(x)) + "' y='" + num(H - B + 15) + "' text-anchor='middle'>" +
           tick(std::round(x), false) + "</text>";
    }
  } else {
    for (double x = x0; x <= x1 + 0.5; x += 1) {
      s += "<text x='" + num(px(x)) + "' y='" + num(H - B + 15) + "' text-anchor='middle'>" +
           tick(x, false) + "</text>";
    }
  }
  s += "<text x='" + num((L + W - R) / 2) + "' y='" + num(H - 8) + "' text-anchor='middle'>" +
       esc(ax.x_label) + "</text>";
  s += "<text transform='translate(14," + num((T + H - B) / 2) +
       ") rotate(-90)' text-anchor='middle'>" + esc(ylabel) + "</text>";
  int m = 0;
  for (const Marker& mk : markers) {
    if (mk.x <= 0) continue;
    s += "<line x1='" + num(px(mk.x)) + "' x2='" + num(px(mk.x)) + "' y1='" + num(T) + "' y2='" +
         num(H - B) + "' stroke='" + mk.colour + "' stroke-dasharray='4 3'/><text x='" +
         num(px(mk.x) + 4) + "' y='" + num(H - B - 8 - 13 * m) + "' fill='" + mk.colour + "'>" +
         esc(mk.label) + "</text>";
    ++m;
  }
  int k = 0;
  for (const auto& se : series) {
    std::string pts;
    for (std::size_t i = 0; i < se.x.size(); ++i) {
      pts += num(px(se.x[i])) + "," + num(py(se.y[i])) + " ";
    }
    s += "<polyline fill='none' stroke='" + se.colour + "' stroke-width='2'" + dash_of(se) +
         " points='" + pts + "'/>";
    for (std::size_t i = 0; i < se.x.size(); ++i) {
      s += "<circle cx='" + num(px(se.x[i])) + "' cy='" + num(py(se.y[i])) + "' r='2.5' fill='" +
           se.colour + "'/>";
    }
    s += "<line x1='" + num(W - R + 10) + "' x2='" + num(W - R + 30) + "' y1='" +
         num(T + 10 + 16 * k) + "' y2='" + num(T + 10 + 16 * k) + "' stroke='" + se.colour +
         "' stroke-width='2'" + dash_of(se) + "/><text x='" + num(W - R + 34) + "' y='" +
         num(T + 14 + 16 * k) + "'>" + esc(se.name) + "</text>";
    ++k;
  }
  return s + "</svg>";
}

const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf"};

}  // namespace

std::string plan_to_html(const PlanResult& r) {
  std::string h =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>kvtier plan</title><style>"
      "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
      ".charts{display:flex;flex-wrap:wrap;gap:12px}</style></head><body>";
  h += "<h1>kvtier capacity plan</h1><p>trace <b>" + esc(r.trace) + "</b>, profile <b>" +
       esc(r.profile) + "</b>, " + std::string(to_string(r.dtype)) + ", mirror policy " +
       std::string(to_string(r.policy)) + "; " + std::to_string(r.stats.forwards) + " forwards, " +
       std::to_string(r.stats.requests) + " requests, " + std::to_string(r.stats.decode_tokens) +
       " decode and " + std::to_string(r.stats.prefill_tokens) +
       " prefill tokens. Smallest pool: " + std::to_string(r.min_slots) + " slots.</p>";
  h += "<p><b>Profile " + esc(r.profile) + ":</b> " + esc(r.trust) + ".</p>";
  h += "<p><b>Rest of the model</b> (the non-QSA layers, not simulated): " +
       fixed(r.rest.forward_us, 1) + " us per forward + " + fixed(r.rest.token_us, 3) +
       " us per token, " + fixed(r.rest_us / 1e3, 1) + " ms over the trace; " + esc(r.rest.label) +
       ". Tokens/s include it; the QSA stack column does not.</p>";
  h += "<p><b>Recommendation:</b> " + esc(r.recommendation) + "</p><ul>";
  auto slots_or_none = [](std::int64_t v) {
    return v != 0 ? tick(static_cast<double>(v), false) + " slots" : std::string("none");
  };
  for (const UnitSweep& us : r.units) {
    h += "<li>mirror, unit " + std::string(to_string(us.unit)) + ": cliff at " +
         slots_or_none(us.cliff_slots) + "; within " + fixed(r.within * 100, 0) +
         " % of all-resident decode speed: " + slots_or_none(us.within_slots) + "; within " +
         fixed(r.chosen * 100, 0) + " %: " + slots_or_none(us.chosen_slots) +
         (us.belady_note.empty() ? "" : "; Belady " + esc(us.belady_note)) + "</li>";
  }
  h += "</ul><div class='charts'>";
  // Misses by pool size: the core's own (simulated, what the decisions use) solid; the
  // classic-LRU curve (one-pass MRC, no step ties, untruncated) dashed and the Belady bound
  // dotted beside it. One denominator for all three, the trace's untruncated lookups, so the
  // lines compare as counts.
  std::vector<Series> mrc, tps;
  int k = 0;
  for (const UnitSweep& us : r.units) {
    const std::string c = kColours[k++ % 6];
    const std::string unit(to_string(us.unit));
    Series core{"core (sim) " + unit, c, {}, {}};
    Series lru{"classic LRU " + unit, c, {}, {}, true};
    Series opt{"Belady " + unit, c, {}, {}, false, true};
    Series t{"mirror " + unit, c, {}, {}};
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      const double denom = static_cast<double>(std::max<std::int64_t>(1, us.lookups));
      core.x.push_back(static_cast<double>(us.sizes[i]));
      core.y.push_back(static_cast<double>(us.points[i].misses) / denom);
      lru.x.push_back(static_cast<double>(us.sizes[i]));
      lru.y.push_back(static_cast<double>(us.classic_lru_misses[i]) / denom);
      if (!us.belady_misses.empty() && us.belady_misses[i] != kNoBelady) {
        opt.x.push_back(static_cast<double>(us.sizes[i]));
        opt.y.push_back(static_cast<double>(us.belady_misses[i]) / denom);
      }
      t.x.push_back(static_cast<double>(us.sizes[i]));
      t.y.push_back(us.points[i].decode_tps);
    }
    mrc.push_back(core);
    mrc.push_back(lru);
    if (!opt.x.empty()) mrc.push_back(opt);
    tps.push_back(t);
  }
  if (!r.units.empty()) {
    const double lo = static_cast<double>(r.units[0].sizes.front());
    const double hi = static_cast<double>(r.units[0].sizes.back());
    if (r.has_device)
      tps.push_back({"device", "#444", {lo, hi}, {r.device.decode_tps, r.device.decode_tps}, true});
    if (r.has_host)
      tps.push_back(
          {"host (in place)", "#d62728", {lo, hi}, {r.host.decode_tps, r.host.decode_tps}, true});
    Axes ratio;
    ratio.percent_y = true;
    h += chart("Misses: the core (simulated), classic LRU (MRC), Belady", "misses / lookups", mrc,
               {}, ratio);
    std::vector<Marker> cliffs;
    k = 0;
    for (const UnitSweep& us : r.units) {
      cliffs.push_back({static_cast<double>(us.cliff_slots),
                        "cliff " + std::string(to_string(us.unit)) + " " +
                            tick(static_cast<double>(us.cliff_slots), false),
                        kColours[k++ % 6]});
    }
    h += chart("Decode tokens/s by pool size", "decode tokens/s", tps, cliffs);
    // Per-layer hit rate at the recommended size of each unit.
    std::vector<Series> layers;
    k = 0;
    for (const UnitSweep& us : r.units) {
      const std::size_t i =
          static_cast<std::size_t>(std::find(us.sizes.begin(), us.sizes.end(),
                                             us.within_slots != 0   ? us.within_slots
                                             : us.chosen_slots != 0 ? us.chosen_slots
                                                                    : us.cliff_slots) -
                                   us.sizes.begin()) %
          us.sizes.size();
      Series s{std::string(to_string(us.unit)) + " @ " + std::to_string(us.sizes[i]),
               kColours[k++ % 6],
               {},
               {}};
      for (std::size_t l = 0; l < us.points[i].layer_hit_rate.size(); ++l) {
        s.x.push_back(static_cast<double>(l + 1));
        s.y.push_back(us.points[i].layer_hit_rate[l]);
      }
      layers.push_back(s);
    }
    Axes per_layer;
    per_layer.log_x = false;
    per_layer.x_label = "QSA layer (1 = first)";
    per_layer.percent_y = true;
    per_layer.unit_top = true;
    h += chart("Hit rate per QSA layer (simulated, at the size named)", "hit rate", layers, {},
               per_layer);
  }
  h += "</div><h2>Placements side by side</h2><table><tr><th>placement</th><th>unit</th>"
       "<th>slots</th><th>decode tok/s</th><th>prefill tok/s</th><th>QSA stack ms</th>"
       "<th>hit rate</th>"
       "<th>core misses</th><th>classic-LRU misses (MRC)</th><th>Belady "
       "misses</th><th>drops</th><th>PCIe H2D use</th>"
       "<th>device memory</th></tr>";
  auto row = [&](const std::string& p, const std::string& u, const std::string& slots,
                 const PointSummary& s, const std::string& lru, const std::string& opt) {
    h += "<tr><td>" + p + "</td><td>" + u + "</td><td>" + slots + "</td><td>" +
         fixed(s.decode_tps, 1) + "</td><td>" + fixed(s.prefill_tps, 1) + "</td><td>" +
         fixed(s.qsa_us / 1e3, 2) + "</td><td>" + fixed(s.hit_rate * 100, 2) + " %</td><td>" +
         (s.has_lookups ? tick(static_cast<double>(s.misses), false) : "-") + "</td><td>" + lru +
         "</td><td>" + opt + "</td><td>" + tick(static_cast<double>(s.drops), false) + "</td><td>" +
         fixed(s.h2d_util * 100, 1) + " %</td><td>" +
         fixed(static_cast<double>(s.device_bytes) / (1024.0 * 1024.0 * 1024.0), 2) + " GiB" +
         (s.fits_device ? "" : " (does not fit)") + "</td></tr>";
  };
  if (r.has_device) row("device", "-", "-", r.device, "-", "-");
  if (r.has_host) row("host", "-", "-", r.host, "-", "-");
  for (const UnitSweep& us : r.units) {
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      row("mirror", std::string(to_string(us.unit)), tick(static_cast<double>(us.sizes[i]), false),
          us.points[i], tick(static_cast<double>(us.classic_lru_misses[i]), false),
          us.belady_misses.empty() || us.belady_misses[i] == kNoBelady
              ? "-"
              : tick(static_cast<double>(us.belady_misses[i]), false));
    }
  }
  h += "</table><p>Generated by kvtier plan. Times come from the cost model of the profile; "
       "see docs/planner.md for what each figure means.</p></body></html>\n";
  return h;
}

}  // namespace kvtier::sim
