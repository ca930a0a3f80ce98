#include "cli/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace kvtier::cli {

std::string eta_text(double seconds) {
  if (!(seconds >= 0) || seconds > 1e12) return "-";
  char buf[32];
  if (seconds < 100) {
    std::snprintf(buf, sizeof buf, "%.0f s", seconds);
  } else if (seconds < 6000) {
    std::snprintf(buf, sizeof buf, "%.0f min", seconds / 60);
  } else if (seconds < 48 * 3600) {
    std::snprintf(buf, sizeof buf, "%.1f h", seconds / 3600);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f d", seconds / 86400);
  }
  return buf;
}

bool Progress::enabled_for_stderr() {
  return isatty(STDERR_FILENO) == 1;
}

Progress::Progress(std::string label, std::uint64_t total, std::string unit, std::uint64_t per_unit,
                   bool lines_when_not_a_terminal)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      per_unit_(static_cast<double>(per_unit)),
      mode_(enabled_for_stderr()        ? Mode::bar
            : lines_when_not_a_terminal ? Mode::lines
                                        : Mode::off),
      start_(std::chrono::steady_clock::now()),
      stage_start_(start_),
      last_draw_(start_) {}

Progress::~Progress() {
  finish();
}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(std::uint64_t done) {
  if (mode_ != Mode::bar || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done, false);
}

void Progress::update(std::uint64_t done, std::uint64_t total) {
  total_ = total;
  update(done);
}

void Progress::stage(const std::string& name, std::string unit) {
  if (finished_) return;
  if (mode_ == Mode::bar && drawn_) std::fprintf(stderr, "\n");
  stage_ = name;
  unit_ = std::move(unit);
  total_ = 0;
  drawn_ = false;
  stage_start_ = std::chrono::steady_clock::now();
  if (mode_ == Mode::lines) {
    std::fprintf(stderr, "%s: %s (%.1f s)\n", label_.c_str(), name.c_str(), seconds());
    std::fflush(stderr);
  } else if (mode_ == Mode::bar) {
    draw(0, false);
  }
}

void Progress::finish() {
  if (mode_ == Mode::off || finished_) return;
  finished_ = true;
  if (mode_ == Mode::lines) {
    if (!stage_.empty()) std::fprintf(stderr, "%s: done (%.1f s)\n", label_.c_str(), seconds());
    std::fflush(stderr);
    return;
  }
  draw(total_, true);
}

void Progress::draw(std::uint64_t done, bool final) {
  drawn_ = true;
  const std::string label = stage_.empty() ? label_ : label_ + ": " + stage_;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / per_unit_ / secs : 0.0;
  if (total_ == 0) {  // no total yet: the count and the rate
    std::fprintf(stderr, "\r%s: %.0f %s, %.3g %s/s, %.0f s ", label.c_str(),
                 static_cast<double>(done) / per_unit_, unit_.c_str(), rate, unit_.c_str(), secs);
  } else {
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    const int bar = 30;
    const int filled = static_cast<int>(frac * bar);
    const double eta =
        rate > 0 ? static_cast<double>(total_ - std::min(done, total_)) / per_unit_ / rate : -1.0;
    // padded: a shorter ETA than the one before must not leave its tail on the line
    std::fprintf(stderr, "\r%s [%s%s] %5.1f%% %.3g %s/s ETA %-8s", label.c_str(),
                 std::string(filled, '#').c_str(), std::string(bar - filled, '.').c_str(),
                 frac * 100.0, rate, unit_.c_str(), eta_text(eta).c_str());
  }
  if (final) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace kvtier::cli
