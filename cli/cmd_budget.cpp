// `kvtier budget`: the device and host memory a configuration needs at start-up, item by
// item, from the core's memory budget; refuses (non-zero exit) what cannot fit.
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/table.hpp"
#include "model/config_error.hpp"
#include "model/memory_budget.hpp"
#include "model/page_space.hpp"

namespace kvtier::cli {
namespace {

int run_budget(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("geometry", po::value<std::string>(),
                                                 "geometry JSON file (default: Flash-Next)")(
      "placement", po::value<std::string>()->default_value("mirror"), "device, mirror or host")(
      "kv-dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp8")(
      "unit", po::value<std::string>()->default_value("layer"),
      "residency unit: layer or all-layers")(
      "context", po::value<std::int64_t>()->default_value(1048576),
      "tokens of the host page space (rounded up to whole pages)")(
      "pool-slots", po::value<std::int64_t>()->default_value(4096), "mirror: GPU pool slots")(
      "batch", po::value<int>()->default_value(1), "rows of the widest forward")(
      "window", po::value<std::int64_t>()->default_value(131072),
      "host: prefill staging window in tokens")("device-gib",
                                                po::value<double>()->default_value(0.0),
                                                "the card's memory in GiB (0: not known)")(
      "host-gib", po::value<double>()->default_value(0.0),
      "host memory to check against (0: do not check)")("json", "print JSON instead of a table");
  add_device_kv_option(desc, "--device-gib, the card's memory; neither given: not checked");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier budget [options]")) return 0;

  BudgetRequest r;
  if (vm.count("geometry")) {
    r.geometry = read_geometry_file(vm["geometry"].as<std::string>());
  }
  r.placement = parse_placement(vm["placement"].as<std::string>(), "--placement");
  r.dtype = parse_kv_dtype(vm["kv-dtype"].as<std::string>(), "--kv-dtype");
  r.unit = parse_residency_unit(vm["unit"].as<std::string>(), "--unit");
  const std::int64_t context = vm["context"].as<std::int64_t>();
  const std::int64_t max_context = kMaxPages * r.geometry.page_size;
  if (context <= 0 || context > max_context)
    throw ConfigError("--context: 1.." + std::to_string(max_context) + " tokens (" +
                      std::to_string(kMaxPages) + " pages of " +
                      std::to_string(r.geometry.page_size) + ": page ids are 32-bit), got " +
                      std::to_string(context));
  r.host_pages = r.geometry.pages_for_context(context);
  r.context_tokens = context;
  r.pool_slots = vm["pool-slots"].as<std::int64_t>();
  if (r.placement == Placement::mirror && (r.pool_slots < 1 || r.pool_slots > kMaxPages))
    throw ConfigError("--pool-slots: 1.." + std::to_string(kMaxPages) +
                      " slots (slot ids are 32-bit), got " + std::to_string(r.pool_slots));
  r.batch_rows = vm["batch"].as<int>();
  if (r.batch_rows < 1)
    throw ConfigError("--batch: at least 1 row, got " + std::to_string(r.batch_rows));
  r.staging_window_tokens = vm["window"].as<std::int64_t>();
  if (r.placement == Placement::host && r.staging_window_tokens < 1)
    throw ConfigError("--window: at least 1 token, got " + std::to_string(r.staging_window_tokens));
  gib_option(vm, "device-gib");  // checked: a finite number of GiB
  const DeviceBudget kv = device_kv_budget(vm, vm["device-gib"].as<double>(), "--device-gib");
  r.device_capacity_bytes = kv.kv_bytes;
  r.host_capacity_bytes = gib_option(vm, "host-gib");
  const MemoryBudget b = memory_budget(r);

  if (vm.count("json")) {
    auto items = [](const std::vector<MemoryItem>& v) {
      boost::json::array a;
      for (const auto& i : v)
        a.push_back({{"name", i.name}, {"bytes", i.bytes}});
      return a;
    };
    boost::json::object o{{"placement", to_string(r.placement)},
                          {"kv_dtype", to_string(r.dtype)},
                          {"unit", to_string(r.unit)},
                          {"host_pages", r.host_pages},
                          {"pool_slots", r.placement == Placement::mirror ? r.pool_slots : 0},
                          {"batch_rows", r.batch_rows},
                          {"select_width_pages", b.select_width_pages},
                          {"device_bytes", b.device_bytes},
                          {"device_capacity_bytes", kv.card_bytes},
                          {"device_kv_budget_bytes", kv.kv_bytes},
                          {"host_bytes", b.host_bytes},
                          {"device", items(b.device)},
                          {"host", items(b.host)}};
    std::cout << boost::json::serialize(o) << "\n";
    return 0;
  }
  std::printf("%s placement, %s, %lld host pages (%lld tokens), batch %d",
              std::string(to_string(r.placement)).c_str(), std::string(to_string(r.dtype)).c_str(),
              static_cast<long long>(r.host_pages),
              static_cast<long long>(r.host_pages * r.geometry.page_size), r.batch_rows);
  if (r.placement == Placement::mirror) {
    std::printf(", %lld pool slots (%s unit), %d pages per row",
                static_cast<long long>(r.pool_slots), std::string(to_string(r.unit)).c_str(),
                b.select_width_pages);
  }
  std::printf("\n");
  if (kv.kv_bytes > 0) std::printf("%s\n", describe(kv).c_str());
  std::printf("\n");
  Table t({"where", "item", "bytes", "size"});
  for (const auto& i : b.device)
    t.add({"device", i.name, fmt_int(i.bytes), fmt_bytes(static_cast<double>(i.bytes))});
  for (const auto& i : b.host)
    t.add({"host", i.name, fmt_int(i.bytes), fmt_bytes(static_cast<double>(i.bytes))});
  t.add(
      {"device", "total", fmt_int(b.device_bytes), fmt_bytes(static_cast<double>(b.device_bytes))});
  t.add({"host", "total", fmt_int(b.host_bytes), fmt_bytes(static_cast<double>(b.host_bytes))});
  t.print();
  return 0;
}

const CommandRegistrar reg{
    {"budget", "device and host memory a placement needs at start-up", run_budget}};

}  // namespace
}  // namespace kvtier::cli
