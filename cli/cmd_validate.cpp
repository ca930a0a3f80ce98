// `kvtier validate`: the simulator held to the GPU (docs/validation.md).
//   calibrate  the GPU micro-benchmarks of every priced op, as a points file (needs a GPU)
//   fit        a hardware profile fitted from that points file
//   compare    per-forward error of `kvtier sim --forward trace-replay --per-forward --json`
//              against `kvtier run --trace --json` (median, p95, max, total; decode and
//              prefill apart; counters)
#include <algorithm>
#include <boost/json.hpp>
#include <fstream>
#include <iostream>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/run_modes.hpp"
#include "cli/table.hpp"
#include "io/output_file.hpp"
#include "model/config_error.hpp"
#include "sim/profiles.hpp"
#include "validation/compare/compare_html.hpp"
#include "validation/compare/compare_json.hpp"
#include "validation/compare/forward_compare.hpp"
#include "validation/fit/fit_report_json.hpp"
#include "validation/fit/profile_fit.hpp"

namespace kvtier::cli {
namespace {

std::vector<std::string> sub_args(const std::vector<std::string>& args, const std::string& sub) {
  std::vector<std::string> out{args[0] + " " + sub};
  out.insert(out.end(), args.begin() + 2, args.end());
  return out;
}

// Takes every "--pair GPU.json SIM.json" out of `args` (program_options cannot keep repeated
// two-value options apart).
std::vector<std::pair<std::string, std::string>> take_pairs(std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> rest{args[0]};
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] != "--pair") {
      rest.push_back(args[i]);
      continue;
    }
    if (i + 2 >= args.size() || args[i + 1].starts_with("--") || args[i + 2].starts_with("--")) {
      throw ConfigError(
          "--pair takes two files: GPU.json (kvtier run --trace --json) and "
          "SIM.json (kvtier sim --forward trace-replay --per-forward --json)");
    }
    pairs.emplace_back(args[i + 1], args[i + 2]);
    i += 2;
  }
  args = std::move(rest);
  return pairs;
}

std::string apct(double v) {
  return fmt_fixed(100 * v, 2) + "%";
}
std::string pct(double v) {
  return (v >= 0 ? "+" : "") + fmt_fixed(100 * v, 2) + "%";
}

void add_stats(std::vector<std::string>& row, const validation::ErrorStats& s) {
  if (s.forwards == 0) {
    row.insert(row.end(), {"0", "-", "-", "-", "-", "-"});
    return;
  }
  row.insert(row.end(), {fmt_int(s.forwards), pct(s.median), apct(s.median_abs), apct(s.p95_abs),
                         apct(s.max_abs), pct(s.total)});
}

void print_comparison(const validation::Comparison& c) {
  const std::vector<std::string> head = {"",        "decode n",
                                         "median",  "median |e|",
                                         "p95 |e|", "max |e|",
                                         "total",   "prefill n",
                                         "median",  "median |e|",
                                         "p95 |e|", "max |e|",
                                         "total",   "hits/misses/evictions"};
  std::printf("error = (sim - gpu) / gpu per forward (positive: the simulator is slower)\n\n");
  Table t(head);
  auto add_summary = [&t](const validation::PlacementSummary& p, const std::string& name) {
    std::vector<std::string> row{name + " (" + fmt_int(p.pairs) + " runs)"};
    add_stats(row, p.decode);
    add_stats(row, p.prefill);
    row.push_back(p.counters_exact ? "identical" : "DIFFER");
    t.add(std::move(row));
  };
  for (const auto& p : c.placements)
    add_summary(p, p.placement);
  // every forward of every run together: what a profile's validation line quotes
  if (c.placements.size() > 1) add_summary(c.pooled, "pooled");
  t.print();
  std::printf("\n");
  Table r(head);
  for (const auto& p : c.pairs) {
    std::vector<std::string> row{p.label};
    add_stats(row, p.decode);
    add_stats(row, p.prefill);
    row.push_back(p.counters.exact() ? "identical"
                                     : "differ from forward " + fmt_int(p.counters.first_forward));
    r.add(std::move(row));
  }
  r.print();
}

int run_compare(std::vector<std::string> args) {
  const auto files = take_pairs(args);
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "pair", po::value<std::vector<std::string>>()->multitoken(),
      "GPU.json SIM.json: `kvtier run --trace T --json` and `kvtier sim --trace T --json "
      "--forward trace-replay --per-forward` of the same configuration (repeat for more runs)")(
      "html", po::value<std::string>(), "write the report (scatter, error histograms) here")(
      "json", "print every figure as JSON");
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "kvtier validate compare --pair GPU.json SIM.json [--pair ...] [--json] "
                     "[--html FILE]"))
    return 0;
  if (files.empty()) throw ConfigError("give at least one --pair GPU.json SIM.json");
  std::vector<std::pair<validation::ForwardResults, validation::ForwardResults>> runs;
  for (const auto& [gpu, sim] : files) {
    runs.emplace_back(validation::read_gpu_run(read_text_file(gpu), gpu),
                      validation::read_sim_forwards(read_text_file(sim), sim));
  }
  const validation::Comparison c = validation::compare(runs);
  if (vm.count("html")) {
    const std::string file = vm["html"].as<std::string>();
    io::OutputFile out(file);
    out.stream() << validation::comparison_to_html(c);
    out.close();
  }
  if (vm.count("json")) {
    std::cout << validation::comparison_to_json(c) << "\n";
  } else {
    print_comparison(c);
  }
  return 0;
}

void print_fit(const fit::FitReport& r) {
  std::printf("fitted from '%s' on %s, driver %s, %s\n\n", r.command.c_str(), r.card.c_str(),
              r.driver.c_str(), r.date.c_str());
  Table t({"term", "points", "R²", "worst residual", "at point", "field", "value", "was"});
  for (const auto& s : r.series) {
    const auto& q = s.linear.quality;
    const std::string worst = fmt_fixed(q.worst_abs, 3) + " us (" + pct(q.worst_abs_rel) + ")";
    for (std::size_t i = 0; i < std::max<std::size_t>(1, s.fields.size()); ++i) {
      const bool first = i == 0;
      std::vector<std::string> row{first ? s.term : "",
                                   first ? fmt_int(static_cast<long long>(s.points)) : "",
                                   first ? fmt_fixed(q.r2, 5) : "", first ? worst : "",
                                   first ? fmt_int(static_cast<long long>(q.worst_abs_at)) : ""};
      if (i < s.fields.size()) {
        row.insert(row.end(), {s.fields[i].field, fmt_fixed(s.fields[i].value, 4),
                               fmt_fixed(s.fields[i].base_value, 4)});
      } else {
        row.insert(row.end(), {"-", "-", "-"});
      }
      t.add(std::move(row));
    }
  }
  t.print();
  for (const auto& s : r.series) {
    for (const auto& u : s.unpriced) {
      std::printf("%s: unpriced %s %.4g us%s (%s)\n", s.term.c_str(), u.coefficient.c_str(),
                  u.value, u.coefficient == "intercept" ? "" : " per unit", u.note.c_str());
    }
    if (s.knee) {
      std::printf("%s: two pieces: knee at %s = %g, slopes %.4g / %.4g us per unit, R² %.5f\n",
                  s.term.c_str(), s.inputs[0].c_str(), s.knee->knee, s.knee->slope_below,
                  s.knee->slope_above, s.knee->quality.r2);
    }
    for (const auto& n : s.notes)
      std::printf("%s: %s\n", s.term.c_str(), n.c_str());
  }
  for (const auto& [what, terms] :
       {std::pair{"no series", &r.kept}, std::pair{"left out by --exclude", &r.excluded}}) {
    if (terms->empty()) continue;
    std::string list;
    for (const auto& k : *terms)
      list += (list.empty() ? "" : ", ") + k;
    std::printf("%s (base values kept): %s\n", what, list.c_str());
  }
}

int run_fit(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "points", po::value<std::string>()->required(),
      "the GPU micro-benchmarks' points file (docs/validation.md)")(
      "base", po::value<std::string>()->default_value("h200-pcie5"),
      "profile whose values stand for terms without a series (name or .json)")(
      "out", po::value<std::string>(), "write the fitted profile here")(
      "exclude", po::value<std::string>(),
      "calibration terms to leave out of the fit, comma separated (e.g. staging): their fields "
      "keep the base's values, as for terms without a series; each must have a series in the "
      "points")("json",
                "print the fit's report and the fitted profile as one JSON object instead of the "
                "table");
  po::variables_map vm;
  if (!parse_options(
          args, desc, vm,
          "kvtier validate fit --points P.json [--base NAME] [--out F] [--exclude T,...] "
          "[--json]"))
    return 0;
  std::vector<std::string> exclude;
  if (vm.count("exclude")) {
    const std::string& text = vm["exclude"].as<std::string>();
    exclude = comma_items(text);
    if (exclude.empty() || std::find(exclude.begin(), exclude.end(), "") != exclude.end())
      throw ConfigError("--exclude: an empty term in '" + text + "'");
  }
  const std::string points_path = vm["points"].as<std::string>();
  const fit::PointsFile points = [&points_path] {
    const std::string text = read_text_file(points_path);
    try {
      return fit::read_points(text);
    } catch (const ConfigError& e) {
      throw ConfigError("'" + points_path +
                        "': " + e.what());  // which file, when several are at hand
    }
  }();
  const fit::ProfileFit f =
      fit::fit_profile(points, sim::load_profile(vm["base"].as<std::string>()), exclude);
  if (vm.count("json")) {
    boost::json::object o{{"report", fit::fit_report_to_json(f.report)},
                          {"profile", boost::json::parse(hardware_profile_to_json(f.profile))}};
    std::cout << boost::json::serialize(o) << "\n";
  } else {
    print_fit(f.report);
  }
  if (vm.count("out")) {
    const std::string file = vm["out"].as<std::string>();
    io::OutputFile out(file);
    out.stream() << hardware_profile_to_json(f.profile);
    out.close();
  }
  return 0;
}

int run_validate(const std::vector<std::string>& args) {
  const char* usage =
      "usage: kvtier validate <calibrate|fit|compare> [options]   (each takes --help)\n"
      "  calibrate  GPU micro-benchmarks of every priced op, written as a points file\n"
      "  fit        a hardware profile fitted from calibration points\n"
      "  compare    per-forward error of the simulator against the GPU replay\n";
  if (args.size() < 2 || args[1] == "--help" || args[1] == "-h") {
    std::fputs(usage, args.size() < 2 ? stderr : stdout);
    return args.size() < 2 ? 2 : 0;
  }
  const std::string sub = args[1];
  if (sub == "calibrate") return validate_calibrate(sub_args(args, sub));
  if (sub == "compare") return run_compare(sub_args(args, sub));
  if (sub == "fit") return run_fit(sub_args(args, sub));
  throw ConfigError("unknown validate subcommand '" + sub + "' (calibrate, fit, compare)");
}

const CommandRegistrar reg{{"validate",
                            "hold the simulator to the GPU: calibrate, fit a profile, compare runs",
                            run_validate}};

}  // namespace
}  // namespace kvtier::cli
