// The contract every victim finder must keep, run over each of them (typed tests), plus a
// randomized stress that drives the FIFO finder and the scan side by side through the same steps.
#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <random>
#include <vector>

#include "model/victims_fifo.hpp"
#include "model/victims_heap.hpp"
#include "model/victims_scan.hpp"
#include "tests/model/ensure_harness.hpp"

namespace kvtier {
namespace {

// A finder over `st` as it stands (the FIFO finder adopts it; the others read it lazily).
template <class V>
std::unique_ptr<V> make_finder(ResidencyState& st);
template <>
std::unique_ptr<ScanVictims> make_finder<ScanVictims>(ResidencyState&) {
  return std::make_unique<ScanVictims>();
}
template <>
std::unique_ptr<HeapVictims> make_finder<HeapVictims>(ResidencyState& st) {
  return std::make_unique<HeapVictims>(st.num_slots());
}
template <>
std::unique_ptr<FifoVictims> make_finder<FifoVictims>(ResidencyState& st) {
  return std::make_unique<FifoVictims>(st.view());
}

template <class V>
class VictimContract : public ::testing::Test {};
using Finders = ::testing::Types<ScanVictims, HeapVictims, FifoVictims>;
TYPED_TEST_SUITE(VictimContract, Finders);

// Stamps slots directly, as ensure would have left them.
ResidencyState stamped(const std::vector<std::int64_t>& uses) {
  const SlotId n = static_cast<SlotId>(uses.size());
  ResidencyState st(n, n);
  auto v = st.view();
  for (SlotId s = 0; s < n; ++s) {
    if (uses[s] == kFreeSlotStep) continue;
    v.slot_of_page[s] = s;
    v.page_of_slot[s] = s;
    v.last_use[s] = uses[s];
  }
  return st;
}

TYPED_TEST(VictimContract, FreeFirstThenOldestThenLowestSlot) {
  ResidencyState st = stamped({4, kFreeSlotStep, 2, 2, 7, kFreeSlotStep, 3});
  auto v = make_finder<TypeParam>(st);
  std::vector<SlotId> out(7);
  const int n = v->select(st.view(), 8, 5, out.data());
  ASSERT_EQ(n, 5);
  out.resize(5);
  EXPECT_EQ(out, (std::vector<SlotId>{1, 5, 2, 3, 6}));
}

TYPED_TEST(VictimContract, NeverPicksSlotsOfTheCurrentStep) {
  ResidencyState st = stamped({5, 5, 4, 5});
  auto v = make_finder<TypeParam>(st);
  std::vector<SlotId> out(4);
  EXPECT_EQ(v->select(st.view(), 5, 3, out.data()), 1);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(v->select(st.view(), 5, 0, out.data()), 0);
}

TYPED_TEST(VictimContract, SameChoicesAsTheOtherFinderUnderRandomTraffic) {
  // Drive this finder and the scan reference through identical ensure sequences.
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    const PageId pages = 64;
    const SlotId slots = static_cast<SlotId>(4 + rng() % 20);
    ResidencyState a(pages, slots), b(pages, slots);
    auto fa = make_finder<TypeParam>(a);
    ScanVictims fb;
    for (std::int64_t step = 0; step < 300; ++step) {
      const int op = static_cast<int>(rng() % 20);
      if (op == 0) {
        flush_pool(a.view(), *fa);
        flush_pool(b.view(), fb);
        continue;
      }
      if (op == 1) {
        const PageId p = static_cast<PageId>(rng() % pages);
        EXPECT_EQ(release_page(a.view(), p, *fa), release_page(b.view(), p, fb));
      }
      std::vector<PageId> q(1 + rng() % slots);
      for (auto& p : q)
        p = static_cast<PageId>(rng() % (rng() % 2 ? 12 : pages));
      auto ra = testing::run_ensure(a, *fa, q, step);
      auto rb = testing::run_ensure(b, fb, q, step);
      ASSERT_EQ(ra.copies, rb.copies) << "seed " << seed << " step " << step;
      ASSERT_EQ(ra.result.hits, rb.result.hits);
      ASSERT_EQ(a, b);
      ASSERT_TRUE(testing::state_is_consistent(a));
    }
  }
}

// A select that finds too few victims changes nothing: the same select again (and then a
// smaller one) gives what it would have given first.
TYPED_TEST(VictimContract, ShortSelectChangesNothing) {
  ResidencyState st = stamped({3, kFreeSlotStep, 1, 6, 1, 6});
  auto v = make_finder<TypeParam>(st);
  std::vector<SlotId> out(6);
  EXPECT_EQ(v->select(st.view(), 6, 6, out.data()), 4);
  EXPECT_EQ(v->select(st.view(), 6, 6, out.data()), 4);
  ASSERT_EQ(v->select(st.view(), 6, 4, out.data()), 4);
  out.resize(4);
  EXPECT_EQ(out, (std::vector<SlotId>{1, 2, 4, 0}));
}

// Long runs of ensures, releases and flushes: the FIFO finder takes its front apart many times,
// drop stale entries, compact, and decide like the scan at every step; pools larger than the page
// space never evict, so only compaction bounds them; steps of up to 150 pages make front runs long
// enough for the radix sort. Releases fall between chunks of one step too, so a slot can be used,
// freed and installed again within a step.
TEST(FifoVictims, AgreesWithTheScanAndStaysBoundedOverLongRuns) {
  for (std::uint32_t seed : {11u, 12u, 13u, 14u, 15u}) {
    std::mt19937 rng(seed);
    const PageId pages = 400;
    const SlotId slots =
        seed == 14 ? 500 : (seed == 15 ? 300 : static_cast<SlotId>(40 + rng() % 200));
    ResidencyState a(pages, slots), b(pages, slots);
    FifoVictims fa(slots);
    ScanVictims fb;
    const std::uint64_t bound = std::bit_ceil(2u * static_cast<std::uint64_t>(slots) + 64u);
    for (std::int64_t step = 0; step < 20000; ++step) {
      const int op = static_cast<int>(rng() % 400);
      if (op == 0) {
        flush_pool(a.view(), fa);
        flush_pool(b.view(), fb);
      }
      const int chunks = op % 3 == 0 ? 2 : 1;
      for (int c = 0; c < chunks; ++c) {
        if (op < 40 || c > 0) {
          const PageId p = static_cast<PageId>(rng() % (c > 0 ? pages / 3 : pages));
          ASSERT_EQ(release_page(a.view(), p, fa), release_page(b.view(), p, fb));
        }
        std::vector<PageId> q(1 + rng() % (seed == 15 ? 150 : 20));
        for (auto& p : q)
          p = static_cast<PageId>(rng() % (rng() % 4 ? pages / 3 : pages));
        const auto ra = testing::run_ensure(a, fa, q, step);
        const auto rb = testing::run_ensure(b, fb, q, step);
        ASSERT_EQ(ra.result.status, rb.result.status) << "seed " << seed << " step " << step;
        ASSERT_EQ(ra.copies, rb.copies) << "seed " << seed << " step " << step;
        ASSERT_EQ(a, b);
        ASSERT_LE(fa.entries(), bound);
      }
    }
  }
}

// The FIFO finder and the scan driven through the same ensures (and releases), every copy and
// the whole state compared after each.
struct Lockstep {
  ResidencyState a, b;
  FifoVictims fa;
  ScanVictims fb;
  Lockstep(PageId pages, SlotId slots) : a(pages, slots), b(pages, slots), fa(slots) {}
  void ensure(const std::vector<PageId>& q, std::int64_t step) {
    const auto ra = testing::run_ensure(a, fa, q, step);
    const auto rb = testing::run_ensure(b, fb, q, step);
    ASSERT_EQ(ra.copies, rb.copies) << "step " << step;
    ASSERT_EQ(a, b) << "step " << step;
  }
  void release(PageId p) {
    ASSERT_TRUE(release_page(a.view(), p, fa));
    ASSERT_TRUE(release_page(b.view(), p, fb));
  }
};

// A slot used, released and installed again within one step is listed twice at that step in
// the FIFO: a later step must evict it once, in slot order among the step's other slots.
TEST(FifoVictims, ReleaseAndInstallAgainWithinAStep) {
  Lockstep ls(16, 4);
  ls.ensure({0, 1, 2, 3}, 0);  // page p in slot p
  ls.ensure({1, 2}, 1);
  ls.release(1);
  ls.ensure({5}, 1);        // into slot 1 again, at step 1
  ls.ensure({6, 7, 8}, 2);  // slots 0 and 3 (step 0), then 1 (step 1, listed twice)
  ls.ensure({9, 10}, 3);    // slot 2 (step 1's other), then slot 0 (step 2)
}

// A step whose uses fill the FIFO makes it compact in the middle of the step, between hits and
// installs: the step's slots (hit and installed) must still form one run, in slot order, when
// a later step evicts them all.
TEST(FifoVictims, CompactionAtAStepWithHitsAndInstalls) {
  const SlotId slots = 8;
  Lockstep ls(24, slots);
  ls.ensure({0, 1, 2, 3, 4, 5, 6, 7}, 0);  // page p in slot p
  // Hits only: no eviction, so the entries pile up until the next step's 8 uses overflow the
  // ring at its largest (2 x 8 + 64, rounded up to a power of two: 128).
  const std::uint64_t largest = std::bit_ceil(2u * static_cast<std::uint64_t>(slots) + 64u);
  std::int64_t step = 1;
  for (; step < 150 && ls.fa.entries() + 8 <= largest; ++step)
    ls.ensure({2, 3, 4, 5, 6, 7}, step);
  ASSERT_LT(step, 150);
  const std::uint64_t before = ls.fa.entries();
  ls.ensure({8, 9, 2, 3, 4, 5, 6, 7}, step++);  // compacts within the step; 8, 9 to slots 0, 1
  ASSERT_LT(ls.fa.entries(), before + 8);       // it did compact
  ls.ensure({10, 11, 12, 13, 14, 15, 16, 17}, step);  // evicts slots 0..7, all of the last step
}

TEST(HeapVictims, HeapStaysBoundedUnderManyReleases) {
  const SlotId slots = 16;
  ResidencyState st(1000, slots);
  HeapVictims v(slots);
  std::mt19937 rng(9);
  for (std::int64_t step = 0; step < 5000; ++step) {
    std::vector<PageId> q = {static_cast<PageId>(rng() % 1000), static_cast<PageId>(rng() % 1000)};
    testing::run_ensure(st, v, q, step);
    release_page(st.view(), q[0], v);
    ASSERT_LE(v.heap_size(), 2u * slots + 64 + 1);
  }
}

}  // namespace
}  // namespace kvtier
