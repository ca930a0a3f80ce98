// RapidCheck properties: the core's ensure against the naive ReferenceLru, over random
// sequences of steps, chunked steps, releases and flushes, with invariants after each call.
// A failure prints RC_PARAMS="reproduce=..." that replays it exactly.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "model/compaction.hpp"
#include "model/victims_fifo.hpp"
#include "model/victims_heap.hpp"
#include "model/victims_scan.hpp"
#include "tests/model/ensure_harness.hpp"
#include "tests/model/reference_lru.hpp"

namespace kvtier {
namespace {

enum class OpKind { step, chunked_step, release, flush };

struct Op {
  OpKind kind;
  std::vector<std::vector<PageId>> rows;  // step: the rows' page lists (write pages first)
  PageId page = 0;                        // release
};

// A step's rows: 1-8 rows, each 0-12 pages drawn from a hot range or the whole space, with
// repetition inside and across rows.
rc::Gen<std::vector<std::vector<PageId>>> gen_rows(PageId pages) {
  const PageId hot = std::max<PageId>(1, pages / 4);
  return rc::gen::container<std::vector<std::vector<PageId>>>(
      static_cast<std::size_t>(*rc::gen::inRange(1, 9)),
      rc::gen::container<std::vector<PageId>>(
          static_cast<std::size_t>(*rc::gen::inRange(0, 13)),
          rc::gen::oneOf(rc::gen::inRange<PageId>(0, hot), rc::gen::inRange<PageId>(0, pages),
                         rc::gen::just(kNoPage))));
}

std::vector<PageId> flatten(const std::vector<std::vector<PageId>>& rows) {
  std::vector<PageId> q;
  for (const auto& r : rows)
    q.insert(q.end(), r.begin(), r.end());
  return q;
}

std::size_t distinct_pages(const std::vector<PageId>& q) {
  std::set<PageId> s;
  for (PageId p : q) {
    if (p != kNoPage) s.insert(p);
  }
  return s.size();
}

template <class Finder>
void check_against_reference(Finder make_finder) {
  const PageId pages = *rc::gen::inRange<PageId>(1, 200);
  const int nops = *rc::gen::inRange(1, 60);
  std::vector<Op> ops;
  std::size_t widest = 1;
  for (int i = 0; i < nops; ++i) {
    const int k = *rc::gen::inRange(0, 20);
    Op op;
    if (k == 0) {
      op.kind = OpKind::flush;
    } else if (k <= 2) {
      op.kind = OpKind::release;
      op.page = *rc::gen::inRange<PageId>(0, pages);
    } else {
      op.kind = k <= 6 ? OpKind::chunked_step : OpKind::step;
      op.rows = *gen_rows(pages);
      widest = std::max(widest, distinct_pages(flatten(op.rows)));
    }
    ops.push_back(std::move(op));
  }
  // From "barely fits the widest step" to "everything fits" -- and sometimes one short, so
  // the too-small path is exercised too.
  const SlotId slots = *rc::gen::inRange<SlotId>(
      std::max<SlotId>(1, static_cast<SlotId>(widest) - 1), std::max<SlotId>(2, pages + 2));
  ResidencyState st(pages, slots);
  auto finder = make_finder(slots);
  testing::ReferenceLru ref(pages, slots);

  std::int64_t step = 0;
  for (const Op& op : ops) {
    if (op.kind == OpKind::flush) {
      flush_pool(st.view(), finder);
      ref.flush();
    } else if (op.kind == OpKind::release) {
      release_page(st.view(), op.page, finder);
      ref.release(op.page);
    } else {
      // A chunked step ensures its rows one call at a time, all with the same step.
      std::vector<std::vector<PageId>> calls;
      if (op.kind == OpKind::chunked_step) {
        calls = op.rows;
      } else {
        calls.push_back(flatten(op.rows));
      }
      std::set<PageId> queried;
      for (const auto& q : calls) {
        const auto got = testing::run_ensure(st, finder, q, step);
        const auto want = ref.ensure(q, step);
        RC_ASSERT((got.result.status == EnsureStatus::pool_too_small) == want.too_small);
        if (want.too_small) break;  // the step cannot proceed; both left untouched maps
        RC_ASSERT(got.result.hits == want.hits);
        RC_ASSERT(got.result.misses == want.misses);
        RC_ASSERT(got.copies == want.copies);
        // Capacity is never exceeded and nothing queried in this step was evicted.
        for (PageId p : q) {
          if (p != kNoPage) queried.insert(p);
        }
        for (PageId p : queried)
          RC_ASSERT(st.slot_of(p) >= 0);
        RC_ASSERT(testing::state_is_consistent(st));
        for (PageId p = 0; p < pages; ++p)
          RC_ASSERT(st.slot_of(p) == ref.slot_of(p));
      }
      ++step;
    }
    RC_ASSERT(testing::state_is_consistent(st));
  }
}

RC_GTEST_PROP(EnsureProperties, HeapFinderMatchesReferenceLru, ()) {
  check_against_reference([](SlotId slots) { return HeapVictims(slots); });
}

RC_GTEST_PROP(EnsureProperties, FifoFinderMatchesReferenceLru, ()) {
  check_against_reference([](SlotId slots) { return FifoVictims(slots); });
}

RC_GTEST_PROP(EnsureProperties, ScanFinderMatchesReferenceLru, ()) {
  check_against_reference([](SlotId) { return ScanVictims{}; });
}

// Chunks of one step: every distinct page is counted once (hit or miss) either way; a chunk
// may evict a page a later chunk wants (only earlier chunks are protected), so chunking can
// only add misses; with enough free slots for every miss it decides exactly alike.
RC_GTEST_PROP(EnsureProperties, ChunkedStepAgainstOneShot, ()) {
  const PageId pages = *rc::gen::inRange<PageId>(1, 120);
  const SlotId slots = *rc::gen::inRange<SlotId>(1, 130);
  ResidencyState a(pages, slots), b(pages, slots);
  HeapVictims fa(slots), fb(slots);
  const int steps = *rc::gen::inRange(1, 25);
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto rows = *gen_rows(pages);
    const auto all = flatten(rows);
    const std::size_t distinct = distinct_pages(all);
    if (distinct > static_cast<std::size_t>(slots)) continue;
    SlotId free_slots = 0;
    for (SlotId s = 0; s < slots; ++s)
      free_slots += b.page_in(s) == kNoPage;
    const auto one = testing::run_ensure(a, fa, all, step);
    RC_ASSERT(one.result.status == EnsureStatus::ok);
    int hits = 0, misses = 0;
    for (const auto& r : rows) {
      const auto part = testing::run_ensure(b, fb, r, step);
      RC_ASSERT(part.result.status == EnsureStatus::ok);
      hits += part.result.hits;
      misses += part.result.misses;
    }
    RC_ASSERT(static_cast<std::size_t>(hits + misses) == distinct);
    RC_ASSERT(static_cast<std::size_t>(one.result.hits + one.result.misses) == distinct);
    RC_ASSERT(misses >= one.result.misses);
    // (Parenthesised: RC_ASSERT decomposes its operands, which would defeat ||.)
    for (PageId p : all)
      RC_ASSERT((p == kNoPage || b.slot_of(p) >= 0));
    if (free_slots >= one.result.misses) {
      RC_ASSERT(misses == one.result.misses);
    }
    // Keep the two states comparable for the next step.
    b = a;
    fb = fa;
  }
}

// The drop counter equals the true number of distinct pages beyond the width, and the kept
// pages are the lowest ones in order.
RC_GTEST_PROP(CompactionProperties, DropCounterIsExact, ()) {
  const int ratio = *rc::gen::element(1, 2, 4, 8);
  const int page_size = ratio * *rc::gen::inRange(1, 9);
  const int table_len = *rc::gen::inRange(1, 40);
  const std::int64_t context = std::int64_t{table_len} * page_size;
  const std::int64_t pos = *rc::gen::inRange<std::int64_t>(0, context);
  // Only complete groups before the row are visible to it.
  const auto visible = static_cast<std::int32_t>((pos + 1) / ratio);
  std::set<std::int32_t> chosen;
  const int nblocks = visible > 0 ? *rc::gen::inRange(0, 60) : 0;
  for (int i = 0; i < nblocks; ++i)
    chosen.insert(*rc::gen::inRange<std::int32_t>(0, visible));
  std::vector<std::int32_t> blocks(chosen.begin(), chosen.end());
  std::vector<PageId> table(table_len);
  for (int i = 0; i < table_len; ++i)
    table[i] = 1000 + 3 * i;
  const int width = *rc::gen::inRange(1, 20);
  std::vector<PageId> out(width, 12345);
  const RowCompaction r = compact_row(blocks.data(), static_cast<int>(blocks.size()), pos, ratio,
                                      page_size, table.data(), table_len, width, out.data());
  RC_ASSERT(r.status == CompactStatus::ok);
  std::set<std::int64_t> idx;
  for (auto b : blocks)
    idx.insert(std::int64_t{b} * ratio / page_size);
  const TokenRange tail = causal_tail(pos, ratio);
  if (tail.begin < tail.end) idx.insert(tail.begin / page_size);
  const int distinct = static_cast<int>(idx.size());
  RC_ASSERT(r.pages == std::min(distinct, width));
  RC_ASSERT(r.dropped == std::max(0, distinct - width));
  auto it = idx.begin();
  for (int i = 0; i < width; ++i) {
    if (i < r.pages) {
      RC_ASSERT(out[i] == table[*it++]);
    } else {
      RC_ASSERT(out[i] == kNoPage);
    }
  }
}

}  // namespace
}  // namespace kvtier
