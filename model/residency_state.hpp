#pragma once
#include <cstdint>
#include <vector>

#include "model/hd.hpp"
#include "model/page_space.hpp"

namespace kvtier {

// Step stamp of a slot that holds nothing: below every real step, so free slots are the
// first victims (lowest slot first), exactly like the least recently used ones.
inline constexpr std::int64_t kFreeSlotStep = -1;
// Marks a page that is being installed during an ensure; never visible outside one.
inline constexpr SlotId kPendingSlot = -2;

// The LRU residency state over plain arrays, so that one CUDA block can own it as well as
// the CPU. Invariant: slot_of_page and page_of_slot are inverse on resident pages.
struct ResidencyView {
  SlotId* slot_of_page;    // [num_pages] slot holding the page, or kNoSlot
  PageId* page_of_slot;    // [num_slots] page the slot holds, or kNoPage
  std::int64_t* last_use;  // [num_slots] step that last queried the slot; kFreeSlotStep if free
  PageId num_pages;
  SlotId num_slots;
};

// Owning host-side state. The CUDA backend mirrors the same three arrays in device memory.
class ResidencyState {
 public:
  ResidencyState(PageId num_pages, SlotId num_slots)
      : slot_of_page_(num_pages, kNoSlot),
        page_of_slot_(num_slots, kNoPage),
        last_use_(num_slots, kFreeSlotStep) {}

  ResidencyView view() {
    return {slot_of_page_.data(), page_of_slot_.data(), last_use_.data(),
            static_cast<PageId>(slot_of_page_.size()), static_cast<SlotId>(page_of_slot_.size())};
  }
  PageId num_pages() const { return static_cast<PageId>(slot_of_page_.size()); }
  SlotId num_slots() const { return static_cast<SlotId>(page_of_slot_.size()); }
  SlotId slot_of(PageId p) const { return slot_of_page_[p]; }
  PageId page_in(SlotId s) const { return page_of_slot_[s]; }
  std::int64_t last_use(SlotId s) const { return last_use_[s]; }
  const std::vector<SlotId>& slot_of_page() const { return slot_of_page_; }
  const std::vector<PageId>& page_of_slot() const { return page_of_slot_; }
  const std::vector<std::int64_t>& last_use() const { return last_use_; }

  bool operator==(const ResidencyState&) const = default;

 private:
  std::vector<SlotId> slot_of_page_;
  std::vector<PageId> page_of_slot_;
  std::vector<std::int64_t> last_use_;
};

// Puts page p into slot s and returns the page s held (kNoPage if it was free), whose slot entry
// is cleared: the two maps stay inverse. The caller stamps the slot's last use.
KVT_HD inline PageId install_page(const ResidencyView& st, PageId p, SlotId s) {
  const PageId old = st.page_of_slot[s];
  if (old != kNoPage) st.slot_of_page[old] = kNoSlot;
  st.page_of_slot[s] = p;
  st.slot_of_page[p] = s;
  return old;
}

// Victim order: smaller last-use step first, ties by smaller slot index.
KVT_HD inline bool lru_before(std::int64_t use_a, SlotId a, std::int64_t use_b, SlotId b) {
  return use_a < use_b || (use_a == use_b && a < b);
}

}  // namespace kvtier
