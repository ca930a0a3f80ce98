#pragma once
#include <cstdint>
#include <queue>
#include <vector>

#include "model/page_space.hpp"

namespace kvtier::sim {

// Exact LRU stack distances in one pass (Mattson), for every pool size at once.
//
// A released page leaves a hole at its place in the stack: a free slot, used before any
// eviction (as the core does), so the next reference that would push pages down past the
// hole fills it instead.
//
// Every entry (page or hole) holds a mark at the time it was last placed; a depth is the
// number of marks after a page's time. Marks are counted in three levels -- a bit per time, a
// byte per 64 times, a Fenwick tree over blocks of 4096 -- so a count touches a few cache
// lines instead of a tree walk over every time. Times are renumbered when they run out, so
// memory is O(pages + distinct live entries), not O(trace length).
class StackDistance {
 public:
  explicit StackDistance(PageId num_pages);
  // References `p`; returns its depth before the reference (1 = most recent), 0 when the
  // page is not in the stack (first reference, or referenced again after a release).
  std::int64_t reference(PageId p);
  // The page's request ended: its place becomes a hole.
  void release(PageId p);
  std::int64_t live() const { return live_; }
  // Bytes held now: O(pages + live entries), independent of the trace length.
  std::int64_t memory_bytes() const;

 private:
  static constexpr std::int64_t kBlock = 4096;  // times per Fenwick leaf (64 words)

  void resize(std::int64_t cap);
  void mark(std::int64_t t);
  void unmark(std::int64_t t);
  std::int64_t marks_upto(std::int64_t t) const;  // marks in [0, t]
  void renumber();

  std::vector<std::int32_t> last_;           // [pages] time of the page's entry, or -1
  std::vector<std::uint64_t> bits_;          // [cap / 64] a mark per time
  std::vector<std::uint8_t> word_marks_;     // [cap / 64] marks per 64 times
  std::vector<std::int32_t> block_fen_;      // Fenwick tree over [cap / kBlock] blocks, 1-based
  std::vector<std::int32_t> owner_;          // renumber scratch: [cap] page or hole at a time
  std::priority_queue<std::int64_t> holes_;  // times of holes, topmost (latest) first
  std::int64_t cap_ = 0;
  std::int64_t t_ = 0;
  std::int64_t live_ = 0;  // entries (pages and holes) in the stack
};

}  // namespace kvtier::sim
