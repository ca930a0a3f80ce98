#include "validation/compare/compare_html.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvtier::validation {
namespace {

std::string num(const char* format, double v) {
  char b[48];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') {
      o += "&lt;";
    } else if (c == '>') {
      o += "&gt;";
    } else if (c == '&') {
      o += "&amp;";
    } else if (c == '"') {
      o += "&quot;";
    } else {
      o += c;
    }
  }
  return o;
}

std::string colour(const std::string& placement) {
  if (placement == "device") return "#1f77b4";
  if (placement == "mirror") return "#2ca02c";
  if (placement == "host") return "#d62728";
  return "#9467bd";
}

std::string pct(double v) {
  return num("%+.2f %%", 100 * v);
}
std::string apct(double v) {
  return num("%.2f %%", 100 * v);
}

// Log-log: measured us on x, predicted us on y.
std::string scatter(const Comparison& c) {
  double lo = INFINITY, hi = 0;
  for (const PairComparison& p : c.pairs) {
    for (const ForwardError& f : p.forwards) {
      lo = std::min({lo, f.gpu_us, std::max(f.sim_us, 1e-3)});
      hi = std::max({hi, f.gpu_us, f.sim_us});
    }
  }
  const double l0 = std::floor(std::log10(lo)), l1 = std::max(l0 + 1, std::ceil(std::log10(hi)));
  const int w = 640, h = 640, m = 60;
  auto px = [&](double v) { return m + (std::log10(v) - l0) / (l1 - l0) * (w - 2 * m); };
  auto py = [&](double v) { return h - m - (std::log10(v) - l0) / (l1 - l0) * (h - 2 * m); };
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + std::to_string(w) +
                  "' height='" + std::to_string(h) + "' font-family='sans-serif' font-size='12'>";
  s += "<rect x='" + std::to_string(m) + "' y='" + std::to_string(m) + "' width='" +
       std::to_string(w - 2 * m) + "' height='" + std::to_string(h - 2 * m) +
       "' fill='none' stroke='#888'/>";
  for (double d = l0; d <= l1 + 1e-9; d += 1) {
    const double v = std::pow(10.0, d);
    s += "<text x='" + num("%.1f", px(v)) + "' y='" + std::to_string(h - m + 16) +
         "' text-anchor='middle'>" + num("%g", v) + "</text>";
    s += "<text x='" + std::to_string(m - 6) + "' y='" + num("%.1f", py(v) + 4) +
         "' text-anchor='end'>" + num("%g", v) + "</text>";
  }
  const double a = std::pow(10.0, l0), b = std::pow(10.0, l1);
  s += "<line x1='" + num("%.1f", px(a)) + "' y1='" + num("%.1f", py(a)) + "' x2='" +
       num("%.1f", px(b)) + "' y2='" + num("%.1f", py(b)) + "' stroke='#444'/>";
  for (double f : {0.97, 1.03}) {
    s += "<line x1='" + num("%.1f", px(a)) + "' y1='" + num("%.1f", py(a * f)) + "' x2='" +
         num("%.1f", px(b / f)) + "' y2='" + num("%.1f", py(b)) +
         "' stroke='#aaa' stroke-dasharray='4 3'/>";
  }
  for (const PairComparison& p : c.pairs) {
    const std::string col = colour(p.placement);
    for (const ForwardError& f : p.forwards) {
      s += "<circle cx='" + num("%.1f", px(f.gpu_us)) + "' cy='" +
           num("%.1f", py(std::max(f.sim_us, a))) + "' r='2.5' stroke='" + col + "' fill='" +
           (f.decode ? col : std::string("none")) + "'><title>" + esc(p.label) + ", forward " +
           std::to_string(f.forward) + ": GPU " + num("%.1f", f.gpu_us) + " us, sim " +
           num("%.1f", f.sim_us) + " us (" + pct(f.error()) + ")</title></circle>";
    }
  }
  s += "<text x='" + std::to_string(w / 2) + "' y='" + std::to_string(h - 20) +
       "' text-anchor='middle'>measured on the GPU, us per forward (log)</text>";
  s += "<text transform='translate(16," + std::to_string(h / 2) +
       ") rotate(-90)' text-anchor='middle'>simulated, us per forward (log)</text>";
  int ly = m + 14;
  for (const PlacementSummary& ps : c.placements) {
    s += "<circle cx='" + std::to_string(m + 12) + "' cy='" + std::to_string(ly - 4) +
         "' r='4' fill='" + colour(ps.placement) + "'/><text x='" + std::to_string(m + 22) +
         "' y='" + std::to_string(ly) + "'>" + esc(ps.placement) + "</text>";
    ly += 16;
  }
  s += "<text x='" + std::to_string(m + 12) + "' y='" + std::to_string(ly) +
       "'>filled: decode, hollow: prefill; dashed: +-3 %</text>";
  return s + "</svg>";
}

// A histogram of the signed errors of one placement's forwards.
std::string histogram(const Comparison& c, const PlacementSummary& ps) {
  std::vector<double> err;
  for (const PairComparison& p : c.pairs) {
    if (p.placement != ps.placement) continue;
    for (const ForwardError& f : p.forwards)
      err.push_back(f.error());
  }
  // Symmetric range in whole percent, at least +-5 %, at most +-100 % (beyond: the end bins).
  double r = 0.05;
  while (r < 1.0 && r < ps.all.max_abs)
    r *= 2;
  r = std::min(r, 1.0);
  const int bins = 40, w = 640, h = 180, m = 40;
  std::vector<int> count(bins, 0);
  for (double e : err) {
    const int i = static_cast<int>(std::floor((std::clamp(e, -r, r) + r) / (2 * r) * bins));
    ++count[static_cast<std::size_t>(std::clamp(i, 0, bins - 1))];
  }
  const int top = std::max(1, *std::max_element(count.begin(), count.end()));
  const double bw = static_cast<double>(w - 2 * m) / bins;
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + std::to_string(w) +
                  "' height='" + std::to_string(h) + "' font-family='sans-serif' font-size='12'>";
  for (int i = 0; i < bins; ++i) {
    const double bh = static_cast<double>(count[static_cast<std::size_t>(i)]) / top * (h - 2 * m);
    s += "<rect x='" + num("%.1f", m + i * bw) + "' y='" + num("%.1f", h - m - bh) + "' width='" +
         num("%.1f", bw - 1) + "' height='" + num("%.1f", bh) + "' fill='" + colour(ps.placement) +
         "'/>";
  }
  for (double t : {-r, -r / 2, 0.0, r / 2, r}) {
    const double x = m + (t + r) / (2 * r) * (w - 2 * m);
    s += "<line x1='" + num("%.1f", x) + "' y1='" + std::to_string(h - m) + "' x2='" +
         num("%.1f", x) + "' y2='" + std::to_string(h - m + 4) + "' stroke='#444'/><text x='" +
         num("%.1f", x) + "' y='" + std::to_string(h - m + 16) + "' text-anchor='middle'>" +
         num("%+.0f %%", 100 * t) + "</text>";
  }
  s += "<text x='" + std::to_string(m) + "' y='16'>" + esc(ps.placement) + ": " +
       std::to_string(err.size()) + " forwards, median |error| " + apct(ps.all.median_abs) +
       ", p95 " + apct(ps.all.p95_abs) + ", max " + apct(ps.all.max_abs) + ", total " +
       pct(ps.all.total) + " (tallest bar " + std::to_string(top) + ")</text>";
  return s + "</svg>";
}

std::string cells(const ErrorStats& s) {
  if (s.forwards == 0) return "<td>0</td><td>-</td><td>-</td><td>-</td><td>-</td>";
  return "<td>" + std::to_string(s.forwards) + "</td><td>" + apct(s.median_abs) + "</td><td>" +
         apct(s.p95_abs) + "</td><td>" + apct(s.max_abs) + "</td><td>" + pct(s.total) + "</td>";
}

const char* kHead =
    "<tr><th rowspan='2'></th><th colspan='5'>decode forwards</th><th colspan='5'>prefill "
    "forwards</th><th rowspan='2'>hits, misses, evictions</th></tr><tr>"
    "<th>n</th><th>median |e|</th><th>p95 |e|</th><th>max |e|</th><th>total</th>"
    "<th>n</th><th>median |e|</th><th>p95 |e|</th><th>max |e|</th><th>total</th></tr>";

}  // namespace

std::string comparison_to_html(const Comparison& c) {
  std::string s =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>kvtier validate compare</title>"
      "<style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
      "td:first-child{text-align:left}</style></head><body>"
      "<h1>Simulator against GPU, per forward</h1><p>error = (sim - gpu) / gpu: positive when "
      "the simulator predicts a slower forward than the GPU ran. A forward is decode when all "
      "its tokens are decode tokens.</p>";
  s += "<h2>By placement</h2><table>" + std::string(kHead);
  for (const PlacementSummary& p : c.placements) {
    s += "<tr><td>" + esc(p.placement) + " (" + std::to_string(p.pairs) + " runs)</td>" +
         cells(p.decode) + cells(p.prefill) + "<td>" + (p.counters_exact ? "identical" : "DIFFER") +
         "</td></tr>";
  }
  s += "</table><h2>Predicted against measured</h2>" + scatter(c);
  s += "<h2>Error distribution per placement</h2>";
  for (const PlacementSummary& p : c.placements)
    s += "<div>" + histogram(c, p) + "</div>";
  s += "<h2>By run</h2><table>" + std::string(kHead);
  for (const PairComparison& p : c.pairs) {
    s += "<tr><td>" + esc(p.label) + "</td>" + cells(p.decode) + cells(p.prefill) + "<td>" +
         (p.counters.exact() ? std::string("identical")
                             : "differ from forward " + std::to_string(p.counters.first_forward)) +
         "</td></tr>";
  }
  return s + "</table></body></html>\n";
}

}  // namespace kvtier::validation
