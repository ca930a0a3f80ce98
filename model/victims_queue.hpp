#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/residency_state.hpp"

namespace kvtier {

// Host-side victim finder with the exact choices of ScanVictims: O(1) per use, O(1) amortised
// per victim, plus one sort by slot index of each step's slots that eviction reaches.
//
// Why a queue of steps is enough: steps never decrease, so the slots used at the newest step
// are the most recently used of all. Every step with a use gets a bucket, in step order, and
// every slot is listed in one bucket: the one of the step it was installed at, or a later
// one. A hit touches nothing of the finder's (the state's last_use records it; the finder
// only opens the step's bucket), so a hit-heavy replay pays almost nothing for it. Eviction
// takes the oldest bucket apart: its slots whose last_use is still its step are its victims,
// ordered by index ("the front run"); slots used since go on to the bucket of their last_use,
// freed ones leave. Free slots (kFreeSlotStep, before every step) are a bit set, lowest first.
//
// Contract: every change of a slot's last_use goes through ensure_pages, release_page or
// flush_pool (their hooks keep the buckets); a state built in some other way is adopted
// through the constructor that reads it. When select finds m victims it lists them at `step`,
// for the caller installs them there (ensure_pages does); when it finds fewer it changes
// nothing the next select could see.
class QueueVictims {
 public:
  struct Config {};

  // Every slot free (a new ResidencyState).
  explicit QueueVictims(SlotId num_slots, Config = {});
  // Adopts `st` as it stands: free slots are those stamped kFreeSlotStep.
  explicit QueueVictims(const ResidencyView& st, Config = {});

  // Writes to out[0..found) the slots with last_use < step of smallest (last_use, slot), in
  // that order; found < m only when fewer slots are evictable.
  // Inline for the miss of a replay that evicts at almost every step (a stream of single
  // lookups): one victim, no free slot, no front run left, and the oldest bucket (not this
  // step's) lists one slot, still used last at its step.
  int select(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
    if (m == 1 && run_pos_ == run_.size() && held() > 1 && free_word_ == free_.size()) {
      const Bucket& k = bucket(front_);
      if (k.head != kEnd && k.head == k.tail && st.last_use[k.head] == k.step) {
        const SlotId s = k.head;
        ++front_;
        next_[static_cast<std::size_t>(s)] = kUnlisted;  // a victim: in no bucket until listed
        if (step != newest_step_) open_bucket(st, step);
        list(s, newest_);  // the caller installs it at `step`
        out[0] = s;
        return 1;
      }
    }
    return select_any(st, step, m, out);
  }
  // A slot's last_use became `step` (a hit or an install): only the step's bucket is opened.
  void on_slot_used(const ResidencyView& st, SlotId, std::int64_t step) {
    if (step == newest_step_ && held() > 0) return;
    // Inline while the ring has room and no compaction is due (a stream of single lookups
    // opens a bucket for every lookup).
    if (held() + 1 <= std::min(ring_.size(), 2 * next_.size() + 64)) {
      bucket(++newest_) = Bucket{step, kEnd, kEnd};
      newest_step_ = step;
    } else {
      open_bucket(st, step);
    }
  }
  void on_slot_freed(SlotId s);
  void on_flush();

  // Buckets held (steps from the oldest listed one to the newest): at most 2 x slots + 64.
  std::uint64_t buckets() const { return held(); }

 private:
  static constexpr std::int32_t kEnd = -1;       // next_ of a bucket's last slot
  static constexpr std::int32_t kUnlisted = -2;  // in no bucket (free, or a victim)
  static constexpr std::int32_t kInRun = -3;     // in the front run

  struct Bucket {
    std::int64_t step;
    std::int32_t head, tail;  // the slots listed, kEnd when none
  };

  std::uint64_t held() const { return newest_ + 1 - front_; }
  Bucket& bucket(std::uint64_t b) { return ring_[b & (ring_.size() - 1)]; }
  void open_bucket(const ResidencyView& st, std::int64_t step);
  void compact(const ResidencyView& st, std::int64_t step);
  void list(SlotId s, std::uint64_t b);
  void hand_on(SlotId s, std::int64_t use);
  std::uint64_t bucket_of_step(std::int64_t use);
  SlotId pop_free();
  int select_any(const ResidencyView& st, std::int64_t step, int m, SlotId* out);
  bool next_run(const ResidencyView& st, std::int64_t step);
  void sort_slots();

  std::vector<std::int32_t> next_;  // [slots] the next slot listed in the same bucket, or above
  std::vector<Bucket> ring_;        // buckets [front_, newest_], at index & (size - 1)
  std::uint64_t front_ = 1;         // the oldest bucket not yet taken apart
  std::uint64_t newest_ = 0;        // front_ > newest_: no bucket held
  std::int64_t newest_step_ = 0;    // the step of bucket newest_
  // The front run: slots by index, [run_pos_, size) still to take; each is a victim while its
  // last_use is still the run's step (run_step_, or after an undone select, which may leave
  // the victims of several steps, run_steps_[i]).
  std::vector<SlotId> run_;
  std::vector<std::int64_t> run_steps_;
  std::int64_t run_step_ = 0;
  std::size_t run_pos_ = 0;
  std::vector<SlotId> sort_scratch_;
  std::vector<std::uint64_t> free_;  // [ceil(slots / 64)] bit set: the slot is free
  std::size_t free_word_ = 0;        // no free slot lies in a word below this one
};

}  // namespace kvtier
