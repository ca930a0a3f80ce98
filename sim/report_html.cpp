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
};

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
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

// A line chart with a logarithmic x axis (pool slots) and optional vertical marker.
std::string chart(const std::string& title, const std::string& ylabel,
                  const std::vector<Series>& series, double marker_x = 0,
                  const std::string& marker_label = "") {
  const double W = 640, H = 320, L = 70, R = 170, T = 30, B = 45;
  double x0 = 1e300, x1 = 0, y1 = 0;
  for (const auto& s : series) {
    for (double v : s.x) {
      x0 = std::min(x0, v);
      x1 = std::max(x1, v);
    }
    for (double v : s.y)
      y1 = std::max(y1, v);
  }
  if (!(x1 > x0)) x1 = x0 * 2 + 1;
  if (x0 <= 0) x0 = 1;
  if (y1 <= 0) y1 = 1;
  y1 *= 1.08;
  auto px = [&](double x) {
    return L + (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0)) * (W - L - R);
  };
  auto py = [&](double y) { return H - B - y / y1 * (H - T - B); };
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(W) + "' height='" +
                  num(H) + "' font-family='sans-serif' font-size='11'>";
  s +=
      "<text x='" + num(L) + "' y='18' font-size='13' font-weight='bold'>" + esc(title) + "</text>";
  s += "<rect x='" + num(L) + "' y='" + num(T) + "' width='" + num(W - L - R) + "' height='" +
       num(H - T - B) + "' fill='none' stroke='#888'/>";
  for (int i = 0; i <= 4; ++i) {
    const double y = y1 * i / 4;
    s += "<text x='" + num(L - 6) + "' y='" + num(py(y) + 4) + "' text-anchor='end'>" + num(y) +
         "</text><line x1='" + num(L) + "' x2='" + num(W - R) + "' y1='" + num(py(y)) + "' y2='" +
         num(py(y)) + "' stroke='#eee'/>";
  }
  for (int i = 0; i <= 4; ++i) {
    const double x = std::exp(std::log(x0) + (std::log(x1) - std::log(x0)) * i / 4);
    s += "<text x='" + num(px(x)) + "' y='" + num(H - B + 15) + "' text-anchor='middle'>" +
         num(std::round(x)) + "</text>";
  }
  s += "<text x='" + num((L + W - R) / 2) + "' y='" + num(H - 8) +
       "' text-anchor='middle'>pool slots (log scale)</text>";
  s += "<text transform='translate(14," + num((T + H - B) / 2) +
       ") rotate(-90)' text-anchor='middle'>" + esc(ylabel) + "</text>";
  if (marker_x > 0) {
    s += "<line x1='" + num(px(marker_x)) + "' x2='" + num(px(marker_x)) + "' y1='" + num(T) +
         "' y2='" + num(H - B) + "' stroke='#c00' stroke-dasharray='4 3'/><text x='" +
         num(px(marker_x) + 4) + "' y='" + num(T + 12) + "' fill='#c00'>" + esc(marker_label) +
         "</text>";
  }
  int k = 0;
  for (const auto& se : series) {
    std::string pts;
    for (std::size_t i = 0; i < se.x.size(); ++i) {
      pts += num(px(se.x[i])) + "," + num(py(se.y[i])) + " ";
    }
    s += "<polyline fill='none' stroke='" + se.colour + "' stroke-width='2'" +
         (se.dashed ? " stroke-dasharray='6 4'" : "") + " points='" + pts + "'/>";
    for (std::size_t i = 0; i < se.x.size(); ++i) {
      s += "<circle cx='" + num(px(se.x[i])) + "' cy='" + num(py(se.y[i])) + "' r='2.5' fill='" +
           se.colour + "'/>";
    }
    s += "<line x1='" + num(W - R + 10) + "' x2='" + num(W - R + 30) + "' y1='" +
         num(T + 10 + 16 * k) + "' y2='" + num(T + 10 + 16 * k) + "' stroke='" + se.colour +
         "' stroke-width='2'" + (se.dashed ? " stroke-dasharray='6 4'" : "") + "/><text x='" +
         num(W - R + 34) + "' y='" + num(T + 14 + 16 * k) + "'>" + esc(se.name) + "</text>";
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
  h += "<p><b>Recommendation:</b> " + esc(r.recommendation) + "</p><div class='charts'>";
  // Miss ratio curves with the Belady bound.
  std::vector<Series> mrc, tps;
  int k = 0;
  for (const UnitSweep& us : r.units) {
    const std::string c = kColours[k++ % 6];
    Series lru{"LRU " + std::string(to_string(us.unit)), c, {}, {}};
    Series opt{"Belady " + std::string(to_string(us.unit)), c, {}, {}, true};
    Series t{"mirror " + std::string(to_string(us.unit)), c, {}, {}};
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      const double denom = static_cast<double>(std::max<std::int64_t>(1, us.lookups));
      lru.x.push_back(static_cast<double>(us.sizes[i]));
      lru.y.push_back(static_cast<double>(us.lru_misses[i]) / denom);
      if (!us.belady_misses.empty()) {
        opt.x.push_back(static_cast<double>(us.sizes[i]));
        opt.y.push_back(static_cast<double>(us.belady_misses[i]) / denom);
      }
      t.x.push_back(static_cast<double>(us.sizes[i]));
      t.y.push_back(us.points[i].decode_tps);
    }
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
    h += chart("Miss ratio: exact LRU (one pass) and the Belady bound", "miss ratio", mrc);
    h += chart("Decode tokens/s by pool size", "decode tokens/s", tps,
               static_cast<double>(r.units[0].cliff_slots), "cliff");
    // Per-layer hit rate at the recommended size of each unit.
    std::vector<Series> layers;
    k = 0;
    for (const UnitSweep& us : r.units) {
      const std::size_t i =
          us.within_slots != 0
              ? static_cast<std::size_t>(
                    std::find(us.sizes.begin(), us.sizes.end(), us.within_slots) - us.sizes.begin())
              : us.sizes.size() / 2;
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
    h += chart("Hit rate per QSA layer (x: layer index + 1, log)", "hit rate", layers);
  }
  h += "</div><h2>Placements side by side</h2><table><tr><th>placement</th><th>unit</th>"
       "<th>slots</th><th>decode tok/s</th><th>prefill tok/s</th><th>hit rate</th>"
       "<th>LRU misses (MRC)</th><th>Belady misses</th><th>drops</th><th>PCIe H2D use</th></tr>";
  auto row = [&](const std::string& p, const std::string& u, const std::string& slots,
                 const PointSummary& s, const std::string& lru, const std::string& opt) {
    h += "<tr><td>" + p + "</td><td>" + u + "</td><td>" + slots + "</td><td>" + num(s.decode_tps) +
         "</td><td>" + num(s.prefill_tps) + "</td><td>" + num(s.hit_rate) + "</td><td>" + lru +
         "</td><td>" + opt + "</td><td>" + std::to_string(s.drops) + "</td><td>" + num(s.h2d_util) +
         "</td></tr>";
  };
  if (r.has_device) row("device", "-", "-", r.device, "-", "-");
  if (r.has_host) row("host", "-", "-", r.host, "-", "-");
  for (const UnitSweep& us : r.units) {
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      row("mirror", std::string(to_string(us.unit)), std::to_string(us.sizes[i]), us.points[i],
          std::to_string(us.lru_misses[i]),
          us.belady_misses.empty() ? "-" : std::to_string(us.belady_misses[i]));
    }
  }
  h += "</table><p>Generated by kvtier plan. Times come from the cost model of the profile; "
       "see docs/planner.md for what each figure means.</p></body></html>\n";
  return h;
}

}  // namespace kvtier::sim
