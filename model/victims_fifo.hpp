#pragma once
#include <cstdint>
#include <vector>

#include "model/residency_hints.hpp"
#include "model/residency_state.hpp"

namespace kvtier {

// Host-side victim finder with the exact choices of ScanVictims: a FIFO of uses, read lazily.
// O(1) per use, O(1) amortised per victim, plus one sort by slot index of each step's slots
// that eviction reaches.
//
// Every use of a slot (a hit or an install, reported through on_slot_used) appends (step,
// slot). Steps never decrease, so the FIFO is in last-use order; an entry is current while the
// slot's last_use still equals its step (a later use appended a newer entry, a release stamped
// the slot free). Eviction reads the front: stale entries are dropped, and the current entries
// of the front step are the victims, ordered by slot ("the front run"). Free slots
// (kFreeSlotStep, before every step) are a bit set, lowest first.
//
// Why a FIFO and not buckets of steps (the finder before it, bench/results/planner-speed.md):
// a bucket hands a slot used since on to the
// bucket of its last use (a random read of the bucket ring and a write to the list it joins),
// two dependent random reads for every hit that eviction reaches; here that hit already paid a
// sequential write. And the front is a plain array: the victims of the next misses are known,
// so their state (last use, page, that page's slot entry) is hinted well ahead of the install.
//
// Contract: every change of a slot's last_use goes through ensure_pages, release_page or
// flush_pool (their hooks keep the FIFO); a state built in some other way is adopted through
// the constructor that reads it. When select finds m victims the caller installs them at
// `step` (ensure_pages does); when it finds fewer it changes nothing the next select could see.
class FifoVictims {
 public:
  struct Config {};

  // Every slot free (a new ResidencyState).
  explicit FifoVictims(SlotId num_slots, Config = {});
  // Adopts `st` as it stands: free slots are those stamped kFreeSlotStep.
  explicit FifoVictims(const ResidencyView& st, Config = {});

  // The FIFO's hot fields by value, for a loop that pops and appends at almost every step
  // (ensure_each): held in registers there. Read through `this`, every store to a last use (an
  // int64, which may alias the finder's 64-bit fields) would force them to be read again.
  struct Cursor {
    std::int64_t* steps;
    SlotId* slots;
    std::uint64_t mask, head, tail;  // the ring holds mask + 1 entries
    bool pops;  // no free slot and no front run: a victim is the front's current entry

    // The single victim at `step` from the front, or kNoSlot where select must decide (free
    // slots, a front run, a front step of several entries, nothing evictable). Stale entries
    // met on the way are dropped either way.
    SlotId pop_one(const std::int64_t* last_use, std::int64_t step) {
      while (head != tail) {
        const std::uint64_t i = head & mask;
        const SlotId s = slots[i];
        const std::int64_t u = steps[i];
        if (last_use[s] != u) {  // used since, or freed: a stale entry
          ++head;
          continue;
        }
        if (u >= step || (head + 1 != tail && steps[(head + 1) & mask] == u)) return kNoSlot;
        ++head;
        return s;
      }
      return kNoSlot;
    }
    // Appends (step, s); false, appending nothing, when the ring is full (make_room's part).
    bool push(SlotId s, std::int64_t step) {
      if (tail - head == mask + 1) return false;
      const std::uint64_t i = tail++ & mask;
      steps[i] = step;
      slots[i] = s;
      return true;
    }
    // The state of the victims a few misses ahead (a stream misses at nearly every step): the
    // last use and page of the entry 2 x kHintAhead behind the front, and the slot entry of
    // the page of the one kHintAhead behind. One entry of each a miss, cheaper than
    // hint_front's marks; a stale entry costs only a wasted hint.
    void hint_coming(const ResidencyView& st) const {
      if (head + 2 * kHintAhead < tail) hint_victim(st, slots[(head + 2 * kHintAhead) & mask]);
      if (head + kHintAhead < tail) hint_evicted_entry(st, slots[(head + kHintAhead) & mask]);
    }
  };
  Cursor cursor() {
    return {steps_.data(), slots_.data(), mask_,
            head_,         tail_,         run_pos_ == run_.size() && free_word_ == free_.size()};
  }
  // Takes back a cursor's front and tail; no other call on the finder may come between.
  void commit(Cursor c) {
    head_ = c.head;
    tail_ = c.tail;
  }

  // Writes to out[0..found) the slots with last_use < step of smallest (last_use, slot), in
  // that order; found < m only when fewer slots are evictable.
  // Inline for the miss of a replay that evicts at almost every step (a stream of single
  // lookups): one victim, no free slot, no front run left, and the front step's only current
  // entry is the victim.
  int select(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
    if (m == 1) {
      Cursor c = cursor();
      if (c.pops) {
        const SlotId s = c.pop_one(st.last_use, step);
        commit(c);
        if (s != kNoSlot) {
          if (hints_pay(st)) hint_front(st);
          out[0] = s;
          return 1;
        }
      }
    }
    return select_any(st, step, m, out);
  }
  // A slot's last_use became `step` (a hit or an install).
  void on_slot_used(const ResidencyView& st, SlotId s, std::int64_t step) {
    if (tail_ - head_ == steps_.size()) make_room(st);
    const std::uint64_t i = tail_++ & mask_;
    steps_[i] = step;
    slots_[i] = s;
  }
  void on_slot_freed(SlotId s);
  void on_flush();

  // Entries held: at most the larger of 64 and 2 x slots + 64, rounded up to a power of two.
  std::uint64_t entries() const { return tail_ - head_; }

 private:
  void make_room(const ResidencyView& st);
  void hint_front(const ResidencyView& st);
  SlotId pop_free();
  int select_any(const ResidencyView& st, std::int64_t step, int m, SlotId* out);
  bool next_run(const ResidencyView& st, std::int64_t step);
  void sort_slots();

  SlotId num_slots_;
  // The FIFO: entries [head_, tail_) at index & mask_, oldest first; steps_[i] and slots_[i]
  // form one entry (two arrays: 12 bytes an entry, not a padded 16).
  std::vector<std::int64_t> steps_;
  std::vector<SlotId> slots_;
  std::uint64_t mask_ = 0;
  std::uint64_t head_ = 0, tail_ = 0;
  std::uint64_t max_entries_ = 0;  // the ring's size at which make_room compacts, not grows
  // Hint marks: the entries below hinted_use_ had their slot's last use and page hinted, those
  // below hinted_page_ also that page's slot entry.
  std::uint64_t hinted_use_ = 0, hinted_page_ = 0;
  // The front run: slots by index, [run_pos_, size) still to take; each is a victim while its
  // last_use is still the run's step (run_step_, or after an undone select, which may leave
  // the victims of several steps, run_steps_[i]).
  std::vector<SlotId> run_;
  std::vector<std::int64_t> run_steps_;
  std::int64_t run_step_ = 0;
  std::size_t run_pos_ = 0;
  std::vector<SlotId> sort_scratch_;
  std::vector<std::uint64_t> seen_;  // [ceil(slots / 64)] scratch bits, all clear between uses
  std::vector<std::uint64_t> free_;  // [ceil(slots / 64)] bit set: the slot is free
  std::size_t free_word_ = 0;        // no free slot lies in a word below this one
};

}  // namespace kvtier
