// `kvtier bench residency`: the CUDA residency engine's figures on the GPU (time, GB/s next
// to the measured ceilings and the targets); `kvtier bench host-bank`: how fast a
// pinned host bank of G GiB is ready. Figures only; never fails on speed.
#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/table.hpp"
#include "model/config_error.hpp"
#include "model/geometry.hpp"
#include "model/kv_dtype.hpp"
#include "model/page_layout.hpp"
#include "model/page_space.hpp"
#if defined(KVTIER_WITH_CUDA)
#include "cuda/host_bank.hpp"
#include "cuda/residency_bench.hpp"
#endif

namespace kvtier::cli {
namespace {

constexpr const char* kUsage =
    "kvtier bench residency [--repeats N] [--json]\n"
    "       kvtier bench host-bank [--gib G] [--kv-dtype bf16|fp8] [--json]";

#if defined(KVTIER_WITH_CUDA)
void print_figures(const std::vector<cuda::BenchFigure>& figs, bool json) {
  if (json) {
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
}

// A host bank of about `gib` GiB in the default geometry's layout, made ready as `kvtier run`
// makes it (mapped, faulted in and pinned in pieces by several threads): its seconds against
// issue 17's target of 10 s for 100 GiB.
std::vector<cuda::BenchFigure> host_bank_bench(double gib, KvDtype dtype) {
  const Geometry g;
  const PageLayout layout =
      PageLayout::make(g.qsa_layers(), g.page_size, g.kv_heads, g.head_dim, dtype == KvDtype::fp8);
  const std::int64_t per_page = std::int64_t{layout.layers} * layout.layer_page_bytes();
  const auto pages = static_cast<PageId>(
      std::clamp<double>(gib * double(1 << 30) / double(per_page) - 1, 1, double(kMaxPages)));
  const std::int64_t bytes = cuda::HostBank::bytes_for(layout, pages);
  const std::int64_t avail = cuda::HostBank::available_host_bytes();
  Progress bar("host bank", static_cast<std::uint64_t>(bytes), "MiB", 1 << 20);
  const cuda::HostBank bank(layout, pages,
                            [&bar](std::uint64_t done, std::uint64_t) { bar.update(done); });
  bar.finish();
  const cuda::HostBankTiming& t = bank.timing();
  const double b_gib = static_cast<double>(bytes) / double(1 << 30);
  const std::string how = std::to_string(t.pieces) + " pieces on " + std::to_string(t.threads) +
                          " threads, " +
                          (t.by_piece ? "registered by piece" : "registered by bank");
  return {
      {"host bank size", b_gib, "GiB", "",
       "available before: " + fmt_fixed(static_cast<double>(avail) / double(1 << 30), 1) + " GiB"},
      {"ready (map, fault in, pin)", t.ready_s, "s", b_gib >= 100 ? "<= 10" : "", how},
      {"ready per 10 GiB", t.ready_s * 10 / b_gib, "s", "<= 1.0", "issue 17: 100 GiB in 10 s"},
      {"fault-in, thread-seconds", t.touch_thread_s, "s", "", "summed over the threads"},
      {"pin, thread-seconds", t.pin_thread_s, "s", "", "cudaHostRegister, summed"},
  };
}
#endif

int run_bench(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("what", po::value<std::string>(),
                                                 "which benchmark: residency or host-bank")(
      "repeats", po::value<int>()->default_value(50),
      "residency: timed repetitions (median reported)")(
      "gib", po::value<double>()->default_value(100.0), "host-bank: the bank's size in GiB")(
      "kv-dtype", po::value<std::string>()->default_value("bf16"),
      "host-bank: the page layout's dtype (fp8 adds the scale banks)")("json",
                                                                       "print the figures as JSON");
  po::positional_options_description pos;
  pos.add("what", 1);
  po::variables_map vm;
  if (!parse_options(args, desc, vm, kUsage, &pos)) return 0;
  const std::string what = vm.count("what") ? vm["what"].as<std::string>() : "";
  if (what != "residency" && what != "host-bank")
    throw ConfigError("bench: name a benchmark; available: residency, host-bank");
  const double gib = vm["gib"].as<double>();
  if (!(gib > 0 && gib <= 4096)) throw ConfigError("--gib: a size above 0, at most 4096 GiB");
  const KvDtype dtype = parse_kv_dtype(vm["kv-dtype"].as<std::string>(), "--kv-dtype");
#if defined(KVTIER_WITH_CUDA)
  if (cuda::device_count() == 0)
    throw ConfigError("bench " + what + ": no CUDA device (cudaGetDeviceCount found none)");
  if (what == "host-bank") {
    print_figures(host_bank_bench(gib, dtype), vm.count("json") > 0);
    return 0;
  }
  cuda::BenchOptions o;
  o.repeats = vm["repeats"].as<int>();
  if (o.repeats <= 0) throw ConfigError("--repeats must be positive");
  print_figures(cuda::run_residency_bench(o), vm.count("json") > 0);
  return 0;
#else
  (void)dtype;
  throw ConfigError("bench " + what + ": this kvtier was built without the CUDA backend");
#endif
}

const CommandRegistrar reg{{"bench", "GPU benchmarks: residency, host-bank", run_bench}};

}  // namespace
}  // namespace kvtier::cli
