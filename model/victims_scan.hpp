#pragma once
#include <cstdint>

#include "model/hd.hpp"
#include "model/heap_sort.hpp"
#include "model/residency_state.hpp"

namespace kvtier {

// Finds eviction victims by one pass over all slots with a bounded max-heap of the m best
// candidates: O(slots log m), no state of its own. This is the form a GPU runs (one block
// scanning slots); on the CPU the HeapVictims finder makes the same choices faster.
struct ScanVictims {
  struct Config {};

  // Writes to out[0..found) the slots with last_use < step of smallest (last_use, slot), in
  // that order, and returns found (< m only when fewer slots are evictable). Slots queried in
  // this step carry last_use == step and are never chosen.
  KVT_HD int select(const ResidencyView& st, std::int64_t step, int m, SlotId* out) const {
    if (m <= 0) return 0;
    const std::int64_t* use = st.last_use;
    // out[0..size) is a max-heap: out[0] is the worst candidate kept so far.
    auto worse = [use](SlotId a, SlotId b) { return lru_before(use[a], a, use[b], b); };
    int size = 0;
    for (SlotId s = 0; s < st.num_slots; ++s) {
      const std::int64_t u = use[s];
      if (u >= step) continue;
      if (size < m) {
        int i = size++;
        out[i] = s;
        while (i > 0) {  // sift up
          const int parent = (i - 1) / 2;
          if (!worse(out[parent], out[i])) break;
          const SlotId t = out[parent];
          out[parent] = out[i];
          out[i] = t;
          i = parent;
        }
      } else if (lru_before(u, s, use[out[0]], out[0])) {
        out[0] = s;
        heap_sift_down(out, size, 0, worse);
      }
      // A full heap of free slots cannot be beaten by any later (higher) slot.
      if (size == m && use[out[0]] == kFreeSlotStep) break;
    }
    heap_sort(out, size, worse);
    return size;
  }

  // Hooks the stateful finders need; the scan keeps no state.
  KVT_HD void on_slot_used(const ResidencyView&, SlotId, std::int64_t) {}
  KVT_HD void on_slot_freed(SlotId) {}
  KVT_HD void on_flush() {}
};

}  // namespace kvtier
