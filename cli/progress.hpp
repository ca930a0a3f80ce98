#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kvtier::cli {

// A remaining time as people read it: "45 s", "12 min", "6.5 h", "272 d" (a typo'd job of
// months shows as such, not as "23508348s"); "-" for none that can be told.
std::string eta_text(double seconds);

// Progress on stderr. On a terminal: a bar with rate and ETA, redrawn at most ~10 times a
// second (a work count without a known total shows the count alone). Not a terminal (pipes,
// CI logs, tests): silent, or -- with lines_when_not_a_terminal -- one line per stage and one
// at the end, each with the time since the start, for commands whose stages take long enough
// that a log should say where they are. Thread-compatible, not thread-safe: one owner calls it.
class Progress {
 public:
  // Counts (done, total) are in units of `per_unit`: a byte count shown in MiB passes
  // per_unit = 1 << 20 and hands over raw bytes.
  Progress(std::string label, std::uint64_t total, std::string unit = "items",
           std::uint64_t per_unit = 1, bool lines_when_not_a_terminal = false);
  ~Progress();
  void update(std::uint64_t done);
  // For work whose size is known only once it starts (the planner's list of simulations);
  // total 0: not known yet.
  void update(std::uint64_t done, std::uint64_t total);
  // A new stage of the work: its own bar (the previous one is left on screen), or a line.
  void stage(const std::string& name, std::string unit);
  void finish();
  static bool enabled_for_stderr();

 private:
  enum class Mode { off, bar, lines };
  void draw(std::uint64_t done, bool final);
  double seconds() const;

  std::string label_;
  std::uint64_t total_;
  std::string unit_;
  double per_unit_;
  Mode mode_;
  std::string stage_;
  bool drawn_ = false;  // the current bar is on screen
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point stage_start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace kvtier::cli
