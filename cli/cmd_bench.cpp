// `kvtier bench residency`: the CUDA residency engine's figures on the GPU (time, GB/s next
// to the measured ceilings and the targets). Figures only; never fails on speed.
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/table.hpp"
#include "model/config_error.hpp"
#if defined(KVTIER_WITH_CUDA)
#include "cuda/host_bank.hpp"
#include "cuda/residency_bench.hpp"
#endif

namespace kvtier::cli {
namespace {

int run_bench(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("what", po::value<std::string>(),
                                                 "which benchmark: residency")(
      "repeats", po::value<int>()->default_value(50), "timed repetitions (median reported)")(
      "json", "print the figures as JSON");
  po::positional_options_description pos;
  pos.add("what", 1);
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier bench residency [--repeats N] [--json]", &pos))
    return 0;
  if (!vm.count("what") || vm["what"].as<std::string>() != "residency")
    throw ConfigError("bench: name a benchmark; available: residency");
#if defined(KVTIER_WITH_CUDA)
  if (cuda::device_count() == 0)
    throw ConfigError("bench residency: no CUDA device (cudaGetDeviceCount found none)");
  cuda::BenchOptions o;
  o.repeats = vm["repeats"].as<int>();
  if (o.repeats <= 0) throw ConfigError("--repeats must be positive");
  const auto figs = cuda::run_residency_bench(o);
  if (vm.count("json")) {
    boost::json::array a;
    for (const auto& f : figs)
      a.push_back({{"name", f.name},
                   {"value", f.value},
                   {"unit", f.unit},
                   {"target", f.target},
                   {"detail", f.detail}});
    std::cout << boost::json::serialize(boost::json::object{{"figures", a}}) << "\n";
  } else {
    Table t({"figure", "value", "unit", "target", "detail"});
    for (const auto& f : figs)
      t.add({f.name, fmt_fixed(f.value, 2), f.unit, f.target, f.detail});
    t.print();
  }
  return 0;
#else
  throw ConfigError("bench residency: this kvtier was built without the CUDA backend");
#endif
}

const CommandRegistrar reg{{"bench", "GPU benchmarks: residency", run_bench}};

}  // namespace
}  // namespace kvtier::cli
