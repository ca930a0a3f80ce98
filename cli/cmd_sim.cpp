// `kvtier sim`: one simulated configuration: tokens/s, hit rate per layer, bytes each way,
// PCIe utilisation, drops; optionally a Chrome-trace timeline and every eviction decision.
#include <algorithm>
#include <boost/json.hpp>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/rest_of_model_options.hpp"
#include "cli/table.hpp"
#include "io/output_file.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/page_space.hpp"
#include "model/profile_trust.hpp"
#include "sim/micro_batch_groups.hpp"
#include "sim/planner.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "sim/replay_config.hpp"

namespace kvtier::cli {
namespace {

po::options_description sim_options() {
  po::options_description desc("options");
  add_trace_profile_options(desc);
  desc.add_options()("placement", po::value<std::string>()->default_value("mirror"),
                     "device, mirror or host")(
      "unit", po::value<std::string>()->default_value("layer"), "layer or all-layers")(
      "dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp8")(
      "policy", po::value<std::string>()->default_value("lru"), "lru, hybrid or prefetch")(
      "slots", po::value<long long>(),
      "mirror pool slots (per layer with --unit layer); placement mirror needs it")(
      "micro-batches", po::value<std::string>()->default_value("1"),
      "host or mirror, the model's forward: split the requests into this many groups, each "
      "with its share of the pool's slots, as `kvtier run --micro-batches K` does; a forward of "
      "decode rows runs the groups' forwards at once, any other one group after another; or "
      "auto: the count `kvtier run --micro-batches auto` would take for the trace's widest "
      "forward (docs/planner.md, \"Micro-batches\")")(
      "no-graphs", "price kernel launches as plain stream launches")(
      "forward", po::value<std::string>()->default_value("model"),
      "which forward is priced: model (kvtier run --weights: non-QSA layers, indexer, the QSA "
      "layers) or trace-replay (kvtier run --trace: the QSA layers' store .. attention, the span "
      "its gpu_us measures)")(
      "copy-first",
      "mirror: price the residency step before the attention, which then reads every page from "
      "the pool (as the backend runs fp8 and --copy-first); bf16 default: the attention reads "
      "the pages it missed in place while the step runs beside it")(
      "per-forward",
      "with --json: every forward's start, end, span and residency counts (\"per_forward\"); "
      "--json always gives every request's TTFT, TPOT and link share (\"per_request\")")(
      "timeline", po::value<std::string>(), "write a Chrome trace (Perfetto) of every op")(
      "decisions", po::value<std::string>(), "write every install/eviction as JSON lines")(
      "json", "print the figures as JSON");
  add_device_kv_option(desc, "the card's memory, from --profile");
  add_rest_of_model_options(desc);
  return desc;
}

// The simulation's configuration from the options (each checked, named when refused).
sim::SimConfig sim_config(const po::variables_map& vm) {
  sim::SimConfig c;
  c.placement = parse_placement(vm["placement"].as<std::string>(), "--placement");
  c.unit = parse_residency_unit(vm["unit"].as<std::string>(), "--unit");
  c.dtype = parse_kv_dtype(vm["dtype"].as<std::string>(), "--dtype");
  c.policy = parse_mirror_policy(vm["policy"].as<std::string>());
  if (c.placement == Placement::mirror && !vm.count("slots"))
    throw ConfigError(
        "placement mirror needs --slots N: the GPU pool's slots (per layer with --unit layer); "
        "`kvtier plan` sizes the pool for a trace");
  c.pool_slots = vm.count("slots") ? vm["slots"].as<long long>() : 0;
  if (c.pool_slots < 0)
    throw ConfigError("--slots: pool size must be positive, got " + std::to_string(c.pool_slots));
  if (c.pool_slots > kMaxPages)
    throw ConfigError("--slots: at most " + std::to_string(kMaxPages) +
                      " (slot ids are 32-bit), got " + std::to_string(c.pool_slots));
  c.record_timeline = vm.count("timeline") != 0;
  const std::string& forward = vm["forward"].as<std::string>();
  if (forward != "model" && forward != "trace-replay")
    throw ConfigError("--forward: expected model or trace-replay, got '" + forward + "'");
  c.forward =
      forward == "model" ? frontend::ForwardKind::model : frontend::ForwardKind::trace_replay;
  c.copy_first = vm.count("copy-first") != 0;
  // auto: taken once the trace's bounds are known (run_sim)
  c.micro_batches = parse_count_or_auto(vm["micro-batches"].as<std::string>(), "--micro-batches",
                                        sim::kMaxSimMicroBatches)
                        .value_or(1);
  c.record_forwards = vm.count("per-forward") != 0;
  return c;
}

// Everything `kvtier sim` reports, computed once for the JSON and the table.
struct SimReport {
  const traces::TraceInput& input;
  const CostModel& cost;
  const sim::SimConfig& c;
  const sim::SimResult& r;
  sim::PointSummary s;
  double d2h_util = 0;
  sim::LayerStats t;
  sim::RestOfModel rest;
  double rest_us = 0, qsa_us = 0;
  std::string trust;
  DeviceBudget budget;

  SimReport(const traces::TraceInput& in, const CostModel& cm, const sim::SimConfig& cfg,
            const sim::SimResult& res, const DeviceBudget& b)
      : input(in),
        cost(cm),
        c(cfg),
        r(res),
        s(sim::summarize(res)),
        t(res.total()),
        rest(sim::rest_of_model(cm.profile())),
        trust(trust_line(cm.profile())),
        budget(b) {
    const double span = static_cast<double>(std::max<std::int64_t>(1, r.makespan_ns));
    d2h_util = static_cast<double>(r.busy_ns[static_cast<int>(sim::Resource::d2h)]) / span;
    // The QSA stack and the rest of the model apart (sim/rest_of_model.hpp).
    rest_us = rest.total_us(r.forwards, r.decode_tokens + r.prefill_tokens);
    qsa_us = s.forward_us - rest_us;
  }
};

void print_sim_json(const SimReport& rep, const std::string& forward, bool micro_auto) {
  const auto& [input, cost, c, r, s, d2h_util, t, rest, rest_us, qsa_us, trust, budget] = rep;
  boost::json::array layers;
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    const auto& x = r.layers[l];
    layers.push_back({{"layer", input.header.geometry.qsa_layer_ids[l]},
                      {"lookups", x.lookups},
                      {"hits", x.hits},
                      {"misses", x.misses},
                      {"bypassed", x.bypassed},
                      {"evictions", x.evictions},
                      {"drops", x.drops},
                      {"prefetched", x.prefetched}});
  }
  boost::json::object o{
      {"trace", input.name},
      {"profile", cost.profile().name},
      {"placement", std::string(to_string(c.placement))},
      {"unit", std::string(to_string(c.unit))},
      {"dtype", std::string(to_string(c.dtype))},
      {"policy", std::string(to_string(c.policy))},
      {"slots", c.pool_slots},
      {"micro_batches", c.micro_batches},
      {"micro_batches_auto", micro_auto},
      {"forwards", r.forwards},
      {"decode_tokens_per_s", s.decode_tps},
      {"prefill_tokens_per_s", s.prefill_tps},
      {"hit_rate", s.has_lookups ? boost::json::value(s.hit_rate) : boost::json::value(nullptr)},
      {"drops", t.drops},
      {"h2d_bytes", r.h2d_bytes},
      {"d2h_bytes", r.d2h_bytes},
      {"copy_bytes", r.copy_bytes},
      {"in_place_bytes", r.in_place_bytes},
      {"h2d_utilisation", s.h2d_util},
      {"d2h_utilisation", d2h_util},
      {"makespan_ns", r.makespan_ns},
      {"device_bytes", r.device_bytes},
      {"host_bytes", r.host_bytes},
      {"device_capacity_bytes", budget.card_bytes},
      {"device_kv_budget_bytes", budget.kv_bytes},
      {"forward", forward},
      {"layers", std::move(layers)},
      {"forward_us", s.forward_us},
      {"qsa_stack_us", qsa_us},
      {"rest_of_model", sim::rest_of_model_json(rest, rest_us)},
      {"trust", trust}};

  if (c.record_forwards) {
    // qsa_us: the QSA layers' span, comparable with `kvtier run --trace`'s gpu_us (the
    // trace-replay forward); the model forward's span includes the rest of the model.
    boost::json::array fw;
    for (const sim::ForwardTime& x : r.forwards_detail) {
      boost::json::object e{{"forward", x.forward},
                            {"rows", x.rows},
                            {"tokens", x.tokens},
                            {"decode_tokens", x.decode_tokens},
                            {"start_us", static_cast<double>(x.start_ns) / 1e3},
                            {"end_us", static_cast<double>(x.end_ns) / 1e3},
                            {"span_us", static_cast<double>(x.span_ns) / 1e3},
                            {"hits", x.hits},
                            {"misses", x.misses},
                            {"evictions", x.evictions},
                            {"drops", x.drops}};
      if (c.forward == frontend::ForwardKind::trace_replay)
        e["qsa_us"] = static_cast<double>(x.span_ns) / 1e3;
      fw.push_back(std::move(e));
    }
    o["per_forward"] = std::move(fw);
  }
  o["latency"] = sim::latency_json(r.latency);
  o["per_request"] = sim::requests_json(r.requests, r.latency.h2d_bytes);
  std::cout << boost::json::serialize(o) << "\n";
}

// "p50 / p95 / p99 UNIT" of ns figures in ms, or "n/a" when there are none.
std::string ms3(const sim::Percentiles& p, const std::string& unit) {
  if (p.count == 0) return "n/a";
  return fmt_fixed(p.p50 / 1e6, 2) + " / " + fmt_fixed(p.p95 / 1e6, 2) + " / " +
         fmt_fixed(p.p99 / 1e6, 2) + " " + unit;
}

std::string ms(double ns) {
  return fmt_fixed(ns / 1e6, 2);
}

// Every request when there are few; else the few with the longest TTFT and the worst TPOT p99.
void print_requests(const sim::SimResult& r) {
  constexpr std::size_t kAll = 12, kWorst = 5;
  const std::vector<sim::RequestTimes>& req = r.requests;
  if (req.empty()) return;
  std::vector<std::size_t> shown(req.size());
  for (std::size_t i = 0; i < req.size(); ++i)
    shown[i] = i;
  std::string title = "per request (times in ms; TTFT from its arrival to its first token)";
  if (req.size() > kAll) {
    auto worst = [&](auto key) {
      std::vector<std::size_t> order = shown;
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return key(req[a]) > key(req[b]); });
      order.resize(kWorst);
      return order;
    };
    std::vector<std::size_t> pick =
        worst([](const sim::RequestTimes& t) { return t.has_first_token() ? t.ttft_ns() : -1; });
    for (std::size_t i : worst([](const sim::RequestTimes& t) { return t.tpot_ns.p99; }))
      if (std::find(pick.begin(), pick.end(), i) == pick.end()) pick.push_back(i);
    shown = pick;
    title = "the " + std::to_string(kWorst) + " requests of " + std::to_string(req.size()) +
            " with the longest TTFT, then those with the worst TPOT p99 (times in ms)";
  }
  std::printf("\n%s\n", title.c_str());
  const double all = r.latency.h2d_bytes;
  Table t({"request", "prompt", "decode", "TTFT", "TPOT p50", "TPOT p95", "TPOT p99", "H2D",
           "link share"});
  for (std::size_t i : shown) {
    const sim::RequestTimes& x = req[i];
    const bool tp = x.tpot_ns.count > 0;
    t.add({fmt_int(static_cast<long long>(x.id)), fmt_int(x.prompt_tokens),
           fmt_int(x.decode_tokens),
           x.has_first_token() ? ms(static_cast<double>(x.ttft_ns())) : "n/a",
           tp ? ms(x.tpot_ns.p50) : "n/a", tp ? ms(x.tpot_ns.p95) : "n/a",
           tp ? ms(x.tpot_ns.p99) : "n/a", fmt_bytes(x.h2d_bytes),
           all > 0 ? fmt_fixed(100 * x.h2d_bytes / all, 1) + "%" : "n/a"});
  }
  t.print();
}

void print_sim_table(const SimReport& rep, bool micro_auto) {
  const auto& [input, cost, c, r, s, d2h_util, t, rest, rest_us, qsa_us, trust, budget] = rep;
  std::printf("%s on %s: %s, unit %s, %s, policy %s, %lld slots%s\n", input.name.c_str(),
              cost.profile().name.c_str(), std::string(to_string(c.placement)).c_str(),
              std::string(to_string(c.unit)).c_str(), std::string(to_string(c.dtype)).c_str(),
              std::string(to_string(c.policy)).c_str(), static_cast<long long>(c.pool_slots),
              micro_auto ? (", micro-batches auto: " + std::to_string(c.micro_batches)).c_str()
              : c.micro_batches > 1
                  ? (", " + std::to_string(c.micro_batches) + " micro-batches").c_str()
                  : "");
  std::printf("profile %s: %s\n", cost.profile().name.c_str(), trust.c_str());
  std::printf("%s\n\n", describe(budget).c_str());
  Table sum({"figure", "value"});
  sum.add({"forwards", fmt_int(r.forwards)});
  sum.add({"QSA stack time", fmt_fixed(qsa_us / 1e3, 2) + " ms"});
  sum.add({"rest of the model", fmt_fixed(rest_us / 1e3, 2) + " ms (" + rest_figures(rest) + ")"});
  sum.add({"decode tokens/s", fmt_fixed(s.decode_tps, 1)});
  sum.add({"prefill tokens/s", fmt_fixed(s.prefill_tps, 1)});
  const sim::LatencySummary& lat = r.latency;
  sum.add({"decode ITL p50 / p95 / p99", ms3(lat.tpot_ns, "ms")});
  sum.add({"TTFT p50 / p95 / p99",
           ms3(lat.ttft_ns, "ms (" + fmt_int(lat.ttft_ns.count) + " requests)")});
  sum.add({"hit rate", s.has_lookups ? fmt_fixed(s.hit_rate * 100, 2) + "%"
                                     : "n/a (no pool: every page is read where it lives)"});
  sum.add({"dropped pages", fmt_int(t.drops)});
  sum.add({"host -> device", fmt_bytes(static_cast<double>(r.h2d_bytes))});
  sum.add({"device -> host", fmt_bytes(static_cast<double>(r.d2h_bytes))});
  sum.add({"PCIe H2D utilisation", fmt_fixed(s.h2d_util * 100, 1) + "%"});
  sum.add({"PCIe D2H utilisation", fmt_fixed(d2h_util * 100, 1) + "%"});
  sum.add({"device memory", fmt_bytes(static_cast<double>(r.device_bytes))});
  sum.add({"host memory", fmt_bytes(static_cast<double>(r.host_bytes))});
  sum.print();
  std::printf(
      "decode tokens/s splits a forward that runs prefill and decode rows by token count; decode "
      "ITL is each decode token's wait since its request's previous token, the whole forward it "
      "ran in (docs/planner.md, \"Latency figures\")\n\n");
  Table lt({"layer", "lookups", "hits", "hit rate", "misses", "bypassed", "evictions", "drops"});
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    const auto& x = r.layers[l];
    lt.add(
        {fmt_int(input.header.geometry.qsa_layer_ids[l]), fmt_int(x.lookups), fmt_int(x.hits),
         x.lookups
             ? fmt_fixed(100.0 * static_cast<double>(x.hits) / static_cast<double>(x.lookups), 2) +
                   "%"
             : "n/a",
         fmt_int(x.misses), fmt_int(x.bypassed), fmt_int(x.evictions), fmt_int(x.drops)});
  }
  lt.print();
  print_requests(r);
}

int run_sim(const std::vector<std::string>& args) {
  po::options_description desc = sim_options();
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier sim [--trace FILE] --slots N [options]")) return 0;
  std::string path =
      vm.count("trace") ? vm["trace"].as<std::string>() : traces::default_sample_path();
  if (path.empty()) throw ConfigError("no bundled sample trace in this build: give --trace FILE");
  const traces::TraceInput input = traces::file_trace(path);
  const CostModel cost(profile_with_rest_of_model(vm), vm.count("no-graphs") == 0);
  sim::SimConfig c = sim_config(vm);
  const DeviceBudget budget =
      device_kv_budget(vm, cost.profile().device_memory_gib, "profile " + cost.profile().name);
  c.device_kv_bytes = budget.kv_bytes;
  std::optional<io::OutputFile> decisions;  // appears only when the simulation completes
  if (vm.count("decisions")) {
    decisions.emplace(vm["decisions"].as<std::string>());
    c.decisions = &decisions->stream();
  }
  const frontend::TraceBounds st = frontend::scan_trace(input);
  const bool micro_auto = vm["micro-batches"].as<std::string>() == "auto";
  if (micro_auto && c.forward == frontend::ForwardKind::model)
    c.micro_batches = sim::auto_micro_batches(cost, input.header.geometry, st, c.placement, c.dtype,
                                              c.pool_slots);
  Progress progress("kvtier sim", static_cast<std::uint64_t>(st.forwards), "forwards");
  c.on_forward = [&](std::int64_t done) { progress.update(static_cast<std::uint64_t>(done)); };
  // Priced before the replay: a configuration over the budget is refused before any work.
  const sim::SimResult r = [&] {
    try {
      return sim::simulate(input, st, cost, c);
    } catch (const CapacityError& e) {
      throw CapacityError(std::string(e.what()) + " (" + describe(budget) +
                          "; --device-kv-gib sets the KV budget)");
    }
  }();
  progress.finish();
  if (decisions) decisions->close();
  if (vm.count("timeline")) {
    io::OutputFile out(vm["timeline"].as<std::string>());
    sim::write_chrome_trace(out.stream(), r.timeline, input.header.geometry);
    out.close();
  }
  const SimReport report(input, cost, c, r, budget);
  if (vm.count("json")) {
    print_sim_json(report, vm["forward"].as<std::string>(), micro_auto);
  } else {
    print_sim_table(report, micro_auto);
  }
  return 0;
}

const CommandRegistrar reg{
    {"sim", "simulate one configuration of the host tier on a trace", run_sim}};

}  // namespace
}  // namespace kvtier::cli
