#pragma once
// A deliberately naive LRU written only for tests: a std::list of occupied slots in
// recency order, a std::map from page to slot and a std::set of free slots. It shares no
// code with the core's array-based ensure; the properties require both to decide alike.
#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <vector>

#include "model/ensure.hpp"

namespace kvtier::testing {

class ReferenceLru {
 public:
  struct Step {
    int hits = 0;
    int misses = 0;
    bool too_small = false;
    std::vector<CopyOp> copies;
  };

  ReferenceLru(PageId pages, SlotId slots) : page_in_slot_(slots, kNoPage), pages_(pages) {
    for (SlotId s = 0; s < slots; ++s)
      free_.insert(s);
  }

  // One ensure call; calls with the same step are chunks of one step.
  Step ensure(const std::vector<PageId>& query, std::int64_t step) {
    if (step != step_) {
      step_ = step;
      touched_.clear();
    }
    Step out;
    std::set<PageId> missing;
    for (PageId p : query) {
      if (p == kNoPage) continue;
      auto it = slot_.find(p);
      if (it != slot_.end()) {
        if (touched_.insert(it->second).second) ++out.hits;
      } else {
        missing.insert(p);
      }
    }
    // Victims: free slots lowest first, then occupied slots from the LRU end, skipping any
    // slot this step already touched.
    std::vector<SlotId> victims;
    for (SlotId s : free_) {
      if (victims.size() == missing.size()) break;
      victims.push_back(s);
    }
    for (SlotId s : order_) {
      if (victims.size() == missing.size()) break;
      if (!touched_.count(s)) victims.push_back(s);
    }
    if (victims.size() < missing.size()) {
      // Nothing is installed, but the hits still count as uses (as in the core).
      out.too_small = true;
      touch_to_back();
      return out;
    }
    std::size_t i = 0;
    for (PageId p : missing) {  // std::set iterates ascending
      const SlotId s = victims[i++];
      const PageId old = page_in_slot_[s];
      if (old != kNoPage) slot_.erase(old);
      free_.erase(s);
      page_in_slot_[s] = p;
      slot_[p] = s;
      touched_.insert(s);
      out.copies.push_back({p, s, old});
    }
    out.misses = static_cast<int>(out.copies.size());
    touch_to_back();
    return out;
  }

  // Everything this step touched moves to the most recent end, ordered by slot index.
  void touch_to_back() {
    order_.remove_if([this](SlotId s) { return touched_.count(s) != 0; });
    for (SlotId s : touched_)
      order_.push_back(s);
  }

  void release(PageId p) {
    auto it = slot_.find(p);
    if (it == slot_.end()) return;
    const SlotId s = it->second;
    slot_.erase(it);
    page_in_slot_[s] = kNoPage;
    order_.remove(s);
    touched_.erase(s);
    free_.insert(s);
  }

  void flush() {
    for (auto& [p, s] : slot_) {
      page_in_slot_[s] = kNoPage;
      free_.insert(s);
    }
    slot_.clear();
    order_.clear();
    touched_.clear();
  }

  SlotId slot_of(PageId p) const {
    auto it = slot_.find(p);
    return it == slot_.end() ? kNoSlot : it->second;
  }
  PageId pages() const { return pages_; }

 private:
  std::vector<PageId> page_in_slot_;
  std::map<PageId, SlotId> slot_;
  std::set<SlotId> free_;
  std::list<SlotId> order_;   // occupied slots, least recently used first
  std::set<SlotId> touched_;  // slots queried or installed in the current step
  std::int64_t step_ = -1;
  PageId pages_;
};

}  // namespace kvtier::testing
