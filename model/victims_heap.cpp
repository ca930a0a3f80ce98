#include "model/victims_heap.hpp"

#include <algorithm>

namespace kvtier {
namespace {
// std heap functions build a max-heap; "after" puts the smallest (key, slot) on top.
struct After {
  template <class E>
  bool operator()(const E& a, const E& b) const {
    return lru_before(b.key, b.slot, a.key, a.slot);
  }
};
}  // namespace

HeapVictims::HeapVictims(SlotId num_slots, Config)
    : live_key_(num_slots, kFreeSlotStep), live_gen_(num_slots, 0) {
  rebuild();
}

void HeapVictims::rebuild() {
  heap_.clear();
  heap_.reserve(live_key_.size());
  for (SlotId s = 0; s < static_cast<SlotId>(live_key_.size()); ++s) {
    heap_.push_back({live_key_[s], s, live_gen_[s]});
  }
  std::make_heap(heap_.begin(), heap_.end(), After{});
}

void HeapVictims::push(std::int64_t key, SlotId s) {
  heap_.push_back({key, s, ++live_gen_[s]});
  std::push_heap(heap_.begin(), heap_.end(), After{});
  live_key_[s] = key;
}

void HeapVictims::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), After{});
  heap_.pop_back();
}

int HeapVictims::select(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
  int found = 0;
  while (found < m && !heap_.empty()) {
    const Entry e = heap_.front();
    if (e.gen != live_gen_[e.slot]) {  // superseded by a newer entry of the same slot
      pop();
      continue;
    }
    const std::int64_t u = st.last_use[e.slot];
    if (u != e.key) {  // used since the entry was made: re-key it
      pop();
      push(u, e.slot);
      continue;
    }
    if (u >= step) break;  // the least recently used slot is in this step: none evictable
    pop();
    out[found++] = e.slot;
  }
  // The chosen slots go back with their current keys; installing them raises last_use,
  // which leaves those keys lagging, as the invariant allows.
  for (int i = 0; i < found; ++i)
    push(st.last_use[out[i]], out[i]);
  return found;
}

void HeapVictims::on_slot_freed(SlotId s) {
  if (live_key_[s] == kFreeSlotStep) return;  // its live entry already has the lowest key
  push(kFreeSlotStep, s);
  if (heap_.size() > 2 * live_key_.size() + 64) {
    // Drop superseded entries; live keys are unchanged, so the invariant still holds.
    std::erase_if(heap_, [this](const Entry& e) { return e.gen != live_gen_[e.slot]; });
    std::make_heap(heap_.begin(), heap_.end(), After{});
  }
}

void HeapVictims::on_flush() {
  std::fill(live_key_.begin(), live_key_.end(), kFreeSlotStep);
  rebuild();
}

}  // namespace kvtier
