#include <gtest/gtest.h>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/memory_budget.hpp"
#include "model/page_space.hpp"
#include "tests/error_of.hpp"

namespace kvtier {
namespace {

std::int64_t item(const std::vector<MemoryItem>& items, const std::string& name) {
  for (const auto& i : items) {
    if (i.name == name) return i.bytes;
  }
  ADD_FAILURE() << "no item " << name;
  return -1;
}

TEST(MemoryBudget, MirrorHandWorked) {
  BudgetRequest r;
  r.placement = Placement::mirror;
  r.host_pages = 16384;  // 1M tokens
  r.pool_slots = 2048;
  r.batch_rows = 1;
  const MemoryBudget b = memory_budget(r);
  // Pool: (2048 + 1) slots x 12 layers x 128 KiB.
  EXPECT_EQ(item(b.device, "pool slots (+1 dummy)"), 2049LL * 12 * 131072);
  EXPECT_EQ(item(b.host, "host bank (+1 dummy page)"), 16385LL * 12 * 131072);
  EXPECT_EQ(item(b.device, "indexer slab"), 1048576LL * 64 * 12);
  EXPECT_EQ(b.select_width_pages, 513);
  EXPECT_EQ(b.host_bytes, 16385LL * 12 * 131072);
}

TEST(MemoryBudget, HostPlacementPricesWindowAndAccumulator) {
  BudgetRequest r;
  r.placement = Placement::host;
  r.host_pages = 4096;
  r.batch_rows = 8;
  const MemoryBudget b = memory_budget(r);
  EXPECT_EQ(item(b.device, "prefill staging window"), 131072LL * 2048);
  EXPECT_EQ(item(b.device, "fp32 fold accumulator + LSE"), 8LL * 24 * 257 * 4);
}

TEST(MemoryBudget, Fp8PagesCarryTheirScales) {
  BudgetRequest r;
  r.placement = Placement::device;
  r.dtype = KvDtype::fp8;
  r.host_pages = 100;
  const MemoryBudget b = memory_budget(r);
  EXPECT_EQ(item(b.device, "KV pages"), 101LL * 12 * 1040 * 64);
}

TEST(MemoryBudget, PoolSmallerThanOneBatchSaysTheMinimum) {
  BudgetRequest r;
  r.placement = Placement::mirror;
  r.host_pages = 1000;
  r.pool_slots = 20;
  r.batch_rows = 16;
  try {
    memory_budget(r);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the minimum is 32 slots"), std::string::npos) << e.what();
  }
}

TEST(MemoryBudget, ExceededCapacitySaysWhatFits) {
  BudgetRequest r;
  r.placement = Placement::mirror;
  r.host_pages = 16384;
  r.pool_slots = 100000;
  r.device_capacity_bytes = 80LL << 30;
  try {
    memory_budget(r);
    FAIL();
  } catch (const CapacityError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("device memory"), std::string::npos) << m;
    EXPECT_NE(m.find("largest pool that fits"), std::string::npos) << m;
  }
  r.pool_slots = 1024;
  r.host_capacity_bytes = 1LL << 30;
  EXPECT_THROW(memory_budget(r), CapacityError);
}

TEST(MemoryBudget, LargestPoolReportedActuallyFits) {
  BudgetRequest r;
  r.placement = Placement::mirror;
  r.host_pages = 16384;
  r.pool_slots = 100000;
  r.device_capacity_bytes = 10LL << 30;
  std::int64_t fit = -1;
  try {
    memory_budget(r);
  } catch (const CapacityError& e) {
    const std::string m = e.what();
    const auto at = m.find("fits is ");
    ASSERT_NE(at, std::string::npos);
    fit = std::stoll(m.substr(at + 8));
  }
  ASSERT_GT(fit, 0);
  r.pool_slots = fit;
  EXPECT_LE(memory_budget(r).device_bytes, r.device_capacity_bytes);
  r.pool_slots = fit + 1;
  EXPECT_THROW(memory_budget(r), CapacityError);
}

TEST(MemoryBudget, NoDropSlotsIsTheCoresSelectWidthRule) {
  BudgetRequest r;
  r.placement = Placement::mirror;
  r.host_pages = 2048 * 16;
  r.pool_slots = 2048;
  r.batch_rows = 16;
  r.write_pages = 16;
  r.context_tokens = 131072;  // 2048 pages: a row touches at most 512 blocks' pages + 1
  const MemoryBudget b = memory_budget(r);
  EXPECT_EQ(b.no_drop_slots, 16 * 513 + 16);
  EXPECT_EQ(b.select_width_pages, (2048 - 16) / 16);
}

// Sizes past what an int64 holds are refused, never wrapped into a negative total.
TEST(MemoryBudget, SizesBeyondInt64AreRefusedNotWrapped) {
  BudgetRequest r;
  r.placement = Placement::mirror;
  r.host_pages = 16384;
  r.pool_slots = 10'000'000'000'000;
  auto refusal = [&r] { return testing::error_of<ConfigError>([&r] { memory_budget(r); }); };
  EXPECT_NE(refusal().find("slot ids are 32-bit, at most 2147483646"), std::string::npos);
  r.pool_slots = 4096;
  r.host_pages = 3'000'000'000;
  EXPECT_NE(refusal().find("page ids are 32-bit"), std::string::npos);
  // Within the ids, a geometry of large pages overflows the bytes: refused by name.
  r.host_pages = kMaxPages;
  r.pool_slots = kMaxPages;
  r.geometry.head_dim = 1 << 20;
  r.geometry.page_size = 1 << 20;
  EXPECT_NE(refusal().find("beyond what 64-bit byte counts can price"), std::string::npos);
  // The largest sizes that can be priced give positive totals.
  r.geometry = Geometry{};
  const MemoryBudget b = memory_budget(r);
  EXPECT_GT(b.device_bytes, 0);
  EXPECT_GT(b.host_bytes, 0);
  r.placement = Placement::host;
  r.staging_window_tokens = std::int64_t{1} << 62;
  EXPECT_NE(refusal().find("the staging window"), std::string::npos);
}

}  // namespace
}  // namespace kvtier
