#include "sim/event_queue.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvtier::sim {

// An EventId packs the slot (low 32 bits) with the low 32 bits of the sequence number, so a
// stale id (slot reused by a later event) is recognised and refused.
namespace {
EventId make_id(std::uint32_t slot, std::uint64_t seq) {
  return (seq << 32) | slot;
}
}  // namespace

EventId EventQueue::schedule(TimeNs at, Callback cb) {
  if (at < now_) throw std::logic_error("event scheduled in the past");
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(callbacks_.size());
    callbacks_.emplace_back();
    slot_seq_.push_back(0);
  }
  const std::uint64_t seq = next_seq_++;
  callbacks_[slot] = std::move(cb);
  slot_seq_[slot] = seq;
  heap_.push_back({at, seq, slot});
  std::push_heap(heap_.begin(), heap_.end(), later);
  ++live_;
  return make_id(slot, seq & 0xffffffffu);
}

bool EventQueue::cancel(EventId id) {
  const auto slot = static_cast<std::uint32_t>(id & 0xffffffffu);
  if (slot >= slot_seq_.size()) return false;
  const std::uint64_t seq = slot_seq_[slot];
  if (seq == 0 || (seq & 0xffffffffu) != (id >> 32)) return false;
  slot_seq_[slot] = 0;  // the heap entry no longer owns its slot: it is skipped
  callbacks_[slot] = nullptr;
  --live_;
  return true;
}

bool EventQueue::step() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Entry e = heap_.back();
    heap_.pop_back();
    if (slot_seq_[e.slot] != e.seq) {  // cancelled; free the slot once its entry is gone
      if (slot_seq_[e.slot] == 0) free_slots_.push_back(e.slot);
      continue;
    }
    now_ = e.at;
    Callback cb = std::move(callbacks_[e.slot]);
    callbacks_[e.slot] = nullptr;
    slot_seq_[e.slot] = 0;
    free_slots_.push_back(e.slot);
    --live_;
    cb();
    return true;
  }
  return false;
}

void EventQueue::reset_time(TimeNs t) {
  if (t < now_) throw std::logic_error("event queue time cannot go back");
  if (live_ != 0) throw std::logic_error("event queue reset with pending events");
  heap_.clear();
  free_slots_.clear();
  for (std::uint32_t s = 0; s < slot_seq_.size(); ++s) {
    slot_seq_[s] = 0;
    free_slots_.push_back(s);
  }
  now_ = t;
}

}  // namespace kvtier::sim
