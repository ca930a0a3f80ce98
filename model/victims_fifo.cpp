#include "model/victims_fifo.hpp"

#include <algorithm>
#include <bit>
#include <utility>

#include "model/radix_sort.hpp"
#include "model/rank_sort.hpp"

namespace kvtier {
namespace {

std::vector<std::uint64_t> all_free(std::size_t num_slots) {
  std::vector<std::uint64_t> bits((num_slots + 63) / 64, ~std::uint64_t{0});
  if (num_slots % 64 != 0) bits.back() = (std::uint64_t{1} << (num_slots % 64)) - 1;
  return bits;
}

constexpr std::uint64_t kFirstEntries = 64;

}  // namespace

FifoVictims::FifoVictims(SlotId num_slots, Config)
    : num_slots_(num_slots),
      steps_(kFirstEntries),
      slots_(kFirstEntries),
      mask_(kFirstEntries - 1),
      max_entries_(std::bit_ceil(2 * static_cast<std::uint64_t>(num_slots) + kFirstEntries)),
      seen_((static_cast<std::size_t>(num_slots) + 63) / 64, 0),
      free_(all_free(static_cast<std::size_t>(num_slots))) {}

FifoVictims::FifoVictims(const ResidencyView& st, Config) : FifoVictims(st.num_slots) {
  std::fill(free_.begin(), free_.end(), 0);
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
    on_slot_used(st, s, use);
}

// The ring is full: it doubles up to max_entries_; there, the stale entries go instead (and
// repeats of a slot at one step, left by a release and a new install within the step). At most
// one entry per slot is current, so a compaction at least halves the ring's use: O(1)
// amortised per use.
void FifoVictims::make_room(const ResidencyView& st) {
  if (steps_.size() < max_entries_) {
    const std::uint64_t size = steps_.size() * 2;
    std::vector<std::int64_t> steps(size);
    std::vector<SlotId> slots(size);
    for (std::uint64_t e = head_; e != tail_; ++e) {
      steps[e & (size - 1)] = steps_[e & mask_];
      slots[e & (size - 1)] = slots_[e & mask_];
    }
    steps_.swap(steps);
    slots_.swap(slots);
    mask_ = size - 1;
    return;
  }
  std::uint64_t kept = head_;
  for (std::uint64_t e = head_; e != tail_; ++e) {
    const SlotId s = slots_[e & mask_];
    const std::int64_t u = steps_[e & mask_];
    const auto k = static_cast<std::size_t>(s);
    const std::uint64_t bit = std::uint64_t{1} << (k % 64);
    if (st.last_use[s] != u || (seen_[k / 64] & bit) != 0) continue;
    seen_[k / 64] |= bit;
    steps_[kept & mask_] = u;
    slots_[kept & mask_] = s;
    ++kept;
  }
  for (std::uint64_t e = head_; e != kept; ++e) {
    const auto k = static_cast<std::size_t>(slots_[e & mask_]);
    seen_[k / 64] = 0;
  }
  tail_ = kept;
}

// Two stages, kHintAhead entries apart: a coming victim's last use and page, then (its page
// in cache by then) that page's slot entry, which the install clears. Marks keep every entry
// hinted once, however many stale entries a select skips.
void FifoVictims::hint_front(const ResidencyView& st) {
  const std::uint64_t use_end = std::min(tail_, head_ + 2 * kHintAhead);
  for (hinted_use_ = std::max(hinted_use_, head_); hinted_use_ < use_end; ++hinted_use_)
    hint_victim(st, slots_[hinted_use_ & mask_]);
  const std::uint64_t page_end = std::min(tail_, head_ + kHintAhead);
  for (hinted_page_ = std::max(hinted_page_, head_); hinted_page_ < page_end; ++hinted_page_)
    hint_evicted_entry(st, slots_[hinted_page_ & mask_]);
}

SlotId FifoVictims::pop_free() {
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

// Takes the front step apart: its current entries become the front run, ordered by slot, each
// slot once. False when no slot is evictable at `step` (no current entry, or only this step's).
bool FifoVictims::next_run(const ResidencyView& st, std::int64_t step) {
  run_.clear();
  run_steps_.clear();
  run_pos_ = 0;
  const bool hint = hints_pay(st);
  while (head_ != tail_) {
    const std::int64_t u = steps_[head_ & mask_];
    if (st.last_use[slots_[head_ & mask_]] != u) {
      ++head_;
      continue;
    }
    if (u >= step) return false;
    for (; head_ != tail_ && steps_[head_ & mask_] == u; ++head_) {
      const SlotId s = slots_[head_ & mask_];
      if (st.last_use[s] != u) continue;
      const auto k = static_cast<std::size_t>(s);
      const std::uint64_t bit = std::uint64_t{1} << (k % 64);
      if ((seen_[k / 64] & bit) != 0) continue;  // listed twice: released and installed again
      seen_[k / 64] |= bit;
      run_.push_back(s);
    }
    for (SlotId s : run_)
      seen_[static_cast<std::size_t>(s) / 64] = 0;
    if (hint) hint_front(st);
    run_step_ = u;
    sort_slots();
    return true;
  }
  return false;
}

// The front run by slot index: a rank sort up to kRankSortMax slots (the slots of a small
// step: branch-free, where a comparison sort mispredicts half its branches), beyond that an
// LSD radix sort, 8 bits a pass over the bits slot numbers use (a run is a step's slots,
// thousands for a planner's layer-step).
void FifoVictims::sort_slots() {
  if (run_.size() <= static_cast<std::size_t>(kRankSortMax)) {  // distinct: deduplicated
    rank_sort_distinct(run_.data(), static_cast<int>(run_.size()));
    return;
  }
  sort_scratch_.resize(run_.size());
  radix_sort_below(run_.data(), run_.size(), num_slots_, sort_scratch_.data());
}

int FifoVictims::select_any(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
  if (m <= 0) return 0;
  int found = 0;
  while (found < m) {
    const SlotId s = pop_free();
    if (s == kNoSlot) break;
    out[found++] = s;
  }
  const int free_found = found;
  while (found < m) {
    if (run_pos_ == run_.size() && !next_run(st, step)) break;
    const std::int64_t run_step = run_steps_.empty() ? run_step_ : run_steps_[run_pos_];
    const SlotId slot = run_[run_pos_++];
    // Used since (a newer entry lists it) or freed: not a victim of this run.
    if (st.last_use[slot] == run_step) out[found++] = slot;
  }
  if (found == m) return m;
  // Too few: every evictable slot was taken. They go back: the free ones to the bit set,
  // the others (in victim order already) become the front run again.
  for (int i = 0; i < free_found; ++i) {
    const auto k = static_cast<std::size_t>(out[i]);
    free_[k / 64] |= std::uint64_t{1} << (k % 64);
    free_word_ = std::min(free_word_, k / 64);
  }
  run_.clear();
  run_steps_.clear();
  run_pos_ = 0;
  for (int i = free_found; i < found; ++i) {
    run_.push_back(out[i]);
    run_steps_.push_back(st.last_use[out[i]]);
  }
  return found;
}

void FifoVictims::on_slot_freed(SlotId s) {
  // Its last_use is now kFreeSlotStep: its entries are stale.
  const auto k = static_cast<std::size_t>(s);
  free_[k / 64] |= std::uint64_t{1} << (k % 64);
  free_word_ = std::min(free_word_, k / 64);
}

void FifoVictims::on_flush() {
  head_ = tail_;
  run_.clear();
  run_steps_.clear();
  run_pos_ = 0;
  free_ = all_free(static_cast<std::size_t>(num_slots_));
  free_word_ = 0;
}

}  // namespace kvtier
