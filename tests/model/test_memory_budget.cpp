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
  // 131,072 tokens = 2,048 pages of one layer, plus the dummy page.
  EXPECT_EQ(item(b.device, "prefill staging window"), 2049LL * 64 * 2048);
  EXPECT_EQ(item(b.device, "fp32 fold accumulator + LSE"), 8LL * 24 * 257 * 4);
}

// The runner's mirror placement reads prefill through the same window and folds into the
// same accumulator as host (cuda/runner/paged_kv.cpp, qsa_runner.cpp): priced alike.
TEST(MemoryBudget, MirrorPricesTheStagingWindowAndFoldAccumulatorLikeHost) {
  BudgetRequest r;
  r.placement = Placement::mirror;
  r.host_pages = 4096;
  r.pool_slots = 8192;
  r.batch_rows = 8;
  r.batch_tokens = 8 * 1024;  // prefill chunks of 1,024 tokens
  r.staging_window_tokens = 8192;
  const MemoryBudget b = memory_budget(r);
  EXPECT_EQ(item(b.device, "prefill staging window"), (128LL + 1) * 64 * 2048);
  EXPECT_EQ(item(b.device, "fp32 fold accumulator + LSE"), 8LL * 1024 * 24 * 257 * 4);
  r.placement = Placement::host;
  const MemoryBudget h = memory_budget(r);
  EXPECT_EQ(item(h.device, "prefill staging window"), item(b.device, "prefill staging window"));
  EXPECT_EQ(item(h.device, "fp32 fold accumulator + LSE"),
            item(b.device, "fp32 fold accumulator + LSE"));
  // The device placement reads its own pages: no window, no accumulator.
  r.placement = Placement::device;
  for (const auto& i : memory_budget(r).device) {
    EXPECT_NE(i.name, "prefill staging window");
    EXPECT_NE(i.name, "fp32 fold accumulator + LSE");
  }
}

// What every placement allocates besides the pages, item by item (the runner's buffers).
TEST(MemoryBudget, SelectionAndTableBuffersFollowTheBatchAndContext) {
  BudgetRequest r;
  r.placement = Placement::device;
  r.host_pages = 2048 * 4;
  r.batch_rows = 4;
  r.context_tokens = 131072;  // 2,048 pages, 32,768 compressed keys
  const MemoryBudget one = memory_budget(r);
  const std::int64_t keys = 32768;
  const std::int64_t per_token = 4 * keys + 3 * 2048 * 4 + 8 * 4 + 4 * 512 + 2 * 4 * 2051;
  const std::int64_t per_row = 4 * keys + 4 * (keys / 32);
  EXPECT_EQ(item(one.device, "selection buffers (index scores, top-k, selected tokens)"),
            4 * per_token + 4 * per_row);
  EXPECT_EQ(item(one.device, "page tables (logical, write, per row)"), 3LL * 4 * 4 * 2048);
  EXPECT_EQ(item(one.device, "indexer key ring"), 4LL * 4 * 128 * 4 * 12);
  // Prefill chunks of 1,024 tokens per row: the per-token buffers grow, the tables do not.
  r.batch_tokens = 4 * 1024;
  const MemoryBudget wide = memory_budget(r);
  EXPECT_EQ(item(wide.device, "selection buffers (index scores, top-k, selected tokens)"),
            4 * 1024 * per_token + 4 * per_row);
  EXPECT_EQ(item(wide.device, "page tables (logical, write, per row)"),
            item(one.device, "page tables (logical, write, per row)"));
  // Mirror adds the translated tables (one per layer) and the ensure's buffers per slot.
  r.placement = Placement::mirror;
  r.pool_slots = 4096;
  const MemoryBudget m = memory_budget(r);
  EXPECT_EQ(item(m.device, "translated page tables (one per QSA layer)"), 4LL * 4 * 2048 * 12);
  EXPECT_EQ(item(m.device, "ensure query and scratch"), 28LL * 4096);
  EXPECT_EQ(item(m.device, "residency state"), 12LL * (4 * 8192 + 12 * 4096));
}

// The refusal names the smallest device budget that fits, and that budget does fit.
TEST(MemoryBudget, RefusalNamesTheSmallestBudgetThatFits) {
  BudgetRequest r;
  r.placement = Placement::host;
  r.host_pages = 16384;
  r.batch_rows = 4;
  const std::int64_t need = memory_budget(r).device_bytes;
  r.device_capacity_bytes = need - 1;
  const std::string m = testing::error_of<CapacityError>([&r] { memory_budget(r); });
  const auto at = m.find("the smallest device budget that fits it is ");
  ASSERT_NE(at, std::string::npos) << m;
  const double gib = std::stod(m.substr(at + 43));
  r.device_capacity_bytes = static_cast<std::int64_t>(gib * 1024 * 1024 * 1024);
  EXPECT_GE(r.device_capacity_bytes, need);
  EXPECT_NO_THROW(memory_budget(r));
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
  // A window past every page a request holds is priced as those pages (the runner's clamp).
  r.placement = Placement::host;
  r.staging_window_tokens = std::int64_t{1} << 62;
  EXPECT_EQ(item(memory_budget(r).device, "prefill staging window"),
            (kMaxPages + 1) * 64 * std::int64_t{2048});
}

// largest_pool_slots: the pool it names fits the capacity and one slot more does not, for
// both units and dtypes; a capacity below the smallest pool that runs the batch gives 0.
TEST(MemoryBudget, LargestPoolSlotsIsTheEdgeOfTheCapacity) {
  for (ResidencyUnit unit : {ResidencyUnit::layer_page, ResidencyUnit::all_layers_page}) {
    for (KvDtype dtype : {KvDtype::bf16, KvDtype::fp8}) {
      BudgetRequest r;
      r.placement = Placement::mirror;
      r.unit = unit;
      r.dtype = dtype;
      r.host_pages = 16 * 2048;
      r.batch_rows = 16;
      r.context_tokens = 131072;
      r.pool_slots = 999999;  // ignored
      for (std::int64_t cap : {std::int64_t{3} << 30, std::int64_t{16} << 30}) {
        const std::int64_t fit = largest_pool_slots(r, cap);
        ASSERT_GT(fit, 0);
        BudgetRequest at = r;
        at.pool_slots = fit;
        EXPECT_LE(memory_budget(at).device_bytes, cap);
        at.pool_slots = fit + 1;
        EXPECT_GT(memory_budget(at).device_bytes, cap);
      }
      EXPECT_EQ(largest_pool_slots(r, 1 << 20), 0);
      EXPECT_EQ(largest_pool_slots(r, 0), 0);
    }
  }
}

}  // namespace
}  // namespace kvtier
