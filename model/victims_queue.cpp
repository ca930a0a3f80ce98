#include "model/victims_queue.hpp"

#include <algorithm>
#include <bit>
#include <utility>

namespace kvtier {
namespace {

std::vector<std::uint64_t> all_free(SlotId num_slots) {
  const auto n = static_cast<std::size_t>(num_slots);
  std::vector<std::uint64_t> bits((n + 63) / 64, ~std::uint64_t{0});
  if (n % 64 != 0) bits.back() = (std::uint64_t{1} << (n % 64)) - 1;
  return bits;
}

}  // namespace

QueueVictims::QueueVictims(SlotId num_slots, Config)
    : num_slots_(num_slots),
      ring_(2 * static_cast<std::size_t>(num_slots) + kSlack),
      pos_(static_cast<std::size_t>(num_slots), kNotQueued),
      free_(all_free(num_slots)) {}

QueueVictims::QueueVictims(const ResidencyView& st, Config)
    : num_slots_(st.num_slots),
      ring_(2 * static_cast<std::size_t>(st.num_slots) + kSlack),
      pos_(static_cast<std::size_t>(st.num_slots), kNotQueued),
      free_(((static_cast<std::size_t>(st.num_slots) + 63) / 64), 0) {
  std::vector<std::pair<std::int64_t, SlotId>> used;
  for (SlotId s = 0; s < st.num_slots; ++s) {
    if (st.last_use[s] == kFreeSlotStep) {
      free_[static_cast<std::size_t>(s) / 64] |= std::uint64_t{1} << (s % 64);
    } else {
      used.emplace_back(st.last_use[s], s);
    }
  }
  std::sort(used.begin(), used.end());
  for (const auto& [use, s] : used)
    on_slot_used(s, use);
}

SlotId QueueVictims::pop_free() {
  for (std::size_t w = free_word_; w < free_.size(); ++w) {
    if (free_[w] != 0) {
      const int bit = std::countr_zero(free_[w]);
      free_[w] &= free_[w] - 1;
      free_word_ = w;
      return static_cast<SlotId>(w * 64 + static_cast<std::size_t>(bit));
    }
  }
  free_word_ = free_.size();
  return kNoSlot;
}

// Orders the front run -- the live entries of the oldest step still queued, up to the next
// segment -- by slot index, packed at the end of its segment. False when no slot is
// evictable at `step` (the queue is empty or its oldest live slot was used in this step).
bool QueueVictims::sort_front_run(const ResidencyView& st, std::int64_t step) {
  while (size_ > 0 && !live(head_))
    pass_front();
  if (size_ == 0) return false;
  if (st.last_use[slot_of(ring_[head_])] >= step) return false;
  std::size_t span = 1, count = 1;
  for (std::size_t i = wrap(head_ + 1); span < size_ && (ring_[i] & kSegmentStart) == 0;
       i = wrap(i + 1), ++span) {
    if (live(i)) ++count;
  }
  sorted_ = count;
  if (count == 1) return true;  // one slot (every step of a stream of single lookups)
  run_.clear();
  for (std::size_t i = head_, k = 0; k < span; i = wrap(i + 1), ++k) {
    if (live(i)) run_.push_back(slot_of(ring_[i]));
  }
  std::sort(run_.begin(), run_.end());
  const std::size_t skipped = span - count;
  head_ = wrap(head_ + skipped);
  size_ -= skipped;
  for (std::size_t k = 0, i = head_; k < count; ++k, i = wrap(i + 1)) {
    ring_[i] = static_cast<std::uint32_t>(run_[k]) | (k == 0 ? kSegmentStart : 0u);
    pos_[static_cast<std::size_t>(run_[k])] = static_cast<std::uint32_t>(i);
  }
  return true;
}

int QueueVictims::select_any(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
  if (m <= 0) return 0;
  // A victim keeps its live entry (now behind the front) until the caller installs it and
  // on_slot_used queues it again, so undoing a short select only moves the front back.
  const std::size_t head = head_, size = size_, sorted = sorted_;
  int found = 0;
  while (found < m) {
    const SlotId s = pop_free();
    if (s == kNoSlot) break;
    out[found++] = s;
  }
  while (found < m) {
    if (sorted_ == 0 && !sort_front_run(st, step)) break;
    if (live(head_)) out[found++] = slot_of(ring_[head_]);
    pass_front();
    --sorted_;
  }
  if (found == m) return found;
  head_ = head;
  size_ = size;
  sorted_ = sorted;
  for (int i = 0; i < found; ++i) {
    const auto k = static_cast<std::size_t>(out[i]);
    if (pos_[k] != kNotQueued) continue;  // from the queue: live again behind the front
    free_[k / 64] |= std::uint64_t{1} << (k % 64);
    free_word_ = std::min(free_word_, k / 64);
  }
  return found;
}

// Drops the stale entries, keeping the live ones in order (the first kept entry of each
// segment marks it): at most one per slot, so the queue at least halves and each use pays
// O(1) for it, amortised.
void QueueVictims::compact() {
  std::size_t w = head_, kept = 0, sorted = 0;
  std::size_t segment = 0, kept_segment = 0;
  for (std::size_t i = head_, k = 0; k < size_; i = wrap(i + 1), ++k) {
    if (ring_[i] & kSegmentStart) ++segment;
    if (!live(i)) continue;
    const SlotId s = slot_of(ring_[i]);
    const bool first = kept == 0 || segment != kept_segment;
    ring_[w] = static_cast<std::uint32_t>(s) | (first ? kSegmentStart : 0u);
    pos_[static_cast<std::size_t>(s)] = static_cast<std::uint32_t>(w);
    w = wrap(w + 1);
    kept_segment = segment;
    ++kept;
    if (k < sorted_) sorted = kept;
  }
  size_ = kept;
  sorted_ = sorted;
}

void QueueVictims::on_slot_freed(SlotId s) {
  const auto k = static_cast<std::size_t>(s);
  pos_[k] = kNotQueued;
  free_[k / 64] |= std::uint64_t{1} << (k % 64);
  free_word_ = std::min(free_word_, k / 64);
}

void QueueVictims::on_flush() {
  head_ = 0;
  size_ = 0;
  sorted_ = 0;
  std::fill(pos_.begin(), pos_.end(), kNotQueued);
  free_ = all_free(num_slots_);
  free_word_ = 0;
}

}  // namespace kvtier
