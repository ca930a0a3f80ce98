#pragma once
#include <cstdint>
#include <vector>

#include "model/residency_state.hpp"

namespace kvtier {

// Host-side victim finder with the exact choices of ScanVictims, in O(1) amortised per use and
// per victim, plus one sort by slot index of each step's slots that eviction reaches.
//
// Why a queue is enough: steps never decrease, so a slot used now is the most recently used
// of all. Every use appends the slot at the back (ensure_pages reports each one through
// on_slot_used), and the least recently used slots sit at the front. A slot's older entries
// stay in the queue, stale (pos_ names its one live entry), until the front passes them or
// the queue is compacted. The entries of one step form a segment (its first entry carries a
// mark); its live slots are ordered by index only when eviction reaches it ("the front run"),
// so steps whose slots are all used again are never sorted. Free slots (last_use
// kFreeSlotStep, before every step) are a bit set, lowest first.
//
// Contract: every change of a slot's last_use goes through ensure_pages, release_page or
// flush_pool (their hooks keep the queue); a state built in some other way is adopted through
// the constructor that reads it. When select finds fewer than m victims it changes nothing;
// when it finds m, the caller installs them at `step` (ensure_pages does).
class QueueVictims {
 public:
  struct Config {};

  // Every slot free (a new ResidencyState).
  explicit QueueVictims(SlotId num_slots, Config = {});
  // Adopts `st` as it stands: free slots are those stamped kFreeSlotStep.
  explicit QueueVictims(const ResidencyView& st, Config = {});

  // Writes to out[0..found) the slots with last_use < step of smallest (last_use, slot), in
  // that order; found < m only when fewer slots are evictable (and then nothing changes).
  // Inline for the common miss of a replay that evicts: one victim, no free slot, the front
  // entry live and alone in its run (or the next of a sorted run).
  int select(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
    if (m == 1 && free_word_ == free_.size() && size_ > 1 && live(head_)) {
      const SlotId s = slot_of(ring_[head_]);
      const bool alone =
          sorted_ == 0 && (ring_[wrap(head_ + 1)] & kSegmentStart) != 0 && st.last_use[s] < step;
      if (sorted_ > 0 || alone) {
        out[0] = s;
        pass_front();
        if (sorted_ > 0) --sorted_;
        return 1;
      }
    }
    return select_any(st, step, m, out);
  }
  // `s` was queried (a hit) or installed at `step`: it becomes the most recently used.
  // Inline: ensure_pages calls it for every hit.
  void on_slot_used(SlotId s, std::int64_t step) {
    if (size_ == ring_.size()) compact();
    const std::size_t tail = wrap(head_ + size_);
    const bool first = size_ == 0 || step != last_step_;
    ring_[tail] = static_cast<std::uint32_t>(s) | (first ? kSegmentStart : 0u);
    pos_[static_cast<std::size_t>(s)] = static_cast<std::uint32_t>(tail);
    last_step_ = step;
    ++size_;
  }
  void on_slot_freed(SlotId s);
  void on_flush();

  // Entries held, live and stale: at most 2 x slots + kSlack.
  std::size_t queue_size() const { return size_; }
  static constexpr std::size_t kSlack = 1024;

 private:
  static constexpr std::uint32_t kNotQueued = 0xffffffffu;
  static constexpr std::uint32_t kSegmentStart = 0x80000000u;  // the first entry of a step

  static SlotId slot_of(std::uint32_t entry) { return static_cast<SlotId>(entry & ~kSegmentStart); }
  // Ring positions i < 2 x capacity, wrapped.
  std::size_t wrap(std::size_t i) const { return i >= ring_.size() ? i - ring_.size() : i; }
  bool live(std::size_t i) const { return pos_[static_cast<std::size_t>(slot_of(ring_[i]))] == i; }
  void pass_front() {
    head_ = wrap(head_ + 1);
    --size_;
  }
  int select_any(const ResidencyView& st, std::int64_t step, int m, SlotId* out);
  SlotId pop_free();
  bool sort_front_run(const ResidencyView& st, std::int64_t step);
  void compact();

  SlotId num_slots_;
  // The queue: a ring of entries (slot | kSegmentStart on a step's first) in order of use,
  // [head_, head_ + size_) wrapping, so that entries eviction has passed cost nothing to drop.
  std::vector<std::uint32_t> ring_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::size_t sorted_ = 0;           // the first sorted_ entries: the front run, by slot
  std::int64_t last_step_ = 0;       // the step of the last entry queued
  std::vector<std::uint32_t> pos_;   // [slots] ring index of the slot's live entry, kNotQueued
  std::vector<std::uint64_t> free_;  // [ceil(slots / 64)] bit set: the slot is free
  std::size_t free_word_ = 0;        // no free slot lies in a word below this one
  std::vector<SlotId> run_;          // scratch: the live slots of the front run
};

}  // namespace kvtier
