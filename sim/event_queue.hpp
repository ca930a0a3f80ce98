#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace kvtier::sim {

using TimeNs = std::int64_t;
using EventId = std::uint64_t;

// Discrete-event queue over integer nanoseconds. Events run in (time, sequence) order, so
// events at equal times keep the order they were scheduled in (FIFO). Cancellation is O(1):
// a cancelled event stays in the heap and is skipped when it reaches the top.
class EventQueue {
 public:
  using Callback = std::function<void()>;

  TimeNs now() const { return now_; }
  // Schedules `cb` at absolute time `at` (>= now()). Returns an id for cancel().
  EventId schedule(TimeNs at, Callback cb);
  EventId schedule_in(TimeNs delay, Callback cb) { return schedule(now_ + delay, std::move(cb)); }
  // Returns false when the event already ran or was cancelled.
  bool cancel(EventId id);
  // Runs the earliest pending event; false when none is left.
  bool step();
  void run() {
    while (step()) {
    }
  }
  std::size_t pending() const { return live_; }
  // Starts a new epoch at `t` (>= now()) with no pending events.
  void reset_time(TimeNs t);

 private:
  struct Entry {
    TimeNs at;
    std::uint64_t seq;
    std::uint32_t slot;
  };
  static bool later(const Entry& a, const Entry& b) {
    return a.at > b.at || (a.at == b.at && a.seq > b.seq);
  }
  std::vector<Entry> heap_;
  std::vector<Callback> callbacks_;      // [slot]
  std::vector<std::uint64_t> slot_seq_;  // [slot] seq of the event that owns the slot
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t next_seq_ = 1;
  std::size_t live_ = 0;
  TimeNs now_ = 0;
};

}  // namespace kvtier::sim
