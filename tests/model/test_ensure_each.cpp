// ensure_each (a page-reference stream, one request a step) against what it stands for: the
// same entries through ensure_pages one at a time. Every finder, pools on both sides of the
// hint threshold, streams with padding, releases and multi-page steps between the chunks, and
// the early stops; plus the naive reference LRU's hit and miss counts on one stream.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "model/ensure_each.hpp"
#include "model/victims_fifo.hpp"
#include "model/victims_heap.hpp"
#include "model/victims_scan.hpp"
#include "tests/model/ensure_harness.hpp"
#include "tests/model/reference_lru.hpp"

namespace kvtier {
namespace {

template <class V>
V new_finder(SlotId slots) {
  if constexpr (std::is_same_v<V, ScanVictims>) {
    return V{};
  } else {
    return V(slots);
  }
}

// Pages drawn from a hot set (so that hits happen) or the whole space, with padding.
std::vector<PageId> draw_stream(std::mt19937_64& rng, PageId pages, std::size_t n) {
  std::uniform_int_distribution<PageId> any(0, pages - 1);
  std::uniform_int_distribution<PageId> hot(0, std::max<PageId>(pages / 16, 1) - 1);
  std::uniform_int_distribution<int> kind(0, 99);
  std::vector<PageId> s(n);
  for (PageId& p : s) {
    const int k = kind(rng);
    p = k < 3 ? kNoPage : k < 50 ? hot(rng) : any(rng);
  }
  return s;
}

// The same stream through ensure_pages, one entry a step, copies appended.
template <class V>
EnsureEachResult one_by_one(ResidencyState& st, V& finder, const std::vector<PageId>& s,
                            std::int64_t first_step, std::vector<CopyOp>& copies) {
  EnsureEachResult r;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto out = testing::run_ensure(st, finder, {s[i]}, first_step + std::int64_t(i));
    if (out.result.status != EnsureStatus::ok) {
      r.status = out.result.status;
      r.done = std::int64_t(i);
      return r;
    }
    r.lookups += out.result.lookups;
    r.hits += out.result.hits;
    r.misses += out.result.misses;
    r.evictions += out.result.evictions;
    copies.insert(copies.end(), out.copies.begin(), out.copies.end());
  }
  r.done = std::int64_t(s.size());
  return r;
}

void expect_same(const EnsureEachResult& a, const EnsureEachResult& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.lookups, b.lookups);
  EXPECT_EQ(a.hits, b.hits);
  EXPECT_EQ(a.misses, b.misses);
  EXPECT_EQ(a.evictions, b.evictions);
  EXPECT_EQ(a.done, b.done);
}

template <class V>
class EnsureEach : public ::testing::Test {};
using Finders = ::testing::Types<ScanVictims, HeapVictims, FifoVictims>;
TYPED_TEST_SUITE(EnsureEach, Finders);

// Chunks of a stream, with a multi-page step and a release between them: the finder left by
// ensure_each must serve ensure_pages and release_page exactly as its own calls would. The
// reference is ensure_pages one entry at a time with the heap finder.
TYPED_TEST(EnsureEach, DecidesAsOneEnsurePerEntry) {
  struct Shape {
    PageId pages;
    SlotId slots;
    std::size_t per_chunk;
  };
  // Tiny pools (a miss at almost every step), a pool that fills only late, and one past the
  // hint threshold (2^15 slots) so that the hinted loop decides too.
  const Shape shapes[] = {{16, 1, 200}, {64, 5, 500}, {4096, 600, 3000}, {1 << 17, 40000, 60000}};
  std::mt19937_64 rng(20261204);
  for (const Shape& sh : shapes) {
    if (std::is_same_v<TypeParam, ScanVictims> && sh.slots > 1000) continue;  // O(slots) a miss
    SCOPED_TRACE(::testing::Message() << sh.pages << " pages, " << sh.slots << " slots");
    ResidencyState a(sh.pages, sh.slots), b(sh.pages, sh.slots);
    // The reference runs the heap finder, which shares no code with the FIFO's cursor.
    TypeParam fa = new_finder<TypeParam>(sh.slots);
    HeapVictims fb(sh.slots);
    std::int64_t step = 0;
    for (int chunk = 0; chunk < 4; ++chunk) {
      const std::vector<PageId> s = draw_stream(rng, sh.pages, sh.per_chunk);
      std::vector<CopyOp> ca(s.size()), cb;
      EnsureEachResult ra =
          ensure_each(a.view(), s.data(), std::int64_t(s.size()), step, fa, ca.data());
      const EnsureEachResult rb = one_by_one(b, fb, s, step, cb);
      expect_same(ra, rb);
      ca.resize(std::size_t(ra.misses));
      ASSERT_EQ(ca, cb);
      ASSERT_EQ(a, b);
      ASSERT_TRUE(testing::state_is_consistent(a));
      step += std::int64_t(s.size());
      // A step of many pages, then a release, through the ordinary calls on both.
      const std::vector<PageId> wide = draw_stream(rng, sh.pages, std::size_t(sh.slots));
      const auto wa = testing::run_ensure(a, fa, wide, step);
      const auto wb = testing::run_ensure(b, fb, wide, step);
      ASSERT_EQ(wa.copies, wb.copies);
      ++step;
      const PageId gone = wide.front() == kNoPage ? 0 : wide.front();
      EXPECT_EQ(release_page(a.view(), gone, fa), release_page(b.view(), gone, fb));
      ASSERT_EQ(a, b);
    }
  }
}

TYPED_TEST(EnsureEach, NullCopiesDecideAlike) {
  std::mt19937_64 rng(7);
  const std::vector<PageId> s = draw_stream(rng, 512, 5000);
  ResidencyState a(512, 40), b(512, 40);
  TypeParam fa = new_finder<TypeParam>(40), fb = new_finder<TypeParam>(40);
  std::vector<CopyOp> copies(s.size());
  expect_same(ensure_each(a.view(), s.data(), std::int64_t(s.size()), 0, fa, nullptr),
              ensure_each(b.view(), s.data(), std::int64_t(s.size()), 0, fb, copies.data()));
  EXPECT_EQ(a, b);
}

// A stream that goes on with the step of the call before: a page that step used already is a
// lookup but no hit, as in ensure_pages; the stream's later steps are new.
TYPED_TEST(EnsureEach, GoesOnWithTheStepBefore) {
  ResidencyState a(32, 4), b(32, 4);
  TypeParam fa = new_finder<TypeParam>(4);
  HeapVictims fb(4);
  testing::run_ensure(a, fa, {1, 2}, 5);
  testing::run_ensure(b, fb, {1, 2}, 5);
  // Hits: 1 and 2 of the first stream (its 1 at step 5 is none); none in the second (its 2 at
  // step 8 is none; 3, 1 and 2 are evicted before 1 comes again).
  const std::pair<std::vector<PageId>, int> streams[] = {{{1, 3, 1, 2}, 2}, {{2, 9, 10, 11, 1}, 0}};
  for (const auto& [s, hits] : streams) {
    const std::int64_t first = a.last_use(a.slot_of(s.front()));  // that page's step
    std::vector<CopyOp> cb;
    const EnsureEachResult ra =
        ensure_each(a.view(), s.data(), std::int64_t(s.size()), first, fa, nullptr);
    expect_same(ra, one_by_one(b, fb, s, first, cb));
    EXPECT_EQ(ra.hits, hits);
    EXPECT_EQ(a, b);
  }
}

// An entry out of range stops the stream there, the entries before it applied.
TYPED_TEST(EnsureEach, StopsAtAPageOutOfRange) {
  for (const PageId bad : {PageId{100}, PageId{-2}}) {
    std::vector<PageId> s = {3, 9, kNoPage, 3, 50, bad, 4};
    ResidencyState a(100, 2), b(100, 2);
    TypeParam fa = new_finder<TypeParam>(2), fb = new_finder<TypeParam>(2);
    const EnsureEachResult r =
        ensure_each(a.view(), s.data(), std::int64_t(s.size()), 10, fa, nullptr);
    EXPECT_EQ(r.status, EnsureStatus::page_out_of_range);
    EXPECT_EQ(r.done, 5);
    EXPECT_EQ(r.lookups, 4);
    EXPECT_EQ(r.hits, 1);
    EXPECT_EQ(r.misses, 3);
    EXPECT_EQ(r.evictions, 1);
    std::vector<CopyOp> cb;
    one_by_one(b, fb, {3, 9, kNoPage, 3, 50}, 10, cb);
    EXPECT_EQ(a, b);
  }
}

// A pool of no slots: the first real lookup finds no victim; padding before it is no lookup.
TYPED_TEST(EnsureEach, StopsWhereNoSlotCanBeTaken) {
  const std::vector<PageId> s = {kNoPage, kNoPage, 5, 6};
  ResidencyState st(8, 0);
  TypeParam f = new_finder<TypeParam>(0);
  const EnsureEachResult r = ensure_each(st.view(), s.data(), 4, 0, f, nullptr);
  EXPECT_EQ(r.status, EnsureStatus::pool_too_small);
  EXPECT_EQ(r.done, 2);
  EXPECT_EQ(r.lookups, 1);
  EXPECT_EQ(r.misses, 0);
  EXPECT_EQ(st.slot_of(5), kNoSlot);
}

// The naive list-and-map LRU, which shares no code with the core, counts the same hits and
// misses on a stream of 100,000 requests (the golden figures of the stream: seed 16).
TEST(EnsureEachGolden, MatchesTheNaiveLru) {
  std::mt19937_64 rng(16);
  const std::vector<PageId> s = draw_stream(rng, 2048, 100000);
  ResidencyState st(2048, 300);
  FifoVictims f(300);
  const EnsureEachResult r =
      ensure_each(st.view(), s.data(), std::int64_t(s.size()), 0, f, nullptr);
  testing::ReferenceLru ref(2048, 300);
  std::int64_t hits = 0, misses = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto step = ref.ensure({s[i]}, std::int64_t(i));
    hits += step.hits;
    misses += step.misses;
  }
  EXPECT_EQ(r.hits, hits);
  EXPECT_EQ(r.misses, misses);
  EXPECT_EQ(r.lookups, hits + misses);
  EXPECT_GT(hits, 10000);  // the stream exercises both branches
  EXPECT_GT(misses, 10000);
}

}  // namespace
}  // namespace kvtier
