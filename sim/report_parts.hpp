#pragma once
// Pieces the plan report's charts share (sim/report_html.cpp, sim/report_latency.cpp): the
// device-memory x axis with pool slots on top, the budget and card lines, the shaded sizes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/planner.hpp"
#include "sim/report_svg.hpp"

namespace kvtier::sim::report {

double gib(std::int64_t bytes);

// The decision's figure of a point: prefill tokens/s for --objective prefill, else decode.
double objective_value(const PointSummary& p, Objective o);

// The pool-slots axis over device GiB: device memory is affine in the slots (memory_budget's
// pool, residency state and ensure scratch per slot), fitted from a unit's smallest and
// largest sizes; the units differ by 11 B per slot of residency state, so the first unit's
// axis serves both. Empty when no unit sweeps two sizes.
std::optional<svg::TopAxis> slots_axis(const PlanResult& r, double x_lo, double x_hi);

// The vertical lines of the budget B and the card (one line when B is the card).
std::vector<svg::VLine> budget_lines(const PlanResult& r);

// Shaded x ranges: the sizes that drop selected pages, and device memory beyond B.
std::vector<svg::Band> budget_bands(const PlanResult& r, double x_hi);

// A chart over device GiB with the budget lines, the shaded sizes and the slots axis set.
svg::Chart memory_chart(const PlanResult& r, const std::string& title, const std::string& ylabel,
                        const svg::TopAxis* top);

// The x range every memory chart spans: the configurations, B and the card.
std::pair<double, double> memory_range(const PlanResult& r);

// The per-request latency section (its own <section id='latency'>).
std::string latency_section(const PlanResult& r, const svg::TopAxis* top);

}  // namespace kvtier::sim::report
