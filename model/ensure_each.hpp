#pragma once
#include <cstdint>

#include "model/ensure.hpp"
#include "model/residency_hints.hpp"

namespace kvtier {

struct EnsureEachResult {
  EnsureStatus status = EnsureStatus::ok;
  std::int64_t lookups = 0;    // entries other than kNoPage
  std::int64_t hits = 0;       // lookups whose page was resident
  std::int64_t misses = 0;     // installs (== CopyOps written)
  std::int64_t evictions = 0;  // installs that replaced a resident page
  std::int64_t done = 0;       // entries applied: all of them, or those before the failing one
};

namespace detail {

// The loop's counters as plain locals: the result, returned in the caller's memory, could
// alias the int64 last uses the loop stores to, and would be read and written at every step.
struct EachCount {
  std::int64_t lookups = 0, hits = 0, misses = 0, evictions = 0;
  EnsureEachResult result(EnsureStatus status, std::int64_t done) const {
    return {status, lookups, hits, misses, evictions, done};
  }
};

// A finder without a cursor: ensure_pages itself, one entry at a time (the definition the
// cursor's loop keeps; its speed matters only with FifoVictims).
template <class Victims>
EnsureEachResult ensure_each_plain(ResidencyView st, const PageId* pages, std::int64_t n,
                                   std::int64_t first_step, Victims& victims, CopyOp* copies) {
  EachCount c;
  PageId miss = kNoPage;
  SlotId victim = kNoSlot;
  CopyOp copy{};
  for (std::int64_t i = 0; i < n; ++i) {
    const EnsureResult r = ensure_pages(st, pages + i, 1, first_step + i, victims,
                                        EnsureScratch{&miss, &victim, nullptr}, &copy);
    c.lookups += r.lookups;  // an entry the pool had no slot for was looked up
    if (r.status != EnsureStatus::ok) return c.result(r.status, i);
    c.hits += r.hits;
    c.evictions += r.evictions;
    if (r.misses > 0 && copies != nullptr) copies[c.misses] = copy;
    c.misses += r.misses;
  }
  return c.result(EnsureStatus::ok, n);
}

// A finder with a cursor (FifoVictims): its front and tail stay in registers, and select /
// on_slot_used are called only where the cursor cannot decide (free slots, a front run, a
// front step of several entries, a full ring). Beyond the caches (hints_pay) it hints a page's
// slot entry 2 x kHintAhead entries ahead and the coming victims' state at each miss; within
// them hints cost more than they save.
template <class Victims>
EnsureEachResult ensure_each_cursor(ResidencyView st, const PageId* pages, std::int64_t n,
                                    std::int64_t first_step, Victims& victims, CopyOp* copies) {
  std::int64_t* const last_use = st.last_use;
  const bool hint = hints_pay(st);
  EachCount c;
  auto cur = victims.cursor();
  for (std::int64_t i = 0; i < n; ++i) {
    if (hint && i + 2 * kHintAhead < n) hint_slot_entry(st, pages[i + 2 * kHintAhead]);
    const PageId p = pages[i];
    const std::int64_t step = first_step + i;
    if (p < kNoPage || p >= st.num_pages) {
      victims.commit(cur);
      return c.result(EnsureStatus::page_out_of_range, i);
    }
    if (p == kNoPage) continue;
    ++c.lookups;
    SlotId s = st.slot_of_page[p];
    if (s >= 0) {
      // Used at this step already (no hit, nothing changes): only the first entry can be, in a
      // stream that goes on with the step of the call before. Past it no last use is read, so
      // a hit's line is only written, which does not hold the loop up.
      if (i == 0 && last_use[s] >= step) continue;
      ++c.hits;
    } else {
      s = cur.pops ? cur.pop_one(last_use, step) : kNoSlot;
      if (s == kNoSlot) {
        victims.commit(cur);
        const int found = victims.select(st, step, 1, &s);
        cur = victims.cursor();
        if (found < 1) {
          victims.commit(cur);
          return c.result(EnsureStatus::pool_too_small, i);
        }
      } else if (hint) {
        cur.hint_coming(st);
      }
      const PageId old = install_page(st, p, s);
      if (old != kNoPage) ++c.evictions;
      if (copies != nullptr) copies[c.misses] = CopyOp{p, s, old};
      ++c.misses;
    }
    last_use[s] = step;
    if (!cur.push(s, step)) {  // the ring is full: the finder makes room
      victims.commit(cur);
      victims.on_slot_used(st, s, step);
      cur = victims.cursor();
    }
  }
  victims.commit(cur);
  return c.result(EnsureStatus::ok, n);
}

}  // namespace detail

// A page-reference stream, one request a step (what cache simulators replay): entry i is
// ensured at step first_step + i, with exactly the decisions, state and copies of calling
// ensure_pages on each one-entry query in turn (tests/model/test_ensure_each.cpp holds every
// finder to that). One call for the whole stream: ensure_pages' machinery for a long query
// (range pass, miss collection and sort, hints, result) costs more than one lookup, and a long
// loop body keeps the processor from running the next lookups' independent reads ahead of this
// one's. Misses' copies go to copies[0..misses) unless copies is null. Stops at the first entry
// out of range (page_out_of_range) or without an evictable slot (pool_too_small), leaving that
// entry unapplied; `done` says how far it got.
template <class Victims>
EnsureEachResult ensure_each(ResidencyView st, const PageId* pages, std::int64_t n,
                             std::int64_t first_step, Victims& victims, CopyOp* copies) {
  if constexpr (requires { victims.cursor(); }) {
    return detail::ensure_each_cursor(st, pages, n, first_step, victims, copies);
  } else {
    return detail::ensure_each_plain(st, pages, n, first_step, victims, copies);
  }
}

}  // namespace kvtier
