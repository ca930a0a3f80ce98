#include "cli/progress.hpp"

#include <unistd.h>

#include <algorithm>

namespace kvtier::cli {

bool Progress::enabled_for_stderr() {
  return isatty(STDERR_FILENO) == 1;
}

Progress::Progress(std::string label, std::uint64_t total, std::string unit, std::uint64_t per_unit)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      per_unit_(static_cast<double>(per_unit)),
      enabled_(enabled_for_stderr()),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  finish();
}

void Progress::update(std::uint64_t done) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done, false);
}

void Progress::update(std::uint64_t done, std::uint64_t total) {
  total_ = total;
  update(done);
}

void Progress::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  draw(total_, true);
}

void Progress::draw(std::uint64_t done, bool final) {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double frac =
      total_ ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total_)) : 1.0;
  const int bar = 30;
  const int filled = static_cast<int>(frac * bar);
  const double rate = secs > 0 ? static_cast<double>(done) / per_unit_ / secs : 0.0;
  const double eta =
      rate > 0 ? static_cast<double>(total_ - std::min(done, total_)) / per_unit_ / rate : 0.0;
  std::fprintf(stderr, "\r%s [%s%s] %5.1f%% %.3g %s/s ETA %.0fs ", label_.c_str(),
               std::string(filled, '#').c_str(), std::string(bar - filled, '.').c_str(),
               frac * 100.0, rate, unit_.c_str(), eta);
  if (final) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace kvtier::cli
