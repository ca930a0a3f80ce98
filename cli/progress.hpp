#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kvtier::cli {

// A progress bar with rate and ETA on stderr when stderr is a terminal; silent otherwise
// (pipes, CI logs, tests). Updates at most ~10 times a second; thread-compatible, not
// thread-safe: one owner calls update().
class Progress {
 public:
  // Counts (done, total) are in units of `per_unit`: a byte count shown in MiB passes
  // per_unit = 1 << 20 and hands over raw bytes.
  Progress(std::string label, std::uint64_t total, std::string unit = "items",
           std::uint64_t per_unit = 1);
  ~Progress();
  void update(std::uint64_t done);
  // For work whose size is known only once it starts (the planner's list of simulations).
  void update(std::uint64_t done, std::uint64_t total);
  void finish();
  static bool enabled_for_stderr();

 private:
  void draw(std::uint64_t done, bool final);

  std::string label_;
  std::uint64_t total_;
  std::string unit_;
  double per_unit_;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace kvtier::cli
