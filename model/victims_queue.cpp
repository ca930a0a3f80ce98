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

QueueVictims::QueueVictims(SlotId num_slots) : QueueVictims(num_slots, Config{}) {}

QueueVictims::QueueVictims(const ResidencyView& st) : QueueVictims(st, Config{}) {}

QueueVictims::QueueVictims(SlotId num_slots, Config config)
    : renumber_at_(config.renumber_at),
      open_limit_(0),
      slot_(static_cast<std::size_t>(num_slots), Slot{kFree, kUnlisted}),
      ring_(64, Bucket{kEnd, kEnd}),
      free_(all_free(num_slots)) {}

QueueVictims::QueueVictims(const ResidencyView& st, Config config)
    : renumber_at_(config.renumber_at),
      open_limit_(0),
      slot_(static_cast<std::size_t>(st.num_slots), Slot{kFree, kUnlisted}),
      ring_(64, Bucket{kEnd, kEnd}),
      free_(static_cast<std::size_t>(st.num_slots + 63) / 64, 0) {
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

void QueueVictims::open_bucket(std::int64_t step) {
  if (newest_ + 1 >= renumber_at_ || held() + 1 > 2 * slot_.size() + 64) compact();
  if (held() + 1 > ring_.size()) {
    // Twice the room; each live bucket keeps its number, at its place in the larger ring.
    std::vector<Bucket> grown(ring_.size() * 2, Bucket{kEnd, kEnd});
    for (std::uint32_t b = front_; b != newest_ + 1; ++b)
      grown[b & (grown.size() - 1)] = bucket(b);
    ring_.swap(grown);
  }
  open_limit_ = static_cast<std::uint32_t>(std::min(ring_.size(), 2 * slot_.size() + 64));
  if (newest_ < front_) front_ = newest_ + 1;  // no bucket held: the new one is the oldest
  ++newest_;
  bucket(newest_) = Bucket{kEnd, kEnd};
  newest_step_ = step;
}

// Lists every listed slot in its newest bucket, drops the buckets left empty and numbers the
// rest again from 2 on (the front run's bucket becomes 1). Buckets then number at most one
// per slot, plus the newest: O(slots) every O(slots) steps.
void QueueVictims::compact() {
  const std::uint32_t held_before = held();
  std::vector<std::uint32_t> number(held_before, 0);
  for (const Slot& x : slot_) {
    if (x.bucket != kFree && x.bucket >= front_) number[x.bucket - front_] = 1;
  }
  if (held_before > 0) number[held_before - 1] = 1;  // the newest stays: it is this step's
  std::uint32_t n = 1;
  for (std::uint32_t& v : number)
    v = v != 0 ? ++n : 0;
  const std::uint32_t old_front = front_;
  std::fill(ring_.begin(), ring_.end(), Bucket{kEnd, kEnd});
  front_ = 2;
  newest_ = n;  // n == 1 (nothing held): front_ > newest_
  for (std::size_t i = 0; i < slot_.size(); ++i) {
    Slot& x = slot_[i];
    const bool listed = x.next != kUnlisted && x.next != kInRun;
    if (x.bucket == kFree) {
      if (listed) x.next = kUnlisted;
      continue;
    }
    x.bucket = x.bucket < old_front ? 1 : number[x.bucket - old_front];
    if (listed) list(static_cast<SlotId>(i), x.bucket);
  }
  for (RunEntry& e : run_)
    e.bucket = 1;
}

void QueueVictims::list(SlotId s, std::uint32_t b) {
  Bucket& k = bucket(b);
  slot_[static_cast<std::size_t>(s)].next = kEnd;
  if (k.tail == kEnd) {
    k.head = s;
  } else {
    slot_[static_cast<std::size_t>(k.tail)].next = s;
  }
  k.tail = s;
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

// Takes the oldest bucket apart: slots used last in its step become the front run, ordered
// by slot; slots used since go on to their newest bucket; freed ones leave. False when no
// slot is evictable at `step` (every bucket is taken apart, or only this step's is left).
// A hint for replays that evict a slot at almost every step (a stream of single lookups):
// the slot listed first in the bucket kAhead steps on is fetched now, so that taking it
// apart later does not wait on memory.
void QueueVictims::prefetch_ahead(const ResidencyView& st) {
  constexpr std::uint32_t kAhead = 8;
  if (newest_ < front_ + kAhead) return;
  const SlotId s = bucket(front_ + kAhead).head;
  if (s == kEnd) return;
  __builtin_prefetch(&slot_[static_cast<std::size_t>(s)]);
  __builtin_prefetch(&st.page_of_slot[s]);
  __builtin_prefetch(&st.last_use[s]);
}

bool QueueVictims::next_run(std::int64_t step) {
  run_.clear();
  run_pos_ = 0;
  while (front_ <= newest_) {
    if (front_ == newest_ && newest_step_ >= step) return false;
    const Bucket k = bucket(front_);
    for (SlotId s = k.head; s != kEnd;) {
      Slot& x = slot_[static_cast<std::size_t>(s)];
      const SlotId next = x.next;
      if (x.bucket == front_) {
        run_.push_back({s, front_});
        x.next = kInRun;
      } else if (x.bucket == kFree) {
        x.next = kUnlisted;
      } else {
        list(s, x.bucket);  // a later bucket: buckets only grow towards newest_
      }
      s = next;
    }
    ++front_;
    if (!run_.empty()) {
      if (run_.size() > 1) {
        std::sort(run_.begin(), run_.end(),
                  [](const RunEntry& a, const RunEntry& b) { return a.slot < b.slot; });
      }
      return true;
    }
  }
  return false;
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
    if (run_pos_ == run_.size()) {
      if (!next_run(step)) break;
      prefetch_ahead(st);
    }
    const RunEntry e = run_[run_pos_++];
    Slot& x = slot_[static_cast<std::size_t>(e.slot)];
    if (x.bucket == e.bucket) {  // still used last in the run's step: a victim
      out[found++] = e.slot;
      x.next = kUnlisted;  // the install lists it again
    } else if (x.bucket == kFree) {
      x.next = kUnlisted;
    } else {
      list(e.slot, x.bucket);  // used since the run was formed
    }
  }
  if (found == m) return found;
  // Too few: every evictable slot was taken. They go back: the free ones to the bit set,
  // the others (already in victim order) become the front run again.
  for (int i = 0; i < free_found; ++i) {
    const auto k = static_cast<std::size_t>(out[i]);
    free_[k / 64] |= std::uint64_t{1} << (k % 64);
    free_word_ = std::min(free_word_, k / 64);
  }
  run_.clear();
  run_pos_ = 0;
  for (int i = free_found; i < found; ++i) {
    Slot& x = slot_[static_cast<std::size_t>(out[i])];
    x.next = kInRun;
    run_.push_back({out[i], x.bucket});
  }
  return found;
}

void QueueVictims::on_slot_freed(SlotId s) {
  const auto k = static_cast<std::size_t>(s);
  slot_[k].bucket = kFree;  // it leaves its bucket (or the run) when eviction reaches it
  free_[k / 64] |= std::uint64_t{1} << (k % 64);
  free_word_ = std::min(free_word_, k / 64);
}

void QueueVictims::on_flush() {
  std::fill(slot_.begin(), slot_.end(), Slot{kFree, kUnlisted});
  front_ = newest_ + 1;
  run_.clear();
  run_pos_ = 0;
  free_ = all_free(static_cast<SlotId>(slot_.size()));
  free_word_ = 0;
}

}  // namespace kvtier
