#pragma once
#include <cstdint>
#include <vector>

#include "model/residency_state.hpp"

namespace kvtier {

// Host-side victim finder with the exact choices of ScanVictims in O(log slots) amortised
// per hit instead of O(slots) per miss step: a lazy min-heap of (key, slot) where each slot
// has one live entry whose key is <= its true last_use. A hit only raises last_use in the
// state arrays (O(1)); an entry found stale at the top is re-keyed then. Because keys only
// lag behind, an entry at the top whose key equals its true last_use is the true minimum.
// Freeing a slot lowers its last_use, so it must be reported through on_slot_freed.
class HeapVictims {
 public:
  struct Config {};

  explicit HeapVictims(SlotId num_slots, Config = {});

  int select(const ResidencyView& st, std::int64_t step, int m, SlotId* out);
  // A use only raises last_use, which the lazy keys allow: nothing to do.
  void on_slot_used(const ResidencyView&, SlotId, std::int64_t) {}
  void on_slot_freed(SlotId s);
  void on_flush();
  std::size_t heap_size() const { return heap_.size(); }

 private:
  struct Entry {
    std::int64_t key;
    SlotId slot;
    std::uint32_t gen;  // the entry is live iff gen == live_gen_[slot]
  };
  void push(std::int64_t key, SlotId s);
  void pop();
  void rebuild();

  std::vector<Entry> heap_;
  std::vector<std::int64_t> live_key_;   // [slots] key of the slot's live entry
  std::vector<std::uint32_t> live_gen_;  // [slots] generation of the slot's live entry
};

}  // namespace kvtier
