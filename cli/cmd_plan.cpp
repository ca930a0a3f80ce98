// `kvtier plan`: the capacity planner. Replays a trace once per configuration through the
// simulator, computes the exact LRU miss-ratio curve in one pass and the Belady bound, and
// says how big the GPU pool must be (see docs/planner.md).
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/rest_of_model_options.hpp"
#include "cli/table.hpp"
#include "io/output_file.hpp"
#include "model/config_error.hpp"
#include "sim/planner.hpp"
#include "sim/profiles.hpp"

namespace kvtier::cli {
namespace {

int run_plan(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("trace", po::value<std::string>(),
                                                 "trace file (default: the bundled sample)")(
      "profile", po::value<std::string>()->default_value("h200-pcie5"),
      "hardware profile name or .json file")(
      "placement", po::value<std::string>()->default_value("all"), "device, mirror, host or all")(
      "unit", po::value<std::string>()->default_value("both"), "layer, all-layers or both")(
      "dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp8")(
      "policy", po::value<std::string>()->default_value("lru"),
      "mirror policy: lru, hybrid, prefetch")(
      "sizes", po::value<std::string>(),
      "pool sizes in slots, comma separated (default: automatic)")(
      "points", po::value<int>()->default_value(10), "automatic sizes to try")(
      "within", po::value<double>()->default_value(5.0), "percent of all-resident speed")(
      "chosen", po::value<double>()->default_value(10.0), "a second percent to report")(
      "no-belady", "skip the Belady bound")("threads", po::value<int>()->default_value(0),
                                            "threads (0: every core)")(
      "html", po::value<std::string>(), "write the HTML report to this file")(
      "json", "print every figure as JSON");
  add_rest_of_model_options(desc);
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier plan [--trace FILE] [--profile NAME] [options]"))
    return 0;

  std::string path =
      vm.count("trace") ? vm["trace"].as<std::string>() : traces::default_sample_path();
  if (path.empty()) throw ConfigError("no bundled sample trace in this build: give --trace FILE");
  const traces::TraceInput input = traces::file_trace(path);
  const CostModel cost(profile_with_rest_of_model(vm));

  sim::PlanConfig cfg;
  const std::string pl = vm["placement"].as<std::string>();
  if (pl != "all") cfg.placements = {parse_placement(pl, "--placement")};
  const std::string un = vm["unit"].as<std::string>();
  if (un != "both") cfg.units = {parse_residency_unit(un, "--unit")};
  cfg.dtype = parse_kv_dtype(vm["dtype"].as<std::string>(), "--dtype");
  cfg.policy = parse_mirror_policy(vm["policy"].as<std::string>());
  if (vm.count("sizes"))
    cfg.sizes = parse_positive_list(vm["sizes"].as<std::string>(), "--sizes", "integers");
  cfg.points = vm["points"].as<int>();
  if (cfg.points < 1) throw ConfigError("--points must be at least 1");
  cfg.within = vm["within"].as<double>() / 100.0;
  cfg.chosen = vm["chosen"].as<double>() / 100.0;
  cfg.belady = vm.count("no-belady") == 0;
  cfg.threads = vm["threads"].as<int>();
  // A bar on a terminal; a line per stage otherwise (a long plan in a log says where it is).
  Progress progress("kvtier plan", 0, "forwards", 1, true);
  cfg.on_stage = [&](const std::string& stage) { progress.stage(stage, "forwards"); };
  cfg.progress = [&](std::uint64_t done, std::uint64_t total) { progress.update(done, total); };
  const sim::PlanResult r = sim::plan(input, cost, cfg);
  progress.finish();

  if (vm.count("html")) {
    const std::string file = vm["html"].as<std::string>();
    io::OutputFile out(file);
    out.stream() << sim::plan_to_html(r);
    out.close();
  }
  if (vm.count("json")) {
    std::cout << sim::plan_to_json(r) << "\n";
    return 0;
  }
  std::printf("trace %s: %lld forwards, %lld requests, %lld decode + %lld prefill tokens\n",
              r.trace.c_str(), static_cast<long long>(r.stats.forwards),
              static_cast<long long>(r.stats.requests),
              static_cast<long long>(r.stats.decode_tokens),
              static_cast<long long>(r.stats.prefill_tokens));
  std::printf("profile %s (%s device memory), %s; smallest pool %lld slots\n", r.profile.c_str(),
              fmt_bytes(static_cast<double>(r.device_capacity_bytes)).c_str(),
              std::string(to_string(r.dtype)).c_str(), static_cast<long long>(r.min_slots));
  std::printf("profile %s: %s\n", r.profile.c_str(), r.trust.c_str());
  std::printf(
      "rest of the model (non-QSA layers, not simulated): %s ms over the trace (%s); "
      "tokens/s include it, \"QSA ms\" does not\n\n",
      fmt_fixed(r.rest_us / 1e3, 2).c_str(), rest_figures(r.rest).c_str());
  Table t({"placement", "unit", "slots", "decode tok/s", "prefill tok/s", "QSA ms", "hit rate",
           "LRU misses", "Belady", "drops", "device memory"});
  auto add = [&](const std::string& p, const std::string& u, const std::string& s,
                 const sim::PointSummary& x, const std::string& lru, const std::string& opt) {
    t.add({p, u, s, fmt_fixed(x.decode_tps, 1), fmt_fixed(x.prefill_tps, 1),
           fmt_fixed(x.qsa_us / 1e3, 2),
           x.has_lookups ? fmt_fixed(x.hit_rate * 100, 2) + "%" : "n/a", lru, opt, fmt_int(x.drops),
           fmt_bytes(static_cast<double>(x.device_bytes)) +
               (x.fits_device ? "" : " (does not fit)")});
  };
  if (r.has_device) add("device", "-", "-", r.device, "-", "-");
  if (r.has_host) add("host", "-", "-", r.host, "-", "-");
  for (const auto& us : r.units) {
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      add("mirror", std::string(to_string(us.unit)), fmt_int(us.sizes[i]), us.points[i],
          fmt_int(us.lru_misses[i]), us.belady_misses.empty() ? "-" : fmt_int(us.belady_misses[i]));
    }
  }
  t.print();
  auto slots_or_none = [](std::int64_t v) {
    return v != 0 ? std::to_string(v) + " slots" : std::string("none of these sizes");
  };
  for (const auto& us : r.units) {
    std::printf("\nmirror %s: cliff at %s; within %.0f%%: %s; within %.0f%%: %s",
                std::string(to_string(us.unit)).c_str(), slots_or_none(us.cliff_slots).c_str(),
                r.within * 100, slots_or_none(us.within_slots).c_str(), r.chosen * 100,
                slots_or_none(us.chosen_slots).c_str());
    if (!us.belady_note.empty()) std::printf(" (Belady %s)", us.belady_note.c_str());
  }
  std::printf("\n\nrecommendation: %s\n", r.recommendation.c_str());
  return 0;
}

const CommandRegistrar reg{
    {"plan", "size the GPU pool for a trace: MRC, Belady bound, tokens/s", run_plan}};

}  // namespace
}  // namespace kvtier::cli
