#pragma once
#include <climits>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvtier {

// A logical page: one page_size run of a request's tokens in the host bank's page space.
// A physical slot: one page-sized place in the GPU pool. Both are 32-bit; byte offsets
// derived from them are always computed in 64 bits (see page_offset).
using PageId = std::int32_t;
using SlotId = std::int32_t;
using RequestId = std::uint64_t;

// Padding in fixed-width page lists, and "not resident" in slot_of_page.
inline constexpr PageId kNoPage = -1;
inline constexpr SlotId kNoSlot = -1;
// The most pages a page space (or slots a pool) may hold: ids are 32-bit and the id past the
// last is the dummy's.
inline constexpr std::int64_t kMaxPages = std::int64_t{INT32_MAX} - 1;

// The dummy page is the one past the last real page: its bank bytes are zero, and it is
// what a padded or non-resident entry resolves to, so nothing outside the space is read.
constexpr PageId dummy_page(PageId num_pages) {
  return num_pages;
}
// Likewise the pool keeps one zeroed slot past the last real one.
constexpr SlotId dummy_slot(SlotId num_slots) {
  return num_slots;
}

// 64-bit byte offset of a page or slot: page ids reach 2^31 and page strides reach MiBs.
constexpr std::int64_t page_offset(std::int64_t page, std::int64_t page_bytes) {
  return page * page_bytes;
}

// The host-side allocator of logical pages to requests. Pages shared with an earlier
// request's prefix are reference counted and return to the free list when the last request
// holding them closes. Allocation is deterministic: the lowest free page first.
class PageSpace {
 public:
  explicit PageSpace(PageId num_pages);

  PageId num_pages() const { return num_pages_; }
  PageId free_pages() const { return static_cast<PageId>(free_.size()) + (num_pages_ - fresh_); }

  // Opens a request whose first pages are `shared_prefix` (pages of a request that is still
  // open). Throws CapacityError/ConfigError on a duplicate id or an unknown shared page.
  void open(RequestId id, std::span<const PageId> shared_prefix = {});
  // Grows the request's page table to cover `tokens` tokens at `page_size` tokens per page.
  // Throws CapacityError (saying how many pages were needed and how many are free) when the
  // space is exhausted; the request keeps the pages it had.
  void grow(RequestId id, std::int64_t tokens, int page_size);
  // The request's page table: entry i holds tokens [i*page_size, (i+1)*page_size).
  std::span<const PageId> pages(RequestId id) const;
  bool is_open(RequestId id) const { return tables_.count(id) != 0; }
  // Closes the request; returns the pages that became free (their slots must be released).
  std::vector<PageId> close(RequestId id);

 private:
  std::vector<PageId>& table(RequestId id);
  PageId take_lowest_free();

  PageId num_pages_;
  // The free pages: those freed by a close, a min-heap so that the lowest goes first, and
  // [fresh_, num_pages_), never taken. Every freed page was taken before, so it lies below
  // fresh_: the heap's top, when there is one, is the lowest free page. A space of a million
  // pages then starts without a heap of them (its pops were 6 % of a page-stream replay).
  std::vector<PageId> free_;
  PageId fresh_ = 0;
  std::vector<std::int32_t> refs_;
  std::unordered_map<RequestId, std::vector<PageId>> tables_;
};

}  // namespace kvtier
