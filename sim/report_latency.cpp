// The plan report's per-request latency section: one self-contained <section id='latency'>,
// so that per-request TTFT and TPOT percentiles (issue 16, item 4) render here once the
// summaries carry them. Until then it charts what the summaries have: the time a decode token
// waits for its forward (PointSummary::decode_step_ms, the TPOT figure of recommend.hpp).
#include <cstdio>

#include "sim/report_parts.hpp"

namespace kvtier::sim::report {
namespace {

const char* kUnitColours[] = {"#1f77b4", "#ff7f0e"};

}  // namespace

std::string latency_section(const PlanResult& r, const svg::TopAxis* top) {
  std::string h =
      "\n<!-- ===== per-request latency: begin (issue 16 item 4 renders its fields here) ===== "
      "-->\n<section id='latency'><h2>Per-request latency</h2>";
  h += "<p>Per-request TTFT and TPOT percentiles are not in this build's summaries; shown is "
       "the TPOT figure the recommendation uses: the time a decode token waits for the forward "
       "that produces it (its whole span: a prefill chunk sharing the forward counts), averaged "
       "over the decode tokens.</p>";
  svg::Chart c = memory_chart(r, "Time per output token by device memory",
                              "ms per decode token (mean wait)", top);
  c.width = 1000;
  c.height = 360;
  int k = 0;
  for (const UnitSweep& us : r.units) {
    svg::Series s{"mirror " + std::string(to_string(us.unit)), kUnitColours[k++ % 2], {}, {}};
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      s.x.push_back(gib(us.points[i].device_bytes));
      s.y.push_back(tpot_ms(us.points[i]));
      s.hollow.push_back(us.points[i].drops != 0);
    }
    c.series.push_back(s);
  }
  svg::Series dev{"device (ideal)", "#222", {gib(r.ideal.device_bytes)}, {tpot_ms(r.ideal)}};
  dev.line = false;
  dev.square = true;
  dev.marker_r = 4;
  c.series.push_back(dev);
  if (r.has_host) {
    svg::Series host{"host (in place)", "#d62728", {gib(r.host.device_bytes)}, {tpot_ms(r.host)}};
    host.line = false;
    host.square = true;
    host.marker_r = 4;
    c.series.push_back(host);
  }
  if (r.decision.objective.kind == Objective::tpot) {
    char b[64];
    std::snprintf(b, sizeof b, "TPOT target %.3g ms", r.decision.objective.tpot_target_ms);
    c.hlines.push_back({r.decision.objective.tpot_target_ms, b, "#2ca02c"});
  }
  h += svg::render(c);
  return h + "</section>\n<!-- ===== per-request latency: end ===== -->\n";
}

}  // namespace kvtier::sim::report
