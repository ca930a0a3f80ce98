#pragma once
// The cache hints of the residency core (ensure_pages, the FIFO victim finder): which lines of
// the state a lookup, an install or a coming victim will touch, and whether hinting them pays.
#include "model/cache_hint.hpp"
#include "model/hd.hpp"
#include "model/residency_state.hpp"

namespace kvtier {

// How many lookups (or installs) ahead ensure_pages hints the cache lines it will touch: enough
// to cover a cache miss with the work of the lookups between, few enough to stay in L1.
inline constexpr int kHintAhead = 8;

// Whether hints pay for their instructions: only where the state arrays outgrow a core's cache
// (a page's slot entries from 1 MiB, a slot's last uses from 256 KiB); below, every lookup
// finds its lines in cache anyway (a planner's pools mostly do).
KVT_HD inline bool hints_pay(const ResidencyView& st) {
  return st.num_pages >= (PageId{1} << 18) || st.num_slots >= (SlotId{1} << 15);
}

// The hints of ensure_pages; queried pages are range-checked before any is hinted.
KVT_HD inline void hint_slot_entry(const ResidencyView& st, PageId p) {
  if (p >= 0) cache_hint_read(st.slot_of_page + p);
}
KVT_HD inline void hint_last_use(const ResidencyView& st, PageId p) {
  if (p < 0) return;
  const SlotId s = st.slot_of_page[p];
  if (s >= 0) cache_hint_write(st.last_use + s);
}
KVT_HD inline void hint_victim(const ResidencyView& st, SlotId s) {
  cache_hint_write(st.page_of_slot + s);
  cache_hint_write(st.last_use + s);
}
KVT_HD inline void hint_evicted_entry(const ResidencyView& st, SlotId s) {
  const PageId old = st.page_of_slot[s];
  if (old >= 0) cache_hint_write(st.slot_of_page + old);
}

}  // namespace kvtier
