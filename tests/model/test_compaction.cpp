#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "model/compaction.hpp"
#include "model/config_error.hpp"
#include "model/select_width.hpp"

namespace kvtier {
namespace {

// A request whose page table maps page index i to logical page 100 + i.
std::vector<PageId> table_of(int n) {
  std::vector<PageId> t(n);
  std::iota(t.begin(), t.end(), 100);
  return t;
}

TEST(CausalTail, OpenGroupOfTheRow) {
  EXPECT_EQ(causal_tail(0, 4).begin, 0);
  EXPECT_EQ(causal_tail(0, 4).end, 1);
  EXPECT_EQ(causal_tail(3, 4).begin, 4);  // pos 3 closes group 0: no tail
  EXPECT_EQ(causal_tail(3, 4).end, 4);
  EXPECT_EQ(causal_tail(6, 4).begin, 4);
  EXPECT_EQ(causal_tail(6, 4).end, 7);
}

TEST(Compaction, HandWorkedRow) {
  // Page size 8, ratio 4: blocks 0,1 -> page 0; 2,3 -> page 1; 5 -> page 2; 9 -> page 4.
  const auto table = table_of(6);
  const std::vector<std::int32_t> blocks = {0, 1, 2, 3, 5, 9, -1, -1};
  std::vector<PageId> out(6, 7777);
  // Row at position 42: tail is [40, 43) -> page 5.
  const RowCompaction r = compact_row(blocks.data(), 8, 42, 4, 8, table.data(), 6, 6, out.data());
  EXPECT_EQ(r.status, CompactStatus::ok);
  EXPECT_EQ(r.pages, 5);
  EXPECT_EQ(r.dropped, 0);
  EXPECT_EQ(out, (std::vector<PageId>{100, 101, 102, 104, 105, kNoPage}));
}

TEST(Compaction, TruncationIsCountedExactly) {
  const auto table = table_of(6);
  const std::vector<std::int32_t> blocks = {0, 2, 5, 9};  // pages 0, 1, 2, 4
  std::vector<PageId> out(2);
  const RowCompaction r = compact_row(blocks.data(), 4, 42, 4, 8, table.data(), 6, 2, out.data());
  EXPECT_EQ(r.pages, 2);
  EXPECT_EQ(r.dropped, 3);  // pages 2, 4 and the tail's page 5
  EXPECT_EQ(out, (std::vector<PageId>{100, 101}));
}

TEST(Compaction, TailInTheSamePageIsNotCountedTwice) {
  const auto table = table_of(2);
  const std::vector<std::int32_t> blocks = {0, 1};  // page 0
  std::vector<PageId> out(1);
  const RowCompaction r = compact_row(blocks.data(), 2, 9, 4, 16, table.data(), 2, 1, out.data());
  EXPECT_EQ(r.pages, 1);
  EXPECT_EQ(r.dropped, 0);
}

TEST(Compaction, BadSelectionsAreReportedNotRead) {
  const auto table = table_of(2);
  std::vector<PageId> out(4);
  const std::vector<std::int32_t> unsorted = {3, 1};
  EXPECT_EQ(compact_row(unsorted.data(), 2, 15, 4, 8, table.data(), 2, 4, out.data()).status,
            CompactStatus::unsorted);
  const std::vector<std::int32_t> beyond = {0, 4};  // block 4 -> page 2, table has 2 pages
  EXPECT_EQ(compact_row(beyond.data(), 2, 15, 4, 8, table.data(), 2, 4, out.data()).status,
            CompactStatus::out_of_range);
}

TEST(SelectWidth, FromBatchSizeAndPool) {
  // 100 slots, 4 rows writing 4 pages: (100 - 4) / 4 = 24 pages per row.
  const SelectWidth w = select_width(100, 4, 4, 513);
  EXPECT_EQ(w.width, 24);
  EXPECT_EQ(w.min_slots, 8);
  EXPECT_EQ(w.no_drop_slots, 4 * 513 + 4);
  EXPECT_LE(std::int64_t{w.width} * 4 + 4, 100);
  EXPECT_EQ(select_width(100000, 1, 1, 513).width, 513);  // capped at what a row can touch
}

TEST(SelectWidth, TooSmallPoolSaysTheMinimum) {
  try {
    select_width(5, 4, 2, 513);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the minimum is 6 slots"), std::string::npos) << m;
    EXPECT_NE(m.find("2054 for no truncated selection"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kvtier
