#pragma once
#include "model/hd.hpp"
#include "model/page_space.hpp"

namespace kvtier {

// Block table logical -> physical for the attention kernel. Padding and pages that are not
// resident resolve to the zeroed dummy slot, so the kernel never reads a slot that holds
// another page; the return value counts the non-resident real pages (must be 0 after a
// successful ensure, and is reported when it is not).
KVT_HD inline int translate_pages(const PageId* logical, int n, const SlotId* slot_of_page,
                                  PageId num_pages, SlotId dummy, SlotId* physical) {
  int missing = 0;
  for (int i = 0; i < n; ++i) {
    const PageId p = logical[i];
    SlotId s = dummy;
    if (p >= 0 && p < num_pages) {
      const SlotId r = slot_of_page[p];
      if (r >= 0) {
        s = r;
      } else {
        ++missing;
      }
    } else if (p != kNoPage) {
      ++missing;
    }
    physical[i] = s;
  }
  return missing;
}

// A physical table entry for a page read in place from the host bank: -2 - page (<= -2), so
// that slots (>= 0) and "none" (kNoSlot, -1) keep their meaning.
KVT_HD constexpr SlotId in_place_ref(PageId page) {
  return -2 - page;
}
KVT_HD constexpr PageId in_place_page(SlotId entry) {
  return -2 - entry;
}

// The mirror's reads before its ensure: a resident page resolves to its slot, a real page that
// is not resident to in_place_ref(page) (its bytes are the host bank's, the same as a slot would
// hold after the copy), padding and pages outside the space to kNoSlot (the dummy). Because
// an ensure only changes the slots of its misses and of pages outside its query, every page of
// a query reads the same bytes through this table while that ensure and its copy run. Returns
// the number of real pages that resolve in place.
KVT_HD inline int locate_pages(const PageId* logical, int n, const SlotId* slot_of_page,
                               PageId num_pages, SlotId* physical) {
  int in_place = 0;
  for (int i = 0; i < n; ++i) {
    const PageId p = logical[i];
    SlotId s = kNoSlot;
    if (p >= 0 && p < num_pages) {
      const SlotId r = slot_of_page[p];
      if (r >= 0) {
        s = r;
      } else {
        s = in_place_ref(p);
        ++in_place;
      }
    }
    physical[i] = s;
  }
  return in_place;
}

}  // namespace kvtier
