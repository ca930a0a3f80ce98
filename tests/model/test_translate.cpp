#include <gtest/gtest.h>

#include <vector>

#include "model/translate.hpp"

namespace kvtier {
namespace {

TEST(Translate, LogicalToPhysicalWithDummyForPaddingAndMisses) {
  // 6 pages; pages 1 and 4 resident in slots 2 and 0; the pool has 3 slots + dummy 3.
  const std::vector<SlotId> slot_of_page = {kNoSlot, 2, kNoSlot, kNoSlot, 0, kNoSlot};
  const std::vector<PageId> table = {4, 1, kNoPage, 2, 99};
  std::vector<SlotId> phys(table.size(), -7);
  const int missing = translate_pages(table.data(), 5, slot_of_page.data(), 6, 3, phys.data());
  EXPECT_EQ(phys, (std::vector<SlotId>{0, 2, 3, 3, 3}));
  EXPECT_EQ(missing, 2);  // page 2 (not resident) and 99 (outside the space)
}

TEST(Translate, LocateResolvesMissesToTheHostBankInPlace) {
  // The same state: resident pages to their slots, other real pages in place, the rest none.
  const std::vector<SlotId> slot_of_page = {kNoSlot, 2, kNoSlot, kNoSlot, 0, kNoSlot};
  const std::vector<PageId> table = {4, 1, kNoPage, 2, 99, 0, -5};
  std::vector<SlotId> phys(table.size(), -7);
  const int in_place = locate_pages(table.data(), 7, slot_of_page.data(), 6, phys.data());
  EXPECT_EQ(phys, (std::vector<SlotId>{0, 2, kNoSlot, -4, kNoSlot, -2, kNoSlot}));
  EXPECT_EQ(in_place, 2);  // pages 2 and 0
  EXPECT_EQ(in_place_page(phys[3]), 2);
  EXPECT_EQ(in_place_page(phys[5]), 0);
}

}  // namespace
}  // namespace kvtier
