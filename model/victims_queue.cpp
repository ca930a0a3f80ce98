#include "model/victims_queue.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <utility>

#include "model/rank_sort.hpp"

namespace kvtier {
namespace {

std::vector<std::uint64_t> all_free(std::size_t num_slots) {
  std::vector<std::uint64_t> bits((num_slots + 63) / 64, ~std::uint64_t{0});
  if (num_slots % 64 != 0) bits.back() = (std::uint64_t{1} << (num_slots % 64)) - 1;
  return bits;
}

}  // namespace

QueueVictims::QueueVictims(SlotId num_slots, Config)
    : next_(static_cast<std::size_t>(num_slots), kUnlisted),
      ring_(64, Bucket{0, kEnd, kEnd}),
      free_(all_free(static_cast<std::size_t>(num_slots))) {}

QueueVictims::QueueVictims(const ResidencyView& st, Config)
    : next_(static_cast<std::size_t>(st.num_slots), kUnlisted),
      ring_(64, Bucket{0, kEnd, kEnd}),
      free_((static_cast<std::size_t>(st.num_slots) + 63) / 64, 0) {
  std::vector<std::pair<std::int64_t, SlotId>> used;
  for (SlotId s = 0; s < st.num_slots; ++s) {
    if (st.last_use[s] == kFreeSlotStep) {
      free_[static_cast<std::size_t>(s) / 64] |= std::uint64_t{1} << (s % 64);
    } else {
      used.emplace_back(st.last_use[s], s);
    }
  }
  std::sort(used.begin(), used.end());
  for (const auto& [use, s] : used) {
    on_slot_used(st, s, use);
    list(s, newest_);
  }
}

void QueueVictims::open_bucket(const ResidencyView& st, std::int64_t step) {
  if (held() + 1 > 2 * next_.size() + 64) {
    compact(st, step);  // which opens this step's bucket too
    return;
  }
  if (held() + 1 > ring_.size()) {
    // Twice the room; each bucket keeps its number, at its place in the larger ring.
    std::vector<Bucket> grown(ring_.size() * 2, Bucket{0, kEnd, kEnd});
    for (std::uint64_t b = front_; b <= newest_; ++b)
      grown[b & (grown.size() - 1)] = bucket(b);
    ring_.swap(grown);
  }
  ++newest_;
  bucket(newest_) = Bucket{step, kEnd, kEnd};
  newest_step_ = step;
}

// Keeps only the buckets some listed or run slot's last_use names (a slot is handed on to
// the bucket of its last_use) and opens the one of `step` (the newest: a slot whose last_use
// ensure_pages just raised names it already); lists every listed slot in the bucket of its
// last_use at once: at most one bucket per slot then, for O(slots log slots) every O(slots)
// steps.
void QueueVictims::compact(const ResidencyView& st, std::int64_t step) {
  const std::int64_t oldest = held() > 0 ? bucket(front_).step : step;
  std::vector<std::int64_t> steps{step};
  for (std::size_t s = 0; s < next_.size(); ++s) {
    const std::int64_t u = st.last_use[s];
    if (next_[s] != kUnlisted && u != kFreeSlotStep && u >= oldest) steps.push_back(u);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  if (steps.size() > ring_.size()) ring_.resize(std::bit_ceil(steps.size()));
  front_ = newest_ + 1;  // numbers go on from here: run entries keep steps, not numbers
  for (std::int64_t u : steps)
    bucket(++newest_) = Bucket{u, kEnd, kEnd};
  newest_step_ = step;
  for (std::size_t s = 0; s < next_.size(); ++s) {
    if (next_[s] == kUnlisted || next_[s] == kInRun) continue;
    const std::int64_t u = st.last_use[s];
    if (u == kFreeSlotStep) {
      next_[s] = kUnlisted;
    } else {
      next_[s] = kUnlisted;
      hand_on(static_cast<SlotId>(s), u);
    }
  }
}

void QueueVictims::list(SlotId s, std::uint64_t b) {
  Bucket& k = bucket(b);
  next_[static_cast<std::size_t>(s)] = kEnd;
  if (k.tail == kEnd) {
    k.head = s;
  } else {
    next_[static_cast<std::size_t>(k.tail)] = s;
  }
  k.tail = s;
}

// The bucket of step `use`, which exists while a listed or run slot's last_use names it.
// Buckets are near-evenly spaced in steps (one per step with a use), so interpolating between
// the oldest and the newest -- both in cache -- finds it at the first probe; bisection takes
// over after a few misses.
std::uint64_t QueueVictims::bucket_of_step(std::int64_t use) {
  std::uint64_t lo = front_, hi = newest_;
  std::int64_t a = bucket(lo).step, b = newest_step_;
  for (int probe = 0; held() > 0; ++probe) {
    if (a == use) return lo;
    if (b == use) return hi;
    if (use < a || use > b || hi - lo < 2) break;
    std::uint64_t mid = lo + (hi - lo) / 2;
    if (probe < 3) {  // exact in integers while the product fits, as it does in practice
      const auto span = hi - lo;
      const auto off = static_cast<std::uint64_t>(use - a);
      mid = span < (std::uint64_t{1} << 31) && off < (std::uint64_t{1} << 32)
                ? lo + off * span / static_cast<std::uint64_t>(b - a)
                : lo + static_cast<std::uint64_t>(static_cast<double>(off) /
                                                  static_cast<double>(b - a) *
                                                  static_cast<double>(span));
    }
    mid = std::clamp(mid, lo + 1, hi - 1);
    const std::int64_t v = bucket(mid).step;
    if (v == use) return mid;
    if (v < use) {
      lo = mid;
      a = v;
    } else {
      hi = mid;
      b = v;
    }
  }
  throw std::logic_error("victim queue: no bucket for step " + std::to_string(use) +
                         " (a last_use changed outside ensure_pages / release_page?)");
}

void QueueVictims::hand_on(SlotId s, std::int64_t use) {
  list(s, bucket_of_step(use));
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

// Takes the oldest bucket apart: its slots still used last in its step become the front run,
// ordered by slot; slots used since go on to the bucket of their last_use; freed ones leave.
// False when no slot is evictable at `step` (every bucket is taken apart, or only this
// step's is left).
bool QueueVictims::next_run(const ResidencyView& st, std::int64_t step) {
  run_.clear();
  run_steps_.clear();
  run_pos_ = 0;
  while (held() > 0) {
    const Bucket k = bucket(front_);
    if (k.step >= step) return false;
    for (SlotId s = k.head; s != kEnd;) {
      const SlotId next = next_[static_cast<std::size_t>(s)];
      const std::int64_t u = st.last_use[s];
      if (u == k.step) {
        run_.push_back(s);
        next_[static_cast<std::size_t>(s)] = kInRun;
      } else if (u == kFreeSlotStep) {
        next_[static_cast<std::size_t>(s)] = kUnlisted;
      } else {
        hand_on(s, u);  // used since: a later bucket
      }
      s = next;
    }
    ++front_;
    if (!run_.empty()) {
      run_step_ = k.step;
      sort_slots();
      return true;
    }
  }
  return false;
}

// The front run by slot index: a rank sort up to kRankSortMax slots (the slots of a small
// step: branch-free, where a comparison sort mispredicts half its branches), beyond that an
// LSD radix sort, 8 bits a pass over the bits slot numbers use (a run is a step's slots,
// thousands for a planner's layer-step).
void QueueVictims::sort_slots() {
  if (run_.size() <= static_cast<std::size_t>(kRankSortMax)) {  // a slot is in one bucket
    rank_sort_distinct(run_.data(), static_cast<int>(run_.size()));
    return;
  }
  sort_scratch_.resize(run_.size());
  for (unsigned shift = 0; shift < 32 && (std::size_t{1} << shift) < next_.size(); shift += 8) {
    std::size_t count[257] = {};
    for (SlotId s : run_)
      ++count[((static_cast<std::uint32_t>(s) >> shift) & 0xff) + 1];
    for (int b = 0; b < 256; ++b)
      count[b + 1] += count[b];
    for (SlotId s : run_)
      sort_scratch_[count[(static_cast<std::uint32_t>(s) >> shift) & 0xff]++] = s;
    run_.swap(sort_scratch_);
  }
}

int QueueVictims::select_any(const ResidencyView& st, std::int64_t step, int m, SlotId* out) {
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
    std::int32_t& next = next_[static_cast<std::size_t>(slot)];
    if (next != kInRun) continue;  // freed and installed again since: listed elsewhere
    const std::int64_t u = st.last_use[slot];
    if (u == run_step) {
      out[found++] = slot;
      next = kUnlisted;
    } else if (u == kFreeSlotStep) {
      next = kUnlisted;
    } else {
      hand_on(slot, u);
    }
  }
  if (found == m) {
    // The caller installs them at `step`: they are listed in its bucket now. A free slot
    // still listed in an older bucket (freed slots leave their bucket when it is taken
    // apart) is handed on from there.
    if (step != newest_step_ || held() == 0) open_bucket(st, step);
    for (int i = 0; i < m; ++i) {
      if (next_[static_cast<std::size_t>(out[i])] == kUnlisted) list(out[i], newest_);
    }
    return m;
  }
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
    next_[static_cast<std::size_t>(out[i])] = kInRun;
    run_.push_back(out[i]);
    run_steps_.push_back(st.last_use[out[i]]);
  }
  return found;
}

void QueueVictims::on_slot_freed(SlotId s) {
  // Its last_use is now kFreeSlotStep: it leaves its bucket when that is taken apart.
  const auto k = static_cast<std::size_t>(s);
  free_[k / 64] |= std::uint64_t{1} << (k % 64);
  free_word_ = std::min(free_word_, k / 64);
}

void QueueVictims::on_flush() {
  std::fill(next_.begin(), next_.end(), kUnlisted);
  front_ = newest_ + 1;
  run_.clear();
  run_steps_.clear();
  run_pos_ = 0;
  free_ = all_free(next_.size());
  free_word_ = 0;
}

}  // namespace kvtier
