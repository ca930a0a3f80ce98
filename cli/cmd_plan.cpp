// `kvtier plan`: the capacity planner. Replays a trace once per configuration through the
// simulator, computes the exact LRU miss-ratio curve in one pass and the Belady bound, and
// says how big the GPU pool must be (see docs/planner.md).
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/plan_concurrency.hpp"
#include "cli/progress.hpp"
#include "cli/rest_of_model_options.hpp"
#include "cli/table.hpp"
#include "io/output_file.hpp"
#include "model/config_error.hpp"
#include "sim/micro_batch_groups.hpp"
#include "sim/planner.hpp"
#include "sim/profiles.hpp"

namespace kvtier::cli {
namespace {

// --objective and --tpot-ms (a TPOT target makes the objective tpot).
sim::ObjectiveSpec objective_of(const po::variables_map& vm) {
  sim::ObjectiveSpec o;
  const std::string& name = vm["objective"].as<std::string>();
  if (name == "prefill") {
    o.kind = sim::Objective::prefill;
  } else if (name != "decode") {
    throw ConfigError("--objective: decode or prefill (a TPOT target: --tpot-ms), got '" + name +
                      "'");
  }
  if (vm.count("tpot-ms")) {
    if (o.kind == sim::Objective::prefill)
      throw ConfigError("--tpot-ms ranks by decode: it cannot go with --objective prefill");
    o.kind = sim::Objective::tpot;
    o.tpot_target_ms = vm["tpot-ms"].as<double>();
    if (!(o.tpot_target_ms > 0 && o.tpot_target_ms <= 1e9))
      throw ConfigError("--tpot-ms: a positive number of milliseconds per output token, got " +
                        fmt_fixed(o.tpot_target_ms, 3));
  }
  return o;
}

// Every configuration simulated, one row each; the recommended one marked with "*".
void print_points(const sim::PlanResult& r) {
  const bool tpot = r.decision.objective.kind == sim::Objective::tpot;
  // "core misses" are the simulated pool's (the decisions use them); the classic-LRU curve
  // beside them is the one-pass MRC, which ignores the core's step ties, truncation and bypass.
  std::vector<std::string> head = {"placement",
                                   "unit",
                                   "slots",
                                   "decode tok/s",
                                   "prefill tok/s",
                                   "TTFT p95 ms",
                                   "TPOT p95 ms",
                                   "QSA ms",
                                   "hit rate",
                                   "core misses",
                                   "classic-LRU misses (MRC)",
                                   "Belady",
                                   "drops",
                                   "device memory"};
  if (tpot) head.insert(head.begin() + 7, "step ms");
  const bool groups = r.micro_batches_auto || r.micro_batches > 1;
  if (groups) head.insert(head.begin() + 3, "groups");
  Table t(head);
  const sim::ConfigFigures& pick = r.decision.chosen;
  auto add = [&](Placement p, const std::string& u, std::int64_t slots, const sim::PointSummary& x,
                 const std::string& lru, const std::string& opt) {
    const bool chosen =
        r.decision.found && pick.placement == p &&
        (p != Placement::mirror || (u == to_string(pick.unit) && slots == pick.slots));
    std::vector<std::string> row = {
        (chosen ? "* " : "") + std::string(to_string(p)),
        u,
        p == Placement::mirror ? fmt_int(slots) : "-",
        fmt_fixed(x.decode_tps, 1),
        fmt_fixed(x.prefill_tps, 1),
        fmt_fixed(x.ttft_p95_us / 1e3, 2),
        fmt_fixed(x.tpot_p95_us / 1e3, 2),
        fmt_fixed(x.qsa_us / 1e3, 2),
        x.has_lookups ? fmt_fixed(x.hit_rate * 100, 2) + "%" : "n/a",
        x.has_lookups ? fmt_int(x.misses) : "-",
        lru,
        opt,
        fmt_int(x.drops),
        fmt_bytes(static_cast<double>(x.device_bytes)) + (x.fits_device ? "" : " (over budget)")};
    if (tpot) row.insert(row.begin() + 7, fmt_fixed(sim::tpot_ms(x), 2));
    if (groups) row.insert(row.begin() + 3, fmt_int(x.micro_batches));
    t.add(row);
  };
  add(Placement::device, r.has_device ? "-" : "(ideal)", 0, r.ideal, "-", "-");
  if (r.has_host) add(Placement::host, "-", 0, r.host, "-", "-");
  for (const auto& us : r.units) {
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      add(Placement::mirror, std::string(to_string(us.unit)), us.sizes[i], us.points[i],
          fmt_int(us.classic_lru_misses[i]),
          us.belady_misses.empty() || us.belady_misses[i] == sim::kNoBelady
              ? "-"
              : fmt_int(us.belady_misses[i]));
    }
  }
  t.print();
}

int run_plan(const std::vector<std::string>& args) {
  po::options_description desc("options");
  add_trace_profile_options(desc);
  desc.add_options()("placement", po::value<std::string>()->default_value("all"),
                     "device, mirror, host or all")(
      "unit", po::value<std::string>()->default_value("both"), "layer, all-layers or both")(
      "dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp8")(
      "policy", po::value<std::string>()->default_value("lru"),
      "mirror policy: lru, hybrid, prefetch")(
      "sizes", po::value<std::string>(),
      "pool sizes in slots, comma separated (default: automatic)")(
      "points", po::value<int>()->default_value(10), "automatic sizes to try")(
      "objective", po::value<std::string>()->default_value("decode"),
      "what the recommendation ranks by: decode (tokens/s) or prefill (tokens/s)")(
      "tpot-ms", po::value<double>(),
      "a TPOT target in ms per output token: recommend the fastest decode among the "
      "configurations that meet it (the figure: the mean span of the forward a decode token waits "
      "for, mixed forwards whole)")(
      "host-gib", po::value<double>()->default_value(0.0),
      "pinned host RAM the host bank may use, in GiB (0: not checked)")(
      "within", po::value<double>()->default_value(5.0),
      "percent: the smallest mirror pool within this of the recommendation's figure")(
      "chosen", po::value<double>()->default_value(10.0), "a second percent to report")(
      "micro-batches", po::value<std::string>()->default_value("auto"),
      "price host and mirror in this many micro-batches, as `kvtier run --micro-batches K` runs "
      "them (each mirror size the groups' pools together; the MRC and Belady columns stay one "
      "pool's of every request), or auto: per configuration, the count `kvtier run "
      "--micro-batches auto` would take for the trace's widest forward (docs/planner.md, "
      "\"Micro-batches\")")("no-belady", "skip the Belady bound")(
      "threads", po::value<int>()->default_value(0), "threads (0: every core)")(
      "html", po::value<std::string>(),
      "write the HTML report to this file (charts by GiB of device memory, the decision marked)")(
      "json", "print every figure as JSON");
  add_device_kv_option(desc, "the card's memory, from --profile");
  add_rest_of_model_options(desc);
  add_concurrency_options(desc);
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "kvtier plan [--trace FILE] [--profile NAME] [options]\n"
                     "       kvtier plan --concurrency 1,8,32 [--prompt N] [--decode N] [options]"))
    return 0;

  // --concurrency plans generated workloads, one per level, instead of a trace.
  const bool levels = wants_concurrency(vm);
  std::string path = vm.count("trace") ? vm["trace"].as<std::string>()
                     : levels          ? std::string()
                                       : traces::default_sample_path();
  if (path.empty() && !levels)
    throw ConfigError("no bundled sample trace in this build: give --trace FILE");
  const traces::TraceInput input = levels ? traces::TraceInput{} : traces::file_trace(path);
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
  const std::optional<int> micro = parse_count_or_auto(vm["micro-batches"].as<std::string>(),
                                                       "--micro-batches", sim::kMaxSimMicroBatches);
  cfg.micro_batches_auto = !micro;
  if (micro) cfg.micro_batches = *micro;
  cfg.threads = vm["threads"].as<int>();
  const DeviceBudget budget =
      device_kv_budget(vm, cost.profile().device_memory_gib, "profile " + cost.profile().name);
  cfg.device_kv_bytes = budget.kv_is_card ? 0 : budget.kv_bytes;
  cfg.host_capacity_bytes = gib_option(vm, "host-gib");
  cfg.objective = objective_of(vm);
  if (levels) return run_plan_concurrency(vm, cost, cfg);
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
    std::fprintf(stderr, "wrote report to %s\n", file.c_str());
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
  if (const std::string note = sim::micro_batches_note(r); !note.empty())
    std::printf("%s\n", note.c_str());
  std::printf("%s%s\n", describe(r.budget).c_str(),
              r.host_capacity_bytes > 0
                  ? (", host RAM " + fmt_bytes(static_cast<double>(r.host_capacity_bytes))).c_str()
                  : "");
  std::printf(
      "rest of the model (non-QSA layers, not simulated): %s ms over the trace (%s); "
      "tokens/s include it, \"QSA ms\" does not\n\n",
      fmt_fixed(r.rest_us / 1e3, 2).c_str(), rest_figures(r.rest).c_str());
  print_points(r);
  auto slots_or_none = [](std::int64_t v) {
    return v != 0 ? std::to_string(v) + " slots" : std::string("none of these sizes");
  };
  for (const auto& us : r.units) {
    std::printf(
        "\nmirror %s: cliff at %s; within %.0f%% of the recommendation: %s; within %.0f%%: %s",
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
