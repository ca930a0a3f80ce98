#include <gtest/gtest.h>

#include <vector>

#include "model/ensure.hpp"
#include "model/victims_heap.hpp"
#include "model/victims_scan.hpp"
#include "tests/model/ensure_harness.hpp"

namespace kvtier {
namespace {

using testing::run_ensure;
using testing::state_is_consistent;

TEST(Ensure, HandWorkedSequence) {
  // 16 pages, 6 slots; the steps of `kvtier demo`, checked by hand.
  ResidencyState st(16, 6);
  HeapVictims v(6);
  auto a = run_ensure(st, v, {5, 15, 0, 1, 5, 10, 15}, 0);
  EXPECT_EQ(a.result.hits, 0);
  EXPECT_EQ(a.result.lookups, 7);
  // Misses ascending into free slots ascending.
  EXPECT_EQ(
      a.copies,
      (std::vector<CopyOp>{
          {0, 0, kNoPage}, {1, 1, kNoPage}, {5, 2, kNoPage}, {10, 3, kNoPage}, {15, 4, kNoPage}}));
  // Step 1: hits 0, 5, 10, 15. Misses 2, 11: the free slot 5 first, then the least recently
  // used slot not touched this step: all are stamped step 0, so the lowest, slot 1 (page 1).
  auto b = run_ensure(st, v, {5, 15, 0, 2, 5, 10, 11, 15}, 1);
  EXPECT_EQ(b.result.hits, 4);
  EXPECT_EQ(b.result.evictions, 1);
  EXPECT_EQ(b.copies, (std::vector<CopyOp>{{2, 5, kNoPage}, {11, 1, 1}}));
  // Step 2: page 1 is back. Every slot is stamped step 1; the only one step 2 does not
  // query is slot 1 (page 11), so it is the victim.
  auto c = run_ensure(st, v, {5, 15, 0, 1, 2, 5, 10, 15}, 2);
  EXPECT_EQ(c.result.hits, 5);
  EXPECT_EQ(c.copies, (std::vector<CopyOp>{{1, 1, 11}}));
  EXPECT_TRUE(state_is_consistent(st));
}

TEST(Ensure, DuplicatesAndPaddingCountOnce) {
  ResidencyState st(8, 4);
  ScanVictims v;
  auto r = run_ensure(st, v, {3, kNoPage, 3, 1, 1, kNoPage}, 0);
  EXPECT_EQ(r.result.lookups, 4);
  EXPECT_EQ(r.result.misses, 2);
  EXPECT_EQ(r.copies, (std::vector<CopyOp>{{1, 0, kNoPage}, {3, 1, kNoPage}}));
  auto s = run_ensure(st, v, {3, 3, 1}, 1);
  EXPECT_EQ(s.result.hits, 2);
  EXPECT_EQ(s.result.misses, 0);
}

TEST(Ensure, ChunksOfOneStepNeverEvictEachOther) {
  // 3 slots full of pages 0,1,2 from step 0. Step 1 arrives in two chunks: {3} then {4}.
  ResidencyState st(8, 3);
  HeapVictims v(3);
  run_ensure(st, v, {0, 1, 2}, 0);
  auto c1 = run_ensure(st, v, {3}, 1);
  EXPECT_EQ(c1.copies, (std::vector<CopyOp>{{3, 0, 0}}));
  auto c2 = run_ensure(st, v, {4}, 1);
  // Slot 0 now holds chunk 1's page 3: the next victim is slot 1, not slot 0.
  EXPECT_EQ(c2.copies, (std::vector<CopyOp>{{4, 1, 1}}));
  // A third chunk re-querying page 3 is not a second hit, and evicts nothing of this step.
  auto c3 = run_ensure(st, v, {3, 4, 5}, 1);
  EXPECT_EQ(c3.result.hits, 0);
  EXPECT_EQ(c3.copies, (std::vector<CopyOp>{{5, 2, 2}}));
  // Now every slot is stamped step 1: one more page in step 1 cannot fit.
  auto c4 = run_ensure(st, v, {6}, 1);
  EXPECT_EQ(c4.result.status, EnsureStatus::pool_too_small);
  EXPECT_EQ(c4.result.evictable, 0);
  EXPECT_EQ(st.slot_of(6), kNoSlot);
  EXPECT_TRUE(state_is_consistent(st));
}

TEST(Ensure, PoolTooSmallInstallsNothing) {
  ResidencyState st(10, 2);
  ScanVictims v;
  const ResidencyState before = st;
  auto r = run_ensure(st, v, {1, 2, 3}, 0);
  EXPECT_EQ(r.result.status, EnsureStatus::pool_too_small);
  EXPECT_EQ(r.result.misses, 3);
  EXPECT_EQ(r.result.evictable, 2);
  EXPECT_EQ(st, before);
}

TEST(Ensure, OutOfRangePageChangesNothing) {
  ResidencyState st(10, 4);
  ScanVictims v;
  run_ensure(st, v, {1}, 0);
  const ResidencyState before = st;
  auto r = run_ensure(st, v, {1, 2, 10}, 1);
  EXPECT_EQ(r.result.status, EnsureStatus::page_out_of_range);
  EXPECT_EQ(r.result.bad_index, 2);
  EXPECT_EQ(st, before);
  auto neg = run_ensure(st, v, {-5}, 1);
  EXPECT_EQ(neg.result.status, EnsureStatus::page_out_of_range);
}

TEST(Ensure, ReleaseAndFlush) {
  ResidencyState st(10, 3);
  HeapVictims v(3);
  run_ensure(st, v, {4, 5, 6}, 0);
  EXPECT_TRUE(release_page(st.view(), 5, v));
  EXPECT_FALSE(release_page(st.view(), 5, v));  // already gone
  EXPECT_FALSE(release_page(st.view(), 42, v));
  // The freed slot 1 is taken before any least recently used one.
  auto r = run_ensure(st, v, {7}, 1);
  EXPECT_EQ(r.copies, (std::vector<CopyOp>{{7, 1, kNoPage}}));
  flush_pool(st.view(), v);
  for (PageId p = 0; p < 10; ++p)
    EXPECT_EQ(st.slot_of(p), kNoSlot);
  auto again = run_ensure(st, v, {6, 4}, 2);
  EXPECT_EQ(again.copies, (std::vector<CopyOp>{{4, 0, kNoPage}, {6, 1, kNoPage}}));
  EXPECT_TRUE(state_is_consistent(st));
}

TEST(Admission, HybridInstallsOnlyPagesThatComeBack) {
  ResidencyState st(10, 4);
  HeapVictims v(4);
  std::vector<std::int64_t> seen(10, AdmitOnReuse::kNeverSeen);
  AdmitOnReuse hybrid{seen.data(), {.window = 2}};
  auto a = run_ensure(st, v, {1, 2}, 0, hybrid);
  EXPECT_EQ(a.result.misses, 0);
  EXPECT_EQ(a.result.bypassed, 2);
  EXPECT_EQ(a.bypassed, (std::vector<PageId>{1, 2}));
  auto b = run_ensure(st, v, {1, 3, 1}, 1, hybrid);  // page 1 comes back: installed
  EXPECT_EQ(b.copies, (std::vector<CopyOp>{{1, 0, kNoPage}}));
  EXPECT_EQ(b.bypassed, (std::vector<PageId>{3}));
  auto c = run_ensure(st, v, {2}, 5, hybrid);  // page 2 last seen at step 0: outside window
  EXPECT_EQ(c.result.misses, 0);
  EXPECT_EQ(c.result.bypassed, 1);
  auto d = run_ensure(st, v, {1, 2}, 6, hybrid);  // 1 resident (hit); 2 seen at 5: installed
  EXPECT_EQ(d.result.hits, 1);
  EXPECT_EQ(d.copies, (std::vector<CopyOp>{{2, 1, kNoPage}}));
  for (PageId p = 0; p < 10; ++p)
    EXPECT_EQ(st.slot_of(p) == kPendingSlot, false);
  EXPECT_TRUE(state_is_consistent(st));
}

}  // namespace
}  // namespace kvtier
