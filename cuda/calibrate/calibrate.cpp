// run_calibration: the card, driver and date, then each group of sweeps within its share of the
// grid's time budget. A group that throws is recorded and the next one runs (what was measured
// stays usable); the caller decides what a failure means.
#include "cuda/calibrate/calibrate.hpp"

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>

#include "cuda/calibrate/bench.hpp"
#include "model/config_error.hpp"

namespace kvtier::calibrate {
namespace {

std::string card_name() {
  int dev = 0;
  KVT_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  KVT_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return prop.name;
}

std::string driver_text() {
  int version = 0;
  KVT_CUDA_CHECK(cudaDriverGetVersion(&version));
  std::ifstream in("/proc/driver/nvidia/version");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string module = in ? nvidia_driver_version(text.str()) : "";
  return (module.empty() ? std::string("unknown NVIDIA driver") : module) + " / CUDA " +
         cuda_version_text(version);
}

struct Group {
  const char* name;
  void (*run)(Bench&, const Emit&);
  double budget_share;
  int sweeps;  // how many series it emits
};

// The groups in the order they run, with their shares of the time budget.
constexpr Group kGroups[] = {
    {"launches and copies", run_launch_and_copies, 0.13, 7},
    {"attention, in-place reads, stores", run_attention, 0.3, 17},
    {"attention past one wave", run_attention_waves, 0.05, 1},
    {"staging windows", run_staging, 0.04, 3},
    {"index and top-k", run_selection, 0.18, 6},
    {"residency step", run_residency, 0.18, 4},
    {"projections", run_projections, 0.1, 4},
    {"layer's small kernels", run_layer_ops, 0.04, 1},
    {"decode layer", run_decode_layer, 0.07, 1},
};

}  // namespace

Points run_calibration(const CalibrationOptions& o, const CalibrationProgress& progress) {
  if (o.repeats < 1) throw ConfigError("calibration: repeats must be positive");
  if (cuda::device_count() == 0)
    throw ConfigError(
        "the calibration needs a GPU: no CUDA device (cudaGetDeviceCount found none)");
  KVT_CUDA_CHECK(cudaSetDevice(0));
  Points p;
  p.card = card_name();
  p.driver = driver_text();
  p.date = utc_date(std::time(nullptr));
  p.command = o.command;
  const CalibrationGrid grid = calibration_grid(o.quick);
  Timer timer(o.repeats);
  const Filler filler(timer.stream());
  Bench b{o, grid, timer, filler, std::mt19937_64(o.seed), {}};
  int total = 0, done = 0;
  for (const Group& g : kGroups)
    total += g.sweeps;
  using clock = std::chrono::steady_clock;
  for (const Group& g : kGroups) {
    auto last = clock::now();
    b.deadline = last + std::chrono::duration_cast<clock::duration>(
                            std::chrono::duration<double>(g.budget_share * grid.budget_s));
    const Emit emit = [&](Series s) {
      const auto now = clock::now();
      s.seconds = std::chrono::duration<double>(now - last).count();
      last = now;
      p.series.push_back(std::move(s));
      if (progress) progress(p.series.back(), ++done, total);
    };
    try {
      g.run(b, emit);
    } catch (const std::exception& e) {
      p.failures.push_back(std::string(g.name) + ": " + e.what());
    }
  }
  return p;
}

}  // namespace kvtier::calibrate
