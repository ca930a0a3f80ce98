#pragma once
#include <cstdint>
#include <type_traits>

#include "model/admission.hpp"
#include "model/hd.hpp"
#include "model/heap_sort.hpp"
#include "model/radix_sort.hpp"
#include "model/rank_sort.hpp"
#include "model/residency_hints.hpp"
#include "model/residency_state.hpp"

namespace kvtier {

// One install decided by ensure: `page` is copied host -> device into `slot`, which held
// `evicted` (kNoPage when the slot was free). Copy lists are in ascending page order.
struct CopyOp {
  PageId page;
  SlotId slot;
  PageId evicted;
  bool operator==(const CopyOp&) const = default;
};

enum class EnsureStatus : std::uint8_t {
  ok,
  page_out_of_range,  // a queried page id is not in [kNoPage, num_pages); nothing changed
  pool_too_small,     // fewer evictable slots than misses: nothing installed (hits stay marked)
};

struct EnsureResult {
  EnsureStatus status = EnsureStatus::ok;
  int lookups = 0;     // non-padding query entries
  int hits = 0;        // distinct pages resident before this step first queried them
  int misses = 0;      // distinct pages installed (== number of CopyOps)
  int bypassed = 0;    // distinct missing pages admission left in host memory
  int evictions = 0;   // installs that replaced a resident page
  int evictable = 0;   // with pool_too_small: slots that could have been taken
  int bad_index = -1;  // with page_out_of_range: the offending query index
};

// Caller-owned scratch, each array at least as long as the query.
struct EnsureScratch {
  PageId* miss_pages;
  SlotId* victims;
  PageId* bypassed;  // pages admission refused, ascending; may be null
};

// Hints the slot entries of pages that a replay will ensure soon: issued a few lookups ahead
// of their ensure, their reads overlap the lookups between (a replay of single requests can
// overlap them no other way: each lookup's next branch waits on its slot entry). Only a hint:
// nothing changes; pages out of range are skipped.
KVT_HD inline void hint_pages(const ResidencyView& st, const PageId* pages, int n) {
  for (int i = 0; i < n; ++i) {
    if (pages[i] < st.num_pages) hint_slot_entry(st, pages[i]);
  }
}
// The second stage, for pages whose slot entries were hinted a few lookups before (by then in
// cache): the last use of each resident page's slot, which a hit raises. Reads the slot
// entries, so it costs a wait where they were not hinted first.
KVT_HD inline void hint_page_uses(const ResidencyView& st, const PageId* pages, int n) {
  for (int i = 0; i < n; ++i) {
    if (pages[i] < st.num_pages) hint_last_use(st, pages[i]);
  }
}

// The LRU residency engine, one step (or one chunk of a step) at a time.
//
// `query` holds the pages of every row of the step, write pages first, padded with kNoPage,
// duplicates allowed. Rules (the same on every backend):
//  - every queried page ends the call resident (or bypassed by admission);
//  - victims are the evictable slots of smallest last-use step, ties by slot index; a slot
//    is evictable iff its last_use < step, so nothing queried in this step -- including by
//    an earlier chunk with the same step -- is evicted;
//  - misses are installed in ascending page order, the i-th miss into the i-th victim.
// Steps must not decrease between calls on the same state. Every slot whose last_use is
// raised (a hit, an install) is reported to the finder through on_slot_used.
template <class Victims, class Admission = AdmitAll>
KVT_HD EnsureResult ensure_pages(ResidencyView st, const PageId* query, int n, std::int64_t step,
                                 Victims& victims, EnsureScratch scratch, CopyOp* copies,
                                 Admission admission = Admission{}) {
  EnsureResult r;
  for (int i = 0; i < n; ++i) {
    if (query[i] < kNoPage || query[i] >= st.num_pages) {
      r.status = EnsureStatus::page_out_of_range;
      r.bad_index = i;
      return r;
    }
  }
  // Mark hits; collect each missing page once (kPendingSlot flags it as collected).
  int m = 0;
  auto mark = [&](int i) {
    const PageId p = query[i];
    if (p == kNoPage) return;
    ++r.lookups;
    const SlotId s = st.slot_of_page[p];
    if (s >= 0) {
      if (st.last_use[s] < step) {
        st.last_use[s] = step;
        victims.on_slot_used(st, s, step);
        ++r.hits;
      }
    } else if (s == kNoSlot) {
      st.slot_of_page[p] = kPendingSlot;
      scratch.miss_pages[m++] = p;
    }
  };
  // The lookups ahead are hinted in two stages: a page's slot entry kHintAhead lookups before
  // the one that hints its slot's last use (by then the slot entry is in cache). A query too
  // short to look ahead in, or a state in cache, is marked by the loop without hints.
  if (n > kHintAhead && hints_pay(st)) {
    for (int i = 0; i < 2 * kHintAhead && i < n; ++i)
      hint_slot_entry(st, query[i]);
    for (int i = 0; i < n; ++i) {
      if (i + 2 * kHintAhead < n) hint_slot_entry(st, query[i + 2 * kHintAhead]);
      if (i + kHintAhead < n) hint_last_use(st, query[i + kHintAhead]);
      mark(i);
    }
  } else {
    for (int i = 0; i < n; ++i)
      mark(i);
  }
  // Misses are distinct (kPendingSlot collected each once). m <= n: testing n too shows the
  // compiler that a short query never reaches the larger sorts (else it warns of bounds it
  // cannot see). On the host the victims' scratch, not filled yet, serves the radix sort.
  if (n <= kRankSortMax || m <= kRankSortMax) {
    rank_sort_distinct(scratch.miss_pages, m);
  } else {
#ifdef __CUDA_ARCH__
    heap_sort(scratch.miss_pages, m, [](PageId a, PageId b) { return a < b; });
#else
    static_assert(std::is_same_v<PageId, SlotId>);
    radix_sort_below(scratch.miss_pages, static_cast<std::size_t>(m), st.num_pages,
                     scratch.victims);
#endif
  }

  // Admission runs in ascending page order so that its own state evolves deterministically.
  int admitted = 0;
  for (int i = 0; i < m; ++i) {
    const PageId p = scratch.miss_pages[i];
    if (admission.admit(p, step)) {
      scratch.miss_pages[admitted++] = p;
    } else {
      st.slot_of_page[p] = kNoSlot;
      if (scratch.bypassed != nullptr) scratch.bypassed[r.bypassed] = p;
      ++r.bypassed;
    }
  }

  const int found = victims.select(st, step, admitted, scratch.victims);
  if (found < admitted) {
    for (int i = 0; i < admitted; ++i)
      st.slot_of_page[scratch.miss_pages[i]] = kNoSlot;
    r.status = EnsureStatus::pool_too_small;
    r.misses = admitted;
    r.evictable = found;
    return r;
  }
  auto install = [&](int i) {
    const PageId p = scratch.miss_pages[i];
    const SlotId s = scratch.victims[i];
    const PageId old = install_page(st, p, s);
    if (old != kNoPage) ++r.evictions;
    st.last_use[s] = step;
    victims.on_slot_used(st, s, step);
    copies[i] = CopyOp{p, s, old};
  };
  // Each install reads its victim's page and clears that page's slot entry: hinted ahead in
  // two stages, like the lookups.
  if (n > kHintAhead && admitted > kHintAhead && hints_pay(st)) {  // admitted <= n, as above
    for (int i = 0; i < 2 * kHintAhead && i < admitted; ++i)
      hint_victim(st, scratch.victims[i]);
    for (int i = 0; i < admitted; ++i) {
      if (i + 2 * kHintAhead < admitted) hint_victim(st, scratch.victims[i + 2 * kHintAhead]);
      if (i + kHintAhead < admitted) hint_evicted_entry(st, scratch.victims[i + kHintAhead]);
      install(i);
    }
  } else {
    for (int i = 0; i < admitted; ++i)
      install(i);
  }
  r.misses = admitted;
  return r;
}

// Drops one page from the pool (its request ended); its slot becomes free.
template <class Victims>
KVT_HD bool release_page(ResidencyView st, PageId p, Victims& victims) {
  if (p < 0 || p >= st.num_pages) return false;
  const SlotId s = st.slot_of_page[p];
  if (s < 0) return false;
  st.slot_of_page[p] = kNoSlot;
  st.page_of_slot[s] = kNoPage;
  st.last_use[s] = kFreeSlotStep;
  victims.on_slot_freed(s);
  return true;
}

// Drops every slot. The host bank keeps every page, so later steps rehydrate from it.
template <class Victims>
KVT_HD void flush_pool(ResidencyView st, Victims& victims) {
  for (SlotId s = 0; s < st.num_slots; ++s) {
    const PageId p = st.page_of_slot[s];
    if (p != kNoPage) st.slot_of_page[p] = kNoSlot;
    st.page_of_slot[s] = kNoPage;
    st.last_use[s] = kFreeSlotStep;
  }
  victims.on_flush();
}

}  // namespace kvtier
