#include "validation/fit/profile_fit.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "model/calibration_terms.hpp"
#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#include "validation/fit/fit_error.hpp"
#include "validation/fit/plateau_fit.hpp"

namespace kvtier::fit {
namespace {

// How a profile field comes from a fit: from the intercept, an input's slope (b, us per
// unit; for a two-piece term, the slope past the knee), the knee or the slope below it, as b
// itself (us, or the knee's unit), 1000 b (ns), 1024000 b (ns per KiB), 1 / (1000 b) (GB/s:
// 1 GB/s = 1,000 bytes per us) or 1 / (10^6 b) (TFLOP/s of an input counted in flops: 10^6 a us).
enum class Coef { intercept, slope, knee, slope_below };
enum class As { us, ns, ns_per_kib, gbps, tflops, raw };
// How a series is fitted: a line by least squares, or two pieces of its first input joined at a
// knee (any further inputs a line beside) by relative residuals: the stores (their y spans 1 us
// to 1 ms, and the decode's small stores weigh as much as the prefill's; the host bank's: the
// link absorbs small writes; the pool's: a slower rate past 8 MB on the H200) and the fp8
// attends (flat while their CTAs fit on the SMs, then linear in their bytes); or a line by
// relative residuals (the wide projections and the layer's small kernels: 1 to 16,384 rows; the
// attends past one wave: 0.1 to 19 ms; the index scoring and the top-k kernels: 4,096 to 33 M
// row-blocks, 4 us to 2.4 ms, where the short contexts of decode would otherwise weigh nothing
// against the longest).
enum class Form { line, relative_knee, relative_line };
struct Rule {
  const char* field;
  Coef coef;
  int input;  // for slopes
  As as;
};
struct Unpriced {
  Coef coef;
  int input;
  const char* note;
};
// The inputs a series is fitted over, from the inputs its points hold (nullptr: the same).
using Regressors = void (*)(Samples&);
struct TermMap {
  std::string_view term;
  std::vector<Rule> rules;
  std::vector<Unpriced> unpriced;
  Form form = Form::line;
  Regressors regressors = nullptr;
  // Fitted after every other series, from their fields (fit_l2_reuse), not by this table.
  bool after_others = false;
};

// The ensure's slots enter the cost as the slots it searches (CostModel::ensure_ns).
void ensure_regressors(Samples& s) {
  for (auto& x : s.x)
    x[1] = CostModel::ensure_slots_scanned(x[1], x[2]);
}

// The step beside past kStepGroupedRows rows (CostModel::step_beside_ns): rows, pages, the
// slots searched, misses, and the pages once more in a step that misses.
void step_beside_wide_regressors(Samples& s) {
  for (auto& x : s.x) {
    x.push_back(x[3] > 0 ? x[1] : 0.0);
    x[2] = CostModel::ensure_slots_scanned(x[2], x[3]);
  }
  s.inputs.emplace_back("pages missing");
}

// Up to kStepGroupedRows rows: the same with the rows' doublings, and a fixed part of a step
// that misses (1 where it misses).
void step_beside_regressors(Samples& s) {
  step_beside_wide_regressors(s);
  for (auto& x : s.x) {
    x.push_back(x[3] > 0 ? 1.0 : 0.0);
    x[0] = CostModel::row_doublings(x[0]);
  }
  s.inputs.emplace_back("missing");
}

const std::vector<TermMap>& term_maps() {
  static const std::vector<TermMap> maps = {
      {"launch_eager",
       {{"launch_us", Coef::slope, 0, As::us}},
       {{Coef::intercept, 0, "the timing's own overhead; launches are priced per kernel"}}},
      {"launch_graph",
       {{"graph_launch_us", Coef::slope, 0, As::us}},
       {{Coef::intercept, 0, "the timing's own overhead; graph nodes are priced per kernel"}}},
      {"h2d_copy",
       {{"pcie_h2d_gbps", Coef::slope, 0, As::gbps}, {"pcie_latency_us", Coef::slope, 1, As::us}},
       {{Coef::intercept, 0, "copies are priced per transfer, without a fixed part"}}},
      {"d2h_copy",
       {{"pcie_d2h_gbps", Coef::slope, 0, As::gbps}},
       {{Coef::intercept, 0, "copies are priced per transfer, without a fixed part"},
        {Coef::slope, 1, "one pcie_latency_us (from h2d_copy) serves both directions"}}},
      {"zero_copy_read",
       {{"zero_copy_read_gbps", Coef::slope, 0, As::gbps}},
       {{Coef::intercept, 0,
         "a miss copy is charged pcie_latency_us; an in-place read, the attend's fixed part"}}},
      {"zero_copy_write",
       {{"zero_copy_write_gbps", Coef::slope, 0, As::gbps}},
       {{Coef::intercept, 0, "the store's fixed parts come from the store series"}}},
      {"store",
       {{"store_fixed_us", Coef::intercept, 0, As::us},
        {"store_knee_bytes", Coef::knee, 0, As::raw},
        {"store_ns_per_kib", Coef::slope_below, 0, As::ns_per_kib},
        {"store_hbm_gbps", Coef::slope, 0, As::gbps}},
       {},
       Form::relative_knee},
      {"store_fp8",
       {{"store_fp8_fixed_us", Coef::intercept, 0, As::us},
        {"store_fp8_knee_bytes", Coef::knee, 0, As::raw},
        {"store_fp8_ns_per_kib", Coef::slope_below, 0, As::ns_per_kib},
        {"store_fp8_hbm_gbps", Coef::slope, 0, As::gbps}},
       {},
       Form::relative_knee},
      {"store_host",
       {{"store_host_us", Coef::intercept, 0, As::us},
        {"store_host_knee_bytes", Coef::knee, 0, As::raw},
        {"store_host_ns_per_kib", Coef::slope_below, 0, As::ns_per_kib},
        {"zero_copy_write_gbps", Coef::slope, 0, As::gbps}},
       {},
       Form::relative_knee},
      {"store_host_fp8",
       {{"store_fp8_host_us", Coef::intercept, 0, As::us},
        {"store_fp8_host_knee_bytes", Coef::knee, 0, As::raw},
        {"store_fp8_host_ns_per_kib", Coef::slope_below, 0, As::ns_per_kib},
        {"store_fp8_host_gbps", Coef::slope, 0, As::gbps}},
       {},
       Form::relative_knee},
      {"hbm_read",
       {{"hbm_gbps", Coef::slope, 0, As::gbps}},
       {{Coef::intercept, 0, "HBM bytes are priced inside the attend, without a fixed part"}}},
      {"indexer",
       {{"indexer_fixed_us", Coef::intercept, 0, As::us},
        {"indexer_ns_per_row_block", Coef::slope, 0, As::ns}},
       {},
       Form::relative_line},
      {"indexer_prefill",
       {{"indexer_prefill_fixed_us", Coef::intercept, 0, As::us},
        {"indexer_prefill_ns_per_row_block", Coef::slope, 0, As::ns}},
       {},
       Form::relative_line},
      {"topk",
       {{"topk_fixed_us", Coef::intercept, 0, As::us},
        {"topk_ns_per_row_block", Coef::slope, 0, As::ns}},
       {},
       Form::relative_line},
      {"topk_one_cta",
       {{"topk_one_cta_fixed_us", Coef::intercept, 0, As::us},
        {"topk_one_cta_ns_per_row_block", Coef::slope, 0, As::ns},
        {"topk_one_cta_ns_per_row", Coef::slope, 1, As::ns}},
       {},
       Form::relative_line},
      {"topk_chain",
       {{"topk_chain_fixed_us", Coef::intercept, 0, As::us},
        {"topk_chain_ns_per_row_block", Coef::slope, 0, As::ns}},
       {},
       Form::relative_line},
      {"projection",
       {{"projection_fixed_us", Coef::intercept, 0, As::us},
        {"projection_gbps", Coef::slope, 0, As::gbps},
        {"projection_ns_per_row", Coef::slope, 1, As::ns}},
       {}},
      {"projection_wide",
       {{"projection_wide_fixed_us", Coef::intercept, 0, As::us},
        {"projection_wide_tflops", Coef::slope, 0, As::tflops}},
       {},
       Form::relative_line},
      {"layer_ops",
       {{"layer_ops_fixed_us", Coef::intercept, 0, As::us},
        {"layer_ops_ns_per_row", Coef::slope, 0, As::ns}},
       {},
       Form::relative_line},
      {"ensure",
       {{"ensure_fixed_us", Coef::intercept, 0, As::us},
        {"ensure_ns_per_lookup", Coef::slope, 0, As::ns},
        {"ensure_ns_per_slot", Coef::slope, 1, As::ns},
        {"ensure_ns_per_miss", Coef::slope, 2, As::ns}},
       {},
       Form::line,
       ensure_regressors},
      {"ensure_beside",
       {},
       {{Coef::intercept, 0,
         "retired series (points files before 2026-12-03b): the step beside is priced by "
         "step_beside*, from its rows and pages, which it lacks"}},
       Form::line,
       ensure_regressors},
      {"step_beside",
       {{"step_beside_fixed_us", Coef::intercept, 0, As::us},
        {"step_beside_us_per_row_doubling", Coef::slope, 0, As::us},
        {"step_beside_ns_per_page", Coef::slope, 1, As::ns},
        {"step_beside_ns_per_slot", Coef::slope, 2, As::ns},
        {"step_beside_ns_per_miss", Coef::slope, 3, As::ns},
        {"step_beside_ns_per_page_missing", Coef::slope, 4, As::ns},
        {"step_beside_us_missing", Coef::slope, 5, As::us}},
       {},
       Form::relative_line,
       step_beside_regressors},
      {"step_beside_wide",
       {{"step_beside_wide_fixed_us", Coef::intercept, 0, As::us},
        {"step_beside_wide_ns_per_row", Coef::slope, 0, As::ns},
        {"step_beside_wide_ns_per_page", Coef::slope, 1, As::ns},
        {"step_beside_wide_ns_per_slot", Coef::slope, 2, As::ns},
        {"step_beside_wide_ns_per_miss", Coef::slope, 3, As::ns},
        {"step_beside_wide_ns_per_page_missing", Coef::slope, 4, As::ns}},
       {},
       Form::relative_line,
       step_beside_wide_regressors},
      {"step_beside_copy",
       {{"step_beside_copy_us", Coef::intercept, 0, As::us},
        {"step_beside_copy_gbps", Coef::slope, 0, As::gbps}},
       {}},
      {"attention",
       {{"attention_fixed_us", Coef::intercept, 0, As::us},
        {"hbm_gbps", Coef::slope, 0, As::gbps},
        {"attention_ns_per_cta", Coef::slope, 1, As::ns}},
       {}},
      {"store_in_forward",
       {{"store_fixed_us", Coef::intercept, 0, As::us}},
       {{Coef::slope, 0, "the store's bytes are priced at the store series' rates"}}},
      {"attention_warm", {}, {}, Form::line, nullptr, true},
      {"attention_span",
       {{"attention_ns_per_cta_token", Coef::slope, 0, As::ns}},
       {{Coef::intercept, 0,
         "the attend's fixed part and CTAs come from the attention series; its span is the "
         "longer of its bytes' time and its longest CTA's walk"}},
       Form::relative_line},
      {"attention_waves",
       {{"attention_waves_fixed_us", Coef::intercept, 0, As::us},
        {"attention_waves_gbps", Coef::slope, 0, As::gbps},
        {"attention_waves_ns_per_cta", Coef::slope, 1, As::ns}},
       {},
       Form::relative_line},
      {"staging",
       {{"staging_fixed_us", Coef::intercept, 0, As::us},
        {"staging_gbps", Coef::slope, 0, As::gbps}},
       {}},
      {"window_fold",
       {{"window_fold_fixed_us", Coef::intercept, 0, As::us},
        {"window_fold_ns_per_row", Coef::slope, 0, As::ns}},
       {}},
      {"fold_reset",
       {{"fold_reset_fixed_us", Coef::intercept, 0, As::us},
        {"fold_reset_ns_per_row", Coef::slope, 0, As::ns}},
       {}},
      {"attention_fp8",
       {{"attention_fp8_fixed_us", Coef::intercept, 0, As::us},
        {"attention_fp8_knee_bytes", Coef::knee, 0, As::raw},
        {"attention_fp8_ns_per_kib", Coef::slope_below, 0, As::ns_per_kib},
        {"attention_fp8_gbps", Coef::slope, 0, As::gbps},
        {"attention_fp8_ns_per_row", Coef::slope, 1, As::ns}},
       {},
       Form::relative_knee},
      {"attention_fp8_host",
       {{"attention_fp8_host_fixed_us", Coef::intercept, 0, As::us},
        {"attention_fp8_host_knee_bytes", Coef::knee, 0, As::raw},
        {"attention_fp8_host_ns_per_kib", Coef::slope_below, 0, As::ns_per_kib},
        {"attention_fp8_host_gbps", Coef::slope, 0, As::gbps},
        {"attention_fp8_host_ns_per_row", Coef::slope, 1, As::ns}},
       {},
       Form::relative_knee},
      {"non_qsa",
       {{"non_qsa_forward_us", Coef::intercept, 0, As::us},
        {"non_qsa_token_us", Coef::slope, 0, As::us}},
       {}},
  };
  return maps;
}

const TermMap& map_of(std::string_view term) {
  for (const TermMap& m : term_maps()) {
    if (m.term == term) return m;
  }
  throw ConfigError("fit: no profile mapping for term '" + std::string(term) + "'");
}

double coefficient(const SeriesFit& s, Coef c, int input) {
  switch (c) {
    case Coef::knee:
      return s.knee ? s.knee->knee : 0.0;
    case Coef::slope_below:
      return s.knee ? s.knee->slope_below : 0.0;
    case Coef::intercept:
      return s.linear.intercept;
    case Coef::slope:
      break;
  }
  return s.linear.slopes[static_cast<std::size_t>(input)];
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string source_of(const PointsFile& p, const SeriesFit& s) {
  return "fitted (least squares, " + s.term + ": " + std::to_string(s.points) + " points, R² " +
         fmt("%.4f", s.linear.quality.r2) + ") by '" + p.command + "' on " + p.card + ", driver " +
         p.driver + ", " + p.date;
}

// A field two terms can set, and the term that sets it when both were measured: the attend's
// effective HBM rate over the plain gather's ceiling, the store's host rate over the older
// write-through-only series (points files before the store series).
struct Preferred {
  std::string_view field, term, what;  // `what` the other series' rate is
};
constexpr Preferred kPreferred[] = {
    {"hbm_gbps", "attention", "HBM gather ceiling"},
    {"zero_copy_write_gbps", "store_host", "write-through rate"},
    // the store before an attend, as a forward runs it, over the store alone in a graph of
    // stores (validation/results/h200-2026-12-03-round12.md)
    {"store_fixed_us", "store_in_forward", "the store's fixed part alone"},
};

// The note when `field` is left to another series of `points` than `term`, else nullptr.
const Preferred* left_to_other(const PointsFile& points, std::string_view term,
                               std::string_view field) {
  for (const Preferred& pr : kPreferred) {
    if (pr.field == field && pr.term != term && points.find(pr.term) != nullptr) return &pr;
  }
  return nullptr;
}

SeriesFit fit_series(const PointsFile& p, const PointSeries& ps, const TermMap& m,
                     HardwareProfile& out) {
  SeriesFit s;
  s.term = ps.term;
  s.inputs = ps.samples.inputs;
  s.points = ps.samples.y.size();
  Samples samples = ps.samples;
  if (m.regressors != nullptr) {
    m.regressors(samples);
    s.inputs = samples.inputs;
  }
  const bool relative = m.form != Form::line;
  try {
    s.linear = fit_linear(samples, relative);
  } catch (const FitError& e) {
    throw FitError("series '" + ps.term + "': " + e.what());
  }
  if (m.form == Form::relative_knee) {
    try {
      s.knee = fit_knee(samples, true);
    } catch (const FitError& e) {
      // fewer than 4 distinct x: one piece, the line from 0 bytes
      s.notes.push_back(std::string("no knee (") + e.what() + "): priced as the line");
      s.knee = KneeFit{0,
                       s.linear.intercept,
                       0,
                       s.linear.slopes[0],
                       {s.linear.slopes.begin() + 1, s.linear.slopes.end()},
                       s.linear.quality};
    }
  }
  if (m.form == Form::relative_knee) {
    // The profile prices the two pieces: that fit is the series' fit (R², residuals, sources);
    // its slope past the knee stands as the slope, the line is reported beside.
    s.notes.push_back("priced as two pieces (relative residuals): knee at " + s.inputs[0] + " = " +
                      fmt("%g", s.knee->knee) + ", R² " + fmt("%.4f", s.knee->quality.r2) +
                      "; a line: R² " + fmt("%.4f", s.linear.quality.r2) + ", worst residual " +
                      fmt("%+.1f %%", 100 * s.linear.quality.worst_rel));
    std::vector<double> slopes{s.knee->slope_above};
    slopes.insert(slopes.end(), s.knee->other_slopes.begin(), s.knee->other_slopes.end());
    s.linear = LinearFit{s.knee->intercept, std::move(slopes), s.knee->quality};
    if (s.knee->slope_below < 0) {
      s.notes.push_back("the slope below the knee came out negative (" +
                        fmt("%g", s.knee->slope_below) + " us per unit): priced as 0");
      s.knee->slope_below = 0;
    }
  } else if (s.inputs.size() == 1) {
    try {
      s.knee = fit_knee(samples);
    } catch (const FitError&) {
      // fewer than 4 distinct x: the knee is not reported
    }
    const double unexplained = 1 - s.linear.quality.r2;
    if (s.knee && unexplained > 0 && 1 - s.knee->quality.r2 < 0.5 * unexplained) {
      s.notes.push_back("two pieces fit better: knee at " + s.inputs[0] + " = " +
                        fmt("%g", s.knee->knee) + ", R² " + fmt("%.4f", s.knee->quality.r2) +
                        " against " + fmt("%.4f", s.linear.quality.r2) +
                        " (the profile keeps the linear fit)");
    }
  }
  const std::string source = source_of(p, s);
  for (const Rule& r : m.rules) {
    if (const Preferred* other = left_to_other(p, ps.term, r.field)) {
      const double b = coefficient(s, r.coef, r.input);
      const std::string value = r.as == As::gbps
                                    ? fmt("%.1f", b > 0 ? 1.0 / (1000.0 * b) : 0.0) + " GB/s"
                                    : fmt("%.3f", b) + " us";
      s.notes.push_back(std::string(other->what) + " " + value + "; " + r.field +
                        " comes from the " + std::string(other->term) + " series");
      continue;
    }
    const double b = coefficient(s, r.coef, r.input);
    const double value = r.as == As::ns           ? 1000.0 * b
                         : r.as == As::ns_per_kib ? 1024000.0 * b
                         : r.as == As::gbps       ? 1.0 / (1000.0 * b)
                         : r.as == As::tflops     ? 1.0 / (1e6 * b)
                                                  : b;
    const bool may_be_zero = r.coef == Coef::knee || r.coef == Coef::slope_below;
    if (may_be_zero ? !(b >= 0) : !(b > 0)) {
      const std::string what =
          r.coef == Coef::intercept ? std::string("intercept")
          : r.coef == Coef::knee    ? std::string("knee")
                                 : "coefficient of " + s.inputs[static_cast<std::size_t>(r.input)];
      throw ConfigError("fit: series '" + s.term + "' gives " + r.field + " from its " + what +
                        " " + fmt("%g", b) +
                        ", which is not positive: check the points, or fit without the series "
                        "(its fields then keep the base's values)");
    }
    s.fields.push_back({r.field, value, out.param(r.field), source});
    out.set(r.field, value, source);
  }
  for (const Unpriced& u : m.unpriced) {
    s.unpriced.push_back({u.coef == Coef::intercept ? std::string("intercept")
                                                    : s.inputs[static_cast<std::size_t>(u.input)],
                          coefficient(s, u.coef, u.input), u.note});
  }
  return s;
}

// attention_warm: the one-row decode attends of a forward whose pages the forward before read,
// against the attention fit's price of the same attend (hbm_bytes, ctas, cta_tokens: the price
// the simulator takes off); the saving over the forward's working set, a plateau falling to 0
// (fit_plateau). Points of more rows are read and reported, not fitted: a stack of their layers
// outgrows the L2 (validation/results/h200-2026-12-03-round12.md).
SeriesFit fit_l2_reuse(const PointsFile& p, const PointSeries& ps, HardwareProfile& out) {
  SeriesFit s;
  s.term = ps.term;
  s.inputs = ps.samples.inputs;
  s.points = ps.samples.y.size();
  // The term's inputs (model/calibration_terms.cpp; the points file's reader holds a series to
  // them): rows, layers, working_set_bytes, hbm_bytes, ctas, cta_tokens.
  enum : std::size_t { rows, layers, ws, bytes, ctas, cta_tokens };
  const CostModel cost(out);
  std::vector<double> x, saving;
  for (std::size_t i = 0; i < ps.samples.x.size(); ++i) {
    const std::vector<double>& v = ps.samples.x[i];
    if (v[rows] != 1) continue;
    const auto cold =
        static_cast<double>(cost.attention_ns(static_cast<std::int64_t>(v[bytes]), 1,
                                              static_cast<std::int64_t>(v[ctas]), KvDtype::bf16,
                                              static_cast<std::int64_t>(v[cta_tokens]))) /
        1e3;
    x.push_back(v[ws]);
    saving.push_back(cold - ps.samples.y[i]);
  }
  PlateauFit f;
  try {
    f = fit_plateau(x, saving);
  } catch (const FitError& e) {
    throw FitError("series '" + ps.term + "' (its one-row points): " + e.what());
  }
  s.linear = LinearFit{f.level, {}, f.quality};
  const std::string source = "fitted (least squares of a plateau falling to 0, " + s.term + ": " +
                             std::to_string(x.size()) + " one-row points, R² " +
                             fmt("%.4f", f.quality.r2) +
                             ", the saving against the attention fit's price of each attend) by '" +
                             p.command + "' on " + p.card + ", driver " + p.driver + ", " + p.date;
  for (const auto& [field, value] : {std::pair{"attention_l2_reuse_us", f.level},
                                     std::pair{"attention_l2_reuse_full_bytes", f.full},
                                     std::pair{"attention_l2_reuse_none_bytes", f.none}}) {
    s.fields.push_back({field, value, out.param(field), source});
    out.set(field, value, source);
  }
  s.notes.push_back("one decode row saves " + fmt("%.3f", f.level) + " us up to " +
                    fmt("%.1f", f.full / 1e6) + " MB of a forward's selections, nothing from " +
                    fmt("%.1f", f.none / 1e6) + " MB; " + std::to_string(s.points - x.size()) +
                    " points of more rows reported only");
  return s;
}

}  // namespace

namespace {

// `points` without the series of the terms in `exclude` (checked: calibration terms, each with a
// series there).
PointsFile without_series(const PointsFile& points, const std::vector<std::string>& exclude) {
  for (const std::string& term : exclude) {
    const auto& terms = calibration_terms();
    if (std::none_of(terms.begin(), terms.end(),
                     [&](const CalibrationTerm& t) { return t.term == term; })) {
      std::string known;
      for (const CalibrationTerm& t : terms)
        known += (known.empty() ? "" : ", ") + std::string(t.term);
      throw ConfigError("fit: cannot leave out '" + term + "': not a calibration term (" + known +
                        ")");
    }
    if (points.find(term) == nullptr)
      throw ConfigError("fit: cannot leave out '" + term + "': the points have no series of it");
  }
  PointsFile kept = points;
  std::erase_if(kept.series, [&](const PointSeries& s) {
    return std::find(exclude.begin(), exclude.end(), s.term) != exclude.end();
  });
  return kept;
}

}  // namespace

ProfileFit fit_profile(const PointsFile& all_points, const HardwareProfile& base,
                       const std::vector<std::string>& exclude) {
  const PointsFile points = without_series(all_points, exclude);
  ProfileFit r{base, {points.card, points.driver, points.date, points.command, {}, {}, {}}};
  for (const PointSeries& ps : all_points.series) {
    if (points.find(ps.term) == nullptr) r.report.excluded.push_back(ps.term);
  }
  for (const PointSeries& ps : points.series) {
    const TermMap& m = map_of(ps.term);
    if (!m.after_others) r.report.series.push_back(fit_series(points, ps, m, r.profile));
  }
  for (const PointSeries& ps : points.series) {
    if (map_of(ps.term).after_others)
      r.report.series.push_back(fit_l2_reuse(points, ps, r.profile));
  }
  // The attend's effective rate against the plain gather's ceiling, when both were measured.
  const SeriesFit* hbm = nullptr;
  SeriesFit* attend = nullptr;
  for (SeriesFit& s : r.report.series) {
    if (s.term == "hbm_read") hbm = &s;
    if (s.term == "attention") attend = &s;
  }
  if (hbm != nullptr && attend != nullptr && hbm->linear.slopes[0] > 0) {
    attend->notes.push_back("the attend reads at " +
                            fmt("%.1f", 100.0 * hbm->linear.slopes[0] / attend->linear.slopes[0]) +
                            " % of the HBM gather ceiling");
  }
  // (a retired term prices nothing: there is nothing of it to keep)
  for (const CalibrationTerm& t : calibration_terms()) {
    const TermMap& m = map_of(t.term);
    if (all_points.find(t.term) == nullptr && (!m.rules.empty() || m.after_others))
      r.report.kept.emplace_back(t.term);
  }
  if (!points.series.empty()) {
    r.profile.scaled_from_datasheets = false;
    r.profile.description += "; fitted on " + points.card + ", " + points.date;
  }
  r.profile.validation.reset();
  r.profile.validate();
  return r;
}

}  // namespace kvtier::fit
