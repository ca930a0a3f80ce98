// The plan report's per-request latency section (<section id='latency'>): per configuration,
// the p50 and p95 TPOT (every decode token's gap to its request's previous token) and the p95
// TTFT across requests, by device memory (sim/request_latency.hpp says how each is measured).
#include <cstdio>

#include "sim/report_parts.hpp"

namespace kvtier::sim::report {
namespace {

const char* kUnitColours[] = {"#1f77b4", "#ff7f0e"};

// One figure of a summary, in ms.
using Figure = double (*)(const PointSummary&);

// One chart of `fig` (solid) and, when given, `second` (dashed) for every configuration.
std::string latency_chart(const PlanResult& r, const svg::TopAxis* top, const std::string& title,
                          const std::string& y_label, Figure fig, Figure second,
                          const std::string& second_name, bool tpot_line) {
  svg::Chart c = memory_chart(r, title, y_label, top);
  c.width = 1000;
  c.height = 340;
  int k = 0;
  for (const UnitSweep& us : r.units) {
    const std::string colour = kUnitColours[k++ % 2];
    const std::string unit = std::string(to_string(us.unit));
    svg::Series s{"mirror " + unit, colour, {}, {}};
    svg::Series s2{"mirror " + unit + " " + second_name, colour, {}, {}};
    s2.dashed = true;
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      const double x = gib(us.points[i].device_bytes);
      s.x.push_back(x);
      s.y.push_back(fig(us.points[i]));
      s.hollow.push_back(us.points[i].drops != 0);
      if (second != nullptr) {
        s2.x.push_back(x);
        s2.y.push_back(second(us.points[i]));
        s2.hollow.push_back(us.points[i].drops != 0);
      }
    }
    c.series.push_back(s);
    if (second != nullptr) c.series.push_back(s2);
  }
  auto single = [&](const std::string& name, const char* colour, const PointSummary& p) {
    svg::Series m{name, colour, {gib(p.device_bytes)}, {fig(p)}};
    m.line = false;
    m.square = true;
    m.marker_r = 4;
    c.series.push_back(m);
  };
  single("device (ideal)", "#222", r.ideal);
  if (r.has_host) single("host (in place)", "#d62728", r.host);
  if (tpot_line && r.decision.objective.kind == Objective::tpot) {
    char b[64];
    std::snprintf(b, sizeof b, "TPOT target %.3g ms", r.decision.objective.tpot_target_ms);
    c.hlines.push_back({r.decision.objective.tpot_target_ms, b, "#2ca02c"});
  }
  return svg::render(c);
}

double tpot_p95(const PointSummary& p) {
  return tpot_ms(p);
}
double tpot_p50(const PointSummary& p) {
  return p.tpot_p50_us / 1e3;
}
double ttft_p95(const PointSummary& p) {
  return p.ttft_p95_us / 1e3;
}

}  // namespace

std::string latency_section(const PlanResult& r, const svg::TopAxis* top) {
  std::string h = "\n<section id='latency'><h2>Per-request latency</h2>";
  h += "<p>TPOT: every decode token's gap to its request's previous token (a decode row in a "
       "forward with prefill rows waits for all of it), p95 solid and p50 dashed; the TPOT "
       "target is held against the p95. TTFT: a request's admission to the end of the forward "
       "that completes its prompt, p95 across requests. Hollow points drop selected "
       "pages.</p>";
  h += latency_chart(r, top, "Time per output token by device memory", "TPOT ms", tpot_p95,
                     tpot_p50, "p50", true);
  h += latency_chart(r, top, "Time to first token by device memory", "TTFT p95 ms", ttft_p95,
                     nullptr, "", false);
  return h + "</section>\n";
}

}  // namespace kvtier::sim::report
