#include "io/pending_output.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace kvtier::io {
namespace {

namespace fs = std::filesystem;

// The signal handler's registry: fixed slots, each a path copied in while the slot is
// claimed. States: free -> claimed (being written, not read by the handler) -> armed (the
// handler unlinks it) -> free. A path that does not fit, or a 65th output at once, is not
// registered: the destructor still removes it, a signal does not.
enum SlotState : int { kFree = 0, kClaimed = 1, kArmed = 2 };
constexpr int kSlots = 64;
constexpr std::size_t kPathBytes = 4096;

struct Slot {
  std::atomic<int> state{kFree};
  std::array<char, kPathBytes> path{};
};
std::array<Slot, kSlots> g_slots;

int arm(const std::string& path) {
  if (path.size() >= kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[static_cast<std::size_t>(i)];
    int expected = kFree;
    if (!s.state.compare_exchange_strong(expected, kClaimed)) continue;
    std::memcpy(s.path.data(), path.c_str(), path.size() + 1);
    s.state.store(kArmed);
    return i;
  }
  return -1;
}

void disarm(int slot) {
  if (slot >= 0) g_slots[static_cast<std::size_t>(slot)].state.store(kFree);
}

extern "C" void remove_temporaries_and_die(int sig) {
  for (Slot& s : g_slots)
    if (s.state.load() == kArmed) ::unlink(s.path.data());
  // SA_RESETHAND restored the default action; the signal is blocked while this handler
  // runs and is delivered again when it returns.
  ::raise(sig);
}

// A path written in place: a device, FIFO or socket, which cannot be renamed over.
bool in_place(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  return !ec && (fs::is_character_file(st) || fs::is_block_file(st) || fs::is_fifo(st) ||
                 fs::is_socket(st));
}

}  // namespace

PendingOutput::PendingOutput(std::string path) : path_(std::move(path)) {
  if (in_place(path_)) {
    write_path_ = path_;
    return;
  }
  write_path_ = path_ + ".tmp";
  slot_ = arm(write_path_);
  pending_ = true;
}

PendingOutput::~PendingOutput() {
  discard();
}

void PendingOutput::discard() noexcept {
  if (!pending_) return;
  std::error_code ec;
  fs::remove(write_path_, ec);
  disarm(slot_);  // after the removal: a signal in between finds the path still armed
  slot_ = -1;
  pending_ = false;
}

std::error_code PendingOutput::try_commit() noexcept {
  if (!pending_) return {};
  std::error_code ec;
  fs::rename(write_path_, path_, ec);
  if (ec) {
    discard();
    return ec;
  }
  disarm(slot_);  // after the rename: a signal in between unlinks a name that is gone
  slot_ = -1;
  pending_ = false;
  return {};
}

void PendingOutput::commit() {
  if (const std::error_code ec = try_commit())
    throw std::runtime_error("cannot rename '" + write_path_ + "' to '" + path_ +
                             "': " + ec.message());
}

void install_cleanup_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_die;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

int registered_temporaries() {
  int n = 0;
  for (const Slot& s : g_slots)
    n += s.state.load() == kArmed;
  return n;
}

}  // namespace kvtier::io
