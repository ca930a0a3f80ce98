#pragma once
#include <cstdint>
#include <vector>

#include "model/residency_state.hpp"

namespace kvtier {

// Host-side victim finder with the exact choices of ScanVictims: O(1) per use, O(1) amortised
// per victim, plus one sort by slot index of each step's slots that eviction reaches.
//
// Why a queue of steps is enough: steps never decrease, so the slots used at the newest step
// are the most recently used of all. Every step with a use gets a bucket, in step order; a
// slot is listed in one bucket. A use (ensure_pages reports each through on_slot_used) only
// records the slot's newest bucket, O(1): the slot stays listed where it was until eviction
// reaches that bucket, which then hands it on to its newest one. Eviction takes the oldest
// bucket: its slots still used last in its step are its victims, ordered by index ("the front
// run"), so a step whose slots were all used again is never sorted. Free slots (last_use
// kFreeSlotStep, before every step) are a bit set, lowest first.
//
// Contract: every change of a slot's last_use goes through ensure_pages, release_page or
// flush_pool (their hooks keep the buckets); a state built in some other way is adopted
// through the constructor that reads it. When select finds fewer than m victims it changes
// nothing the next select could see; when it finds m, the caller installs them at `step`
// (ensure_pages does).
class QueueVictims {
 public:
  struct Config {
    // Bucket numbers are 32-bit: they are renumbered from 2 before they reach this (tests
    // lower it to exercise the renumbering).
    std::uint32_t renumber_at = 0xf0000000u;
  };

  // Every slot free (a new ResidencyState).
  explicit QueueVictims(SlotId num_slots);
  QueueVictims(SlotId num_slots, Config config);
  // Adopts `st` as it stands: free slots are those stamped kFreeSlotStep.
  explicit QueueVictims(const ResidencyView& st);
  QueueVictims(const ResidencyView& st, Config config);

  // Writes to out[0..found) the slots with last_use < step of smallest (last_use, slot), in
  // that order; found < m only when fewer slots are evictable.
  // Inline for the common miss of a replay that evicts at every step: one victim, no free
  // slot, no front run left, and the oldest bucket (not this step's) lists one slot, which
  // was used last there.
  int select(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
    if (m == 1 && run_pos_ == run_.size() && front_ < newest_ && free_word_ == free_.size()) {
      const Bucket& k = bucket(front_);
      if (k.head != kEnd && k.head == k.tail) {
        Slot& x = slot_[static_cast<std::size_t>(k.head)];
        if (x.bucket == front_) {
          out[0] = k.head;
          x.next = kUnlisted;  // the install lists it again
          ++front_;
          prefetch_ahead(st);
          return 1;
        }
      }
    }
    return select_any(st, step, m, out);
  }
  // `s` was queried (a hit) or installed at `step`: it becomes the most recently used.
  // Inline: ensure_pages calls it for every hit.
  void on_slot_used(SlotId s, std::int64_t step) {
    if (step != newest_step_ || newest_ < front_) {
      if (held() + 1 <= open_limit_ && newest_ + 1 < renumber_at_) {
        if (newest_ < front_) front_ = newest_ + 1;  // none held: the new one is the oldest
        bucket(++newest_) = Bucket{kEnd, kEnd};
        newest_step_ = step;
      } else {
        open_bucket(step);
      }
    }
    Slot& x = slot_[static_cast<std::size_t>(s)];
    x.bucket = newest_;
    if (x.next == kUnlisted) list(s, newest_);
  }
  void on_slot_freed(SlotId s);
  void on_flush();

  // Buckets held (steps from the oldest listed one to the newest): at most 2 x slots + 64.
  std::uint32_t buckets() const { return held(); }

 private:
  static constexpr std::uint32_t kFree = 0xffffffffu;  // Slot::bucket of a free slot
  static constexpr std::int32_t kEnd = -1;             // Slot::next of a bucket's last slot
  static constexpr std::int32_t kUnlisted = -2;        // in no bucket (free or being installed)
  static constexpr std::int32_t kInRun = -3;           // in the front run

  struct Slot {
    std::uint32_t bucket;  // the bucket of its newest use, or kFree
    std::int32_t next;     // the next slot listed in the same bucket, or one of the above
  };
  struct Bucket {
    std::int32_t head, tail;  // listed slots, kEnd when none
  };
  struct RunEntry {
    SlotId slot;
    std::uint32_t bucket;  // the bucket it was a victim candidate of
  };

  Bucket& bucket(std::uint32_t b) { return ring_[b & (ring_.size() - 1)]; }
  std::uint32_t held() const { return newest_ >= front_ ? newest_ + 1 - front_ : 0; }
  void open_bucket(std::int64_t step);
  void compact();
  void list(SlotId s, std::uint32_t b);
  SlotId pop_free();
  int select_any(const ResidencyView& st, std::int64_t step, int m, SlotId* out);
  bool next_run(std::int64_t step);
  void prefetch_ahead(const ResidencyView& st);

  std::uint32_t renumber_at_;
  std::uint32_t
      open_limit_;  // buckets held before the next opens the slow way: min(ring, 2 x slots + 64)
  std::vector<Slot> slot_;        // [slots]
  std::vector<Bucket> ring_;      // buckets [front_, newest_], index & (size - 1)
  std::uint32_t front_ = 1;       // the oldest bucket not yet taken apart
  std::uint32_t newest_ = 0;      // front_ > newest_: no bucket
  std::int64_t newest_step_ = 0;  // the step of bucket newest_
  std::vector<RunEntry> run_;     // the front run, by slot; [run_pos_, size) still to take
  std::size_t run_pos_ = 0;
  std::vector<std::uint64_t> free_;  // [ceil(slots / 64)] bit set: the slot is free
  std::size_t free_word_ = 0;        // no free slot lies in a word below this one
};

}  // namespace kvtier
