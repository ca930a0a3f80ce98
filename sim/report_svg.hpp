#pragma once
// The report's charts (sim/report_html.cpp): inline SVG line charts with round 1-2-5 tick
// values, a log or linear x axis, an optional second x axis on top (pool slots over GiB),
// vertical lines (the budget, the card), shaded x ranges (sizes that drop pages, beyond the
// budget), horizontal lines (a TPOT target) and labelled rings on chosen points.
#include <functional>
#include <string>
#include <vector>

namespace kvtier::sim::svg {

// Round tick values within [lo, hi]: 1-2-5 steps on a linear axis (about `target` of them);
// on a log axis the 1-2-5 values of each decade, or linear 1-2-5 steps when the range spans
// too little of a decade to show three of those.
std::vector<double> nice_ticks(double lo, double hi, bool log, int target = 5);
// "0.5", "20", "1,000", "20,000"; percentages as "12 %".
std::string tick_label(double v, bool percent = false);
std::string esc(const std::string& s);
std::string num(double v);

struct Series {
  std::string name;
  std::string colour;
  std::vector<double> x, y;
  std::vector<bool> hollow = {};  // per point (empty: all filled): a size that drops pages
  bool dashed = false;
  bool line = true;     // false: markers only
  bool square = false;  // square markers instead of dots
  double marker_r = 2.5;
};

struct VLine {
  double x;
  std::string label;
  std::string colour;
  bool dashed = false;
};

struct HLine {
  double y;
  std::string label;
  std::string colour;
};

struct Band {
  double x0, x1;
  std::string fill;   // e.g. "rgba(0,0,0,0.08)"
  std::string label;  // written at the band's top
};

struct Callout {
  double x, y;
  std::string label;
  std::string colour;
};

// A second x axis on top: its own values (ticks chosen by nice_ticks over [lo, hi]) placed at
// the main axis position to_x(value).
struct TopAxis {
  std::string label;
  double lo = 0, hi = 0;
  std::function<double(double)> to_x;
};

struct Chart {
  std::string title, x_label, y_label;
  double width = 640, height = 320;
  bool log_x = true;
  bool integer_x = false;  // linear x with a tick at every integer (layers)
  bool percent_y = false;
  bool y_from_zero = true;      // else from a round value below the lowest point
  double y_top = 0;             // > 0: the y axis ends here (hit rates: 1)
  double x_min = 0, x_max = 0;  // > 0: include these in the x range
  std::vector<Series> series;
  std::vector<VLine> vlines;
  std::vector<HLine> hlines;
  std::vector<Band> bands;
  std::vector<Callout> callouts;
  const TopAxis* top = nullptr;
};

std::string render(const Chart& c);

}  // namespace kvtier::sim::svg
