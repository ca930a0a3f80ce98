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

}  // namespace kvtier
