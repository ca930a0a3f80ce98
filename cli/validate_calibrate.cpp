// `kvtier validate calibrate [--out POINTS.json] [--quick] [--repeats N] [--json]`: times the real
// kernels and copies of the CUDA backend on the GPU, swept over what each cost depends on
// (cuda/calibrate/), and writes the points file the fitter reads (docs/validation.md). Prints one
// line per sweep on stderr as it finishes, then a table of the sweeps (or --json) and the path.
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "cli/options.hpp"
#include "cli/run_modes.hpp"
#include "cli/table.hpp"
#include "model/config_error.hpp"
#if defined(KVTIER_WITH_CUDA)
#include "cuda/calibrate/calibrate.hpp"
#include "cuda/host_bank.hpp"
#endif

namespace kvtier::cli {
namespace {

#if defined(KVTIER_WITH_CUDA)
std::string command_line(const std::vector<std::string>& args) {
  std::string c = "kvtier validate calibrate";
  for (std::size_t i = 1; i < args.size(); ++i)
    c += " " + args[i];
  return c;
}

// "1.2 .. 3456.7" us, the range of a sweep's times.
std::string time_range(const calibrate::Series& s) {
  if (s.points.empty()) return "-";
  double lo = s.points.front().back(), hi = lo;
  for (const auto& p : s.points) {
    lo = std::min(lo, p.back());
    hi = std::max(hi, p.back());
  }
  return fmt_fixed(lo, 2) + " .. " + fmt_fixed(hi, 1);
}

void print_table(const calibrate::Points& p, const std::string& out) {
  Table t({"term", "sweep", "points", "us", "seconds", "in file"});
  for (const auto& s : p.series)
    t.add({s.term, s.sweep, fmt_int(static_cast<long long>(s.points.size())), time_range(s),
           fmt_fixed(s.seconds, 1),
           std::string(s.in_points_file ? "yes" : "no") + (s.truncated ? " (cut at budget)" : "")});
  t.print();
  std::printf("\ncard %s, driver %s, %s (UTC)\npoints file: %s\n", p.card.c_str(), p.driver.c_str(),
              p.date.c_str(), out.c_str());
}

void print_json(const calibrate::Points& p, const std::string& out,
                const std::vector<std::string>& left_out) {
  boost::json::array series;
  for (const auto& s : p.series) {
    boost::json::array inputs, points;
    for (const auto& n : s.inputs)
      inputs.push_back(boost::json::string(n));
    for (const auto& pt : s.points)
      points.push_back(boost::json::array(pt.begin(), pt.end()));
    series.push_back({{"term", s.term},
                      {"sweep", s.sweep},
                      {"inputs", std::move(inputs)},
                      {"points", std::move(points)},
                      {"in_points_file", s.in_points_file},
                      {"timing", s.timing},
                      {"seconds", s.seconds},
                      {"truncated", s.truncated}});
  }
  boost::json::array lo(left_out.begin(), left_out.end());
  boost::json::array failures(p.failures.begin(), p.failures.end());
  std::cout << boost::json::serialize(boost::json::object{{"points_file", out},
                                                          {"card", p.card},
                                                          {"driver", p.driver},
                                                          {"date", p.date},
                                                          {"command", p.command},
                                                          {"series", std::move(series)},
                                                          {"terms_left_out", std::move(lo)},
                                                          {"failures", std::move(failures)}})
            << "\n";
}
#endif

}  // namespace

int validate_calibrate(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "out", po::value<std::string>()->default_value("calibration-points.json"),
      "the points file to write (through a temporary file, renamed when complete)")(
      "quick", "a small sweep (a few seconds; for tests)")(
      "repeats", po::value<int>()->default_value(11), "timed repetitions per point (the median)")(
      "json", "print every sweep as JSON instead of a table");
  po::variables_map vm;
  if (!parse_options(
          args, desc, vm,
          "kvtier validate calibrate [--out POINTS.json] [--quick] [--repeats N] [--json]\n\n"
          "Times the CUDA backend's own kernels and copies on the GPU (launches, bulk copies, "
          "the miss copy, in-place host reads, the mirror's store, the attention in bf16 and "
          "fp8, index and top-k, the residency step), swept over what each cost depends on, "
          "and writes the points file that the fitter turns into a hardware profile "
          "(docs/validation.md). Well under a minute on an H200 (each group of sweeps stops at "
          "its share of a 200 s budget); needs a GPU."))
    return 0;
  const int repeats = vm["repeats"].as<int>();
  if (repeats < 1) throw ConfigError("--repeats must be positive, got " + std::to_string(repeats));
#if defined(KVTIER_WITH_CUDA)
  if (cuda::device_count() == 0)
    throw ConfigError(
        "validate calibrate needs a GPU: no CUDA device (cudaGetDeviceCount found none)");
  calibrate::CalibrationOptions o;
  o.quick = vm.count("quick") > 0;
  o.repeats = repeats;
  o.command = command_line(args);
  const std::string out = vm["out"].as<std::string>();
  calibrate::check_points_path(out);
  calibrate::Points p =
      calibrate::run_calibration(o, [](const calibrate::Series& s, int done, int total) {
        std::fprintf(stderr, "calibrate [%2d/%d] %-15s %3zu points %6.1f s  %s%s\n", done, total,
                     s.term.c_str(), s.points.size(), s.seconds, s.sweep.c_str(),
                     s.truncated ? " (cut at its time budget)" : "");
      });
  const std::vector<std::string> left_out = calibrate::leave_out_short_terms(p);
  for (const auto& term : left_out)
    std::fprintf(stderr, "calibrate: '%s' has too few points for a fit; left out of the file\n",
                 term.c_str());
  calibrate::write_points_file(p, out);
  if (vm.count("json")) {
    print_json(p, out, left_out);
  } else {
    print_table(p, out);
  }
  for (const auto& f : p.failures)
    std::fprintf(stderr, "calibrate: failed: %s\n", f.c_str());
  return p.failures.empty() ? 0 : 2;
#else
  throw ConfigError(
      "validate calibrate: this kvtier was built without the CUDA backend (the calibration "
      "needs a GPU)");
#endif
}

}  // namespace kvtier::cli
