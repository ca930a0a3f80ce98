#include "cli/plan_concurrency.hpp"

#include <chrono>
#include <climits>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/progress.hpp"
#include "cli/rest_of_model_options.hpp"
#include "cli/table.hpp"
#include "model/config_error.hpp"
#include "sim/concurrency_sweep.hpp"
#include "traces/generator.hpp"

namespace kvtier::cli {
namespace {

// The workload options, which mean something only with --concurrency.
constexpr const char* kWorkloadOptions[] = {"prompt", "decode",   "prefill-chunk", "preset",
                                            "seed",   "geometry", "fill-depth"};
constexpr std::int64_t kDefaultPrompt = 32768, kDefaultDecode = 128;

std::string ms(double us) {
  return fmt_fixed(us / 1e3, 2);
}

// The generated workload from the options, checked (each refusal names its option).
traces::GenParams workload(const po::variables_map& vm, const Geometry& g) {
  traces::GenParams p = traces::gen_preset(vm["preset"].as<std::string>());
  p.prompt_min = p.prompt_max = vm.count("prompt") ? vm["prompt"].as<long long>() : kDefaultPrompt;
  p.decode_min = p.decode_max = vm.count("decode") ? vm["decode"].as<long long>() : kDefaultDecode;
  if (vm.count("prefill-chunk")) p.prefill_chunk = vm["prefill-chunk"].as<long long>();
  if (vm.count("seed")) p.seed = vm["seed"].as<unsigned long long>();
  if (vm.count("fill-depth")) p.fill_depth = vm["fill-depth"].as<long long>();
  if (p.fill_depth < 0)
    throw ConfigError("--fill-depth: 0 or more tokens, got " + std::to_string(p.fill_depth));
  if (p.prompt_max < 1)
    throw ConfigError("--prompt: at least 1 token, got " + std::to_string(p.prompt_max));
  if (p.decode_max < 1)
    throw ConfigError("--decode: at least 1 token, got " + std::to_string(p.decode_max));
  if (p.prefill_chunk < 1 || p.prefill_chunk > INT32_MAX)
    throw ConfigError("--prefill-chunk: 1.." + std::to_string(INT32_MAX) + " tokens, got " +
                      std::to_string(p.prefill_chunk));
  try {
    traces::TraceGenerator check(g, p);  // the context limit, before any level runs
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("--concurrency workload: ") + e.what());
  }
  return p;
}

void print_table(const sim::ConcurrencyResult& r) {
  const sim::PlanResult& first = r.levels.front().plan;
  const std::string depth =
      r.workload.fill_depth > 0
          ? " at depth " + fmt_int(r.workload.fill_depth) +
                " (the tokens before it filled, not prefilled, as `kvtier run --fill-depth`)"
          : "";
  std::printf(
      "workload: at each level that many requests in flight, each %lld prompt + %lld decode "
      "tokens%s (preset %s, seed %llu, prefill chunks of %lld), all admitted at once: one "
      "wave\n",
      static_cast<long long>(r.workload.prompt_max), static_cast<long long>(r.workload.decode_max),
      depth.c_str(), r.preset.c_str(), static_cast<unsigned long long>(r.workload.seed),
      static_cast<long long>(r.workload.prefill_chunk));
  std::printf("profile %s (%s device memory): %s\n", r.profile.c_str(),
              fmt_bytes(static_cast<double>(first.device_capacity_bytes)).c_str(),
              first.trust.c_str());
  // each level's groups are in its rows; the note's rule (and its trust) once
  if (first.micro_batches_auto || first.micro_batches > 1)
    std::printf("%s\n", sim::micro_batches_note(first, false).c_str());
  std::printf(
      "decode tok/s: decode tokens over their forwards' time (mixed forwards split by tokens); "
      "TTFT: arrival to first token; TPOT: each decode token's wait since its request's previous "
      "token\n\n");
  Table t({"in flight", "placement", "unit", "slots", "size rule", "groups", "device memory",
           "decode tok/s", "TTFT p50 ms", "TTFT p95 ms", "TPOT p50 ms", "TPOT p95 ms"});
  for (const sim::ConcurrencyLevel& l : r.levels) {
    for (const sim::LevelPoint& p : l.points) {
      const bool mirror = p.placement == Placement::mirror;
      const sim::PointSummary& x = p.point;
      t.add({fmt_int(l.concurrency), std::string(to_string(p.placement)),
             mirror ? std::string(to_string(p.unit)) : "-", mirror ? fmt_int(p.slots) : "-",
             mirror ? p.size_rule : "-", fmt_int(x.micro_batches),
             fmt_bytes(static_cast<double>(x.device_bytes)) +
                 (x.fits_device ? "" : " (does not fit)"),
             fmt_fixed(x.decode_tps, 1), ms(x.ttft_p50_us), ms(x.ttft_p95_us), ms(x.tpot_p50_us),
             ms(x.tpot_p95_us)});
    }
  }
  t.print();
  std::printf("\n");
  for (const sim::ConcurrencyLevel& l : r.levels)
    std::printf("%lld in flight: %s\n", static_cast<long long>(l.concurrency),
                l.plan.recommendation.c_str());
}

}  // namespace

void add_concurrency_options(po::options_description& desc) {
  desc.add_options()(
      "concurrency", po::value<std::string>(),
      "requests in flight, comma separated (e.g. 1,8,32): plan a generated workload at each "
      "level (all its requests admitted at once) and print throughput and latency per level "
      "and placement; the workload options below go with it")(
      "prompt", po::value<long long>(), "--concurrency: prompt tokens per request (default 32768)")(
      "decode", po::value<long long>(), "--concurrency: decode tokens per request (default 128)")(
      "prefill-chunk", po::value<long long>(),
      "--concurrency: tokens per prefill row (default: the preset's, 2048)")(
      "preset", po::value<std::string>()->default_value("dsv4-flash"),
      "--concurrency: the generator's selection behaviour (dsv4-flash, sparse-trained, "
      "dense-topk, shared-indexer)")("seed", po::value<unsigned long long>(),
                                     "--concurrency: the generator's seed (default 1)")(
      "geometry", po::value<std::string>(),
      "--concurrency: geometry JSON file (default: Flash-Next)")(
      "fill-depth", po::value<long long>(),
      "--concurrency: each request begins at this depth, the tokens before it in the KV cache "
      "already and never prefilled (decode at depth, as `kvtier run --fill-depth` runs it; "
      "default 0)");
}

bool wants_concurrency(const po::variables_map& vm) {
  if (!vm.count("concurrency")) {
    for (const char* o : kWorkloadOptions) {
      if (vm.count(o) && !vm[o].defaulted())
        throw ConfigError(std::string("--") + o +
                          " describes the generated workload of --concurrency; give "
                          "--concurrency LEVELS with it");
    }
    return false;
  }
  if (vm.count("trace"))
    throw ConfigError(
        "--concurrency plans a generated workload at each level (--prompt, --decode, --preset); "
        "it does not re-batch --trace: give one or the other");
  if (vm.count("html"))
    throw ConfigError("--html reports one plan; with --concurrency use --json or the table");
  return true;
}

int run_plan_concurrency(const po::variables_map& vm, const CostModel& cost,
                         const sim::PlanConfig& cfg) {
  sim::ConcurrencyConfig cc;
  if (vm.count("geometry")) cc.geometry = read_geometry_file(vm["geometry"].as<std::string>());
  cc.preset = vm["preset"].as<std::string>();
  cc.workload = workload(vm, cc.geometry);
  cc.levels = parse_positive_list(vm["concurrency"].as<std::string>(), "--concurrency", "integers");
  sim::check_levels(cc.levels, cc.geometry, cc.workload);
  cc.plan = cfg;
  std::optional<Progress> progress;  // the planner's bar for the level running (terminal only)
  cc.plan.progress = [&](std::uint64_t done, std::uint64_t total) {
    if (progress) progress->update(done, total);
  };
  cc.plan.on_stage = [&](const std::string& stage) {
    if (progress) progress->stage(stage, "forwards");
  };
  auto start = std::chrono::steady_clock::now();
  cc.on_level_start = [&](std::size_t i, std::int64_t level) {
    start = std::chrono::steady_clock::now();
    std::fprintf(stderr, "kvtier plan: level %zu of %zu, %lld in flight: generating and planning\n",
                 i + 1, cc.levels.size(), static_cast<long long>(level));
    progress.emplace("kvtier plan", 0, "forwards");
  };
  cc.on_level_done = [&](std::size_t i, const sim::ConcurrencyLevel& l) {
    if (progress) progress->finish();
    progress.reset();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "kvtier plan: level %zu of %zu, %lld in flight: done in %.1f s\n", i + 1,
                 cc.levels.size(), static_cast<long long>(l.concurrency), s);
  };
  const sim::ConcurrencyResult r = sim::concurrency_sweep(cost, cc);
  if (vm.count("json")) {
    std::cout << sim::concurrency_to_json(r) << "\n";
  } else {
    print_table(r);
  }
  return 0;
}

}  // namespace kvtier::cli
