#include "sim/report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvtier::sim::svg {
namespace {

// The 1-2-5 value at or above `raw`.
double nice_step(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  std::vector<double> t;
  if (!(hi > lo)) return {lo};
  const double step = nice_step((hi - lo) / std::max(1, target));
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1)
    t.push_back(k * step + 0.0);  // + 0.0: no "-0"
  return t;
}

std::vector<double> log_ticks(double lo, double hi, std::initializer_list<double> mantissas) {
  std::vector<double> t;
  for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= std::ceil(std::log10(hi)); ++e) {
    for (double m : mantissas) {
      const double v = m * std::pow(10.0, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
    }
  }
  return t;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, bool log, int target) {
  if (!log || lo <= 0) return linear_ticks(lo, hi, target);
  std::vector<double> t = log_ticks(lo, hi, {1, 2, 5});
  if (t.size() > 9) t = log_ticks(lo, hi, {1});
  if (t.size() < 3) t = linear_ticks(lo, hi, 4);
  return t;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string tick_label(double v, bool percent) {
  char b[48];
  if (percent) {
    std::snprintf(b, sizeof b, "%.3g %%", v * 100);
    return b;
  }
  if (std::fabs(v) >= 1000) {
    const long long r = std::llround(v);
    std::string d = std::to_string(r < 0 ? -r : r);
    for (int i = static_cast<int>(d.size()) - 3; i > 0; i -= 3)
      d.insert(static_cast<std::size_t>(i), ",");
    return (r < 0 ? "-" : "") + d;
  }
  std::snprintf(b, sizeof b, "%.3g", v);
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
    else if (c == '\'')
      o += "&#39;";
    else
      o += c;
  }
  return o;
}

namespace {

// A text with a white halo, readable over lines and bands.
std::string text(double x, double y, const std::string& s, const std::string& colour,
                 const char* anchor = "start", const char* extra = "") {
  return "<text x='" + num(x) + "' y='" + num(y) + "' fill='" + colour + "' text-anchor='" +
         anchor + "' stroke='white' stroke-width='3' paint-order='stroke' " + extra + ">" + esc(s) +
         "</text>";
}

struct Frame {
  double L = 72, R = 190, T = 34, B = 46;
  double W = 0, H = 0;
  double x0 = 1, x1 = 2, y0 = 0, y1 = 1;
  bool log = true;
  double fx(double x) const { return log ? std::log(x) : x; }
  double px(double x) const { return L + (fx(x) - fx(x0)) / (fx(x1) - fx(x0)) * (W - L - R); }
  double py(double y) const { return H - B - (y - y0) / (y1 - y0) * (H - T - B); }
  double right() const { return W - R; }
  double bottom() const { return H - B; }
};

Frame frame_of(const Chart& c) {
  Frame f;
  f.W = c.width;
  f.H = c.height;
  f.log = c.log_x;
  if (c.top) f.T += 34;
  double xlo = 1e300, xhi = -1e300, ylo = 1e300, yhi = -1e300;
  auto take_x = [&](double x) {
    if (f.log && x <= 0) return;
    xlo = std::min(xlo, x);
    xhi = std::max(xhi, x);
  };
  auto take_y = [&](double y) {
    ylo = std::min(ylo, y);
    yhi = std::max(yhi, y);
  };
  for (const Series& s : c.series) {
    for (double x : s.x)
      take_x(x);
    for (double y : s.y)
      take_y(y);
  }
  for (const VLine& v : c.vlines)
    take_x(v.x);
  for (const HLine& h : c.hlines)
    take_y(h.y);
  if (c.x_min > 0) take_x(c.x_min);
  if (c.x_max > 0) take_x(c.x_max);
  if (xlo > xhi) xlo = xhi = 1;
  if (ylo > yhi) ylo = yhi = 0;
  if (f.log) {
    f.x0 = xlo / 1.15;
    f.x1 = xhi * 1.15;
  } else {
    f.x0 = xlo;
    f.x1 = xhi > xlo ? xhi : xlo + 1;
    if (c.integer_x) {
      f.x0 -= 0.5;
      f.x1 += 0.5;
    }
  }
  if (c.y_top > 0) {
    f.y1 = c.y_top;
    const double step = nice_step(std::max(1e-9, (c.y_top - ylo) / 4));
    f.y0 = c.y_from_zero ? 0 : std::max(0.0, std::floor(ylo / step - 1e-9) * step);
    if (!(f.y1 > f.y0)) f.y0 = 0;
  } else {
    const double top = yhi > 0 ? yhi * 1.04 : 1;
    const double step = nice_step(top / 5);
    f.y0 = 0;
    f.y1 = std::ceil(top / step - 1e-9) * step;
  }
  return f;
}

std::string axes(const Chart& c, const Frame& f) {
  std::string s;
  s += "<rect x='" + num(f.L) + "' y='" + num(f.T) + "' width='" + num(f.right() - f.L) +
       "' height='" + num(f.bottom() - f.T) + "' fill='none' stroke='#888'/>";
  for (double y : nice_ticks(f.y0, f.y1, false, 5)) {
    s += "<line x1='" + num(f.L) + "' x2='" + num(f.right()) + "' y1='" + num(f.py(y)) + "' y2='" +
         num(f.py(y)) + "' stroke='#eee'/>";
    s += "<text x='" + num(f.L - 6) + "' y='" + num(f.py(y) + 4) + "' text-anchor='end'>" +
         tick_label(y, c.percent_y) + "</text>";
  }
  std::vector<double> xt;
  if (c.integer_x) {
    for (double x = std::ceil(f.x0); x <= f.x1; x += 1)
      xt.push_back(x);
  } else {
    xt = nice_ticks(f.x0, f.x1, f.log, 6);
  }
  for (double x : xt) {
    s += "<line x1='" + num(f.px(x)) + "' x2='" + num(f.px(x)) + "' y1='" + num(f.T) + "' y2='" +
         num(f.bottom()) + "' stroke='#f3f3f3'/>";
    s += "<text x='" + num(f.px(x)) + "' y='" + num(f.bottom() + 15) + "' text-anchor='middle'>" +
         tick_label(x) + "</text>";
  }
  s += "<text x='" + num((f.L + f.right()) / 2) + "' y='" + num(f.H - 10) +
       "' text-anchor='middle'>" + esc(c.x_label) + "</text>";
  s += "<text transform='translate(16," + num((f.T + f.bottom()) / 2) +
       ") rotate(-90)' text-anchor='middle'>" + esc(c.y_label) + "</text>";
  if (c.top) {
    // Its values are affine in the main axis's, not proportional: 1-2-5 values, each kept
    // when it lands clear of the last one placed.
    const std::vector<double> vs = nice_ticks(std::max(1.0, c.top->lo), c.top->hi, true, 6);
    double last = -1e300;
    for (double v : vs) {
      const double x = c.top->to_x(v);
      if (!(x >= f.x0 && x <= f.x1) || f.px(x) - last < 44) continue;
      last = f.px(x);
      s += "<line x1='" + num(f.px(x)) + "' x2='" + num(f.px(x)) + "' y1='" + num(f.T - 5) +
           "' y2='" + num(f.T) + "' stroke='#666'/><text x='" + num(f.px(x)) + "' y='" +
           num(f.T - 8) + "' text-anchor='middle' fill='#555'>" + tick_label(v) + "</text>";
    }
    s += "<text x='" + num((f.L + f.right()) / 2) + "' y='" + num(f.T - 24) +
         "' text-anchor='middle' fill='#555'>" + esc(c.top->label) + "</text>";
  }
  return s;
}

std::string marker(const Series& se, double x, double y, bool hollow) {
  const std::string fill = hollow ? "white" : se.colour;
  if (se.square) {
    const double r = se.marker_r;
    return "<rect x='" + num(x - r) + "' y='" + num(y - r) + "' width='" + num(2 * r) +
           "' height='" + num(2 * r) + "' fill='" + fill + "' stroke='" + se.colour + "'/>";
  }
  return "<circle cx='" + num(x) + "' cy='" + num(y) + "' r='" + num(se.marker_r) + "' fill='" +
         fill + "' stroke='" + se.colour + "'/>";
}

}  // namespace

std::string render(const Chart& c) {
  const Frame f = frame_of(c);
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(f.W) + "' height='" +
                  num(f.H) + "' font-family='sans-serif' font-size='11'>";
  s += "<text x='" + num(f.L) + "' y='16' font-size='13' font-weight='bold'>" + esc(c.title) +
       "</text>";
  // Bands first, under the grid and the data; clipped to the plot.
  int band_row = 0;
  for (const Band& b : c.bands) {
    const double a = std::clamp(f.px(std::max(b.x0, f.x0)), f.L, f.right());
    const double z = std::clamp(f.px(std::min(b.x1, f.x1)), f.L, f.right());
    if (!(z > a)) continue;
    s += "<rect x='" + num(a) + "' y='" + num(f.T) + "' width='" + num(z - a) + "' height='" +
         num(f.bottom() - f.T) + "' fill='" + b.fill + "'/>";
    // Labelled in place where the band is wide enough (about 6 px a character); the legend
    // names every band anyway.
    if (!b.label.empty() && z - a > 6.0 * static_cast<double>(b.label.size()) + 8)
      s += text((a + z) / 2, f.T + 14 + 13 * band_row++, b.label, "#555", "middle");
  }
  s += axes(c, f);
  for (const VLine& l : c.vlines) {
    if (!(l.x >= f.x0 && l.x <= f.x1)) continue;
    const double x = f.px(l.x);
    s += "<line x1='" + num(x) + "' x2='" + num(x) + "' y1='" + num(f.T) + "' y2='" +
         num(f.bottom()) + "' stroke='" + l.colour + "' stroke-width='1.5'" +
         (l.dashed ? " stroke-dasharray='5 3'" : "") + "/>";
    // Along the line, reading upwards from the bottom: clear of the curves' labels.
    const std::string at = num(x - 4) + "," + num(f.bottom() - 6);
    s += text(0, 0, l.label, l.colour, "start",
              ("transform='translate(" + at + ") rotate(-90)'").c_str());
  }
  for (const HLine& h : c.hlines) {
    const double y = f.py(h.y);
    s += "<line x1='" + num(f.L) + "' x2='" + num(f.right()) + "' y1='" + num(y) + "' y2='" +
         num(y) + "' stroke='" + h.colour + "' stroke-dasharray='6 3'/>";
    s += text(f.L + 6, y - 5, h.label, h.colour);
  }
  int k = 0;
  for (const Series& se : c.series) {
    if (se.line && se.x.size() > 1) {
      std::string pts;
      for (std::size_t i = 0; i < se.x.size(); ++i)
        pts += num(f.px(se.x[i])) + "," + num(f.py(se.y[i])) + " ";
      s += "<polyline fill='none' stroke='" + se.colour + "' stroke-width='2'" +
           (se.dashed ? " stroke-dasharray='6 4'" : "") + " points='" + pts + "'/>";
    }
    for (std::size_t i = 0; i < se.x.size(); ++i) {
      if (f.log && se.x[i] <= 0) continue;
      s += marker(se, f.px(se.x[i]), f.py(se.y[i]), i < se.hollow.size() && se.hollow[i]);
    }
    // The legend, right of the plot.
    const double ly = f.T + 10 + 16 * k++;
    s += "<line x1='" + num(f.right() + 10) + "' x2='" + num(f.right() + 30) + "' y1='" + num(ly) +
         "' y2='" + num(ly) + "' stroke='" + (se.line ? se.colour : "none") + "' stroke-width='2'" +
         (se.dashed ? " stroke-dasharray='6 4'" : "") + "/>";
    s += marker(se, f.right() + 20, ly, false);
    s +=
        "<text x='" + num(f.right() + 34) + "' y='" + num(ly + 4) + "'>" + esc(se.name) + "</text>";
  }
  for (const Band& b : c.bands) {
    if (b.label.empty()) continue;
    const double ly = f.T + 10 + 16 * k++;
    s += "<rect x='" + num(f.right() + 10) + "' y='" + num(ly - 6) + "' width='20' height='12' " +
         "fill='" + b.fill + "' stroke='#bbb'/><text x='" + num(f.right() + 34) + "' y='" +
         num(ly + 4) + "'>" + esc(b.label) + "</text>";
  }
  // Rings on the points the decision names, labels stacked where they meet.
  std::vector<std::pair<double, double>> placed;
  for (const Callout& co : c.callouts) {
    if (f.log && co.x <= 0) continue;
    const double x = f.px(co.x), y = f.py(co.y);
    int stack = 0;
    for (const auto& [px, py] : placed)
      if (std::fabs(px - x) < 60 && std::fabs(py - y) < 14) ++stack;
    placed.emplace_back(x, y - 14 * stack);
    s += "<circle cx='" + num(x) + "' cy='" + num(y) + "' r='" + num(7 + 3 * stack) +
         "' fill='none' stroke='" + co.colour + "' stroke-width='2'/>";
    const bool left = x > f.right() - 120;
    s += text(left ? x - 10 : x + 10, y - 10 - 14 * stack, co.label, co.colour,
              left ? "end" : "start", "font-weight='bold'");
  }
  return s + "</svg>";
}

}  // namespace kvtier::sim::svg
