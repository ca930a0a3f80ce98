// Bad configurations give a clear error or a counted drop, never an out-of-bounds access
// (these tests run under compute-sanitizer memcheck on the GPU machine).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "cuda/engine.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

MirrorConfig small_config(SlotId slots, EnsureForm form) {
  return {PageLayout::make(2, 4, 1, 8, false), ResidencyUnit::layer_page, 16, slots, 32, form};
}

TEST(BadConfig, PoolSmallerThanOneSelection) {
  KVT_REQUIRE_GPU();
  for (EnsureForm form : {EnsureForm::block, EnsureForm::core_thread}) {
    MirrorEngine e(small_config(3, form));
    std::vector<CopyOp> copies;
    const std::vector<PageId> q = {0, 1, 2, 3, 4};
    EXPECT_THROW(e.ensure(0, q, 1, copies), CapacityError);
    int count = -1;
    KVT_CUDA_CHECK(cudaMemcpy(&count, e.copy_count(), sizeof count, cudaMemcpyDeviceToHost));
    EXPECT_EQ(count, 0);  // nothing is copied
    EXPECT_EQ(e.read_counters().ensure_errors, 1);
    // Nothing was installed; a query that fits still works afterwards.
    const std::vector<PageId> ok = {0, 1, 2};
    EXPECT_EQ(e.ensure(0, ok, 2, copies).misses, 3);
  }
}

TEST(BadConfig, PageBeyondTheLogicalSpace) {
  KVT_REQUIRE_GPU();
  for (EnsureForm form : {EnsureForm::block, EnsureForm::core_thread}) {
    MirrorEngine e(small_config(8, form));
    std::vector<CopyOp> copies;
    EXPECT_THROW(e.ensure(0, std::vector<PageId>{1, 16}, 1, copies), std::out_of_range);
    EXPECT_THROW(e.ensure(0, std::vector<PageId>{-7}, 1, copies), std::out_of_range);
    EXPECT_EQ(e.read_counters().ensure_errors, 2);
    // A query longer than the scratch is refused on the host before any launch.
    EXPECT_THROW(e.ensure(0, std::vector<PageId>(33, 0), 1, copies), ConfigError);
  }
}

// Lanes of steps beside: 1 .. frontend::kMaxBesideLanes, refused before any allocation; a
// lane the engine lacks is refused on the host; the non-block forms step on lane 0 only.
TEST(BadConfig, BesideLanesOutsideTheEngines) {
  KVT_REQUIRE_GPU();
  for (int lanes : {0, 3, -1}) {
    MirrorConfig c = small_config(8, EnsureForm::block);
    c.beside_lanes = lanes;
    EXPECT_THROW(MirrorEngine{c}, ConfigError) << lanes;
  }
  MirrorConfig c = small_config(8, EnsureForm::block);
  c.beside_lanes = 2;
  MirrorEngine two(c);
  EXPECT_NO_THROW((void)two.result(1));
  EXPECT_THROW((void)two.result(2), std::out_of_range);
  EXPECT_THROW((void)MirrorEngine(small_config(8, EnsureForm::block)).copies(1), std::out_of_range);
  const CompactParams none{};
  DeviceArray<PageId> q(4);
  EXPECT_THROW(two.residency_beside_async(0, none, q.get(), 0, nullptr, {}, 2), std::out_of_range);
  // a step beside takes kBesideBlocks or kBesideBlocksWide blocks, nothing else
  for (int blocks : {0, 1, 5, 16, -4})
    EXPECT_THROW(two.residency_beside_async(0, none, q.get(), 0, nullptr, {}, 1, blocks),
                 std::invalid_argument)
        << blocks;
  MirrorConfig core = small_config(8, EnsureForm::core_thread);
  core.beside_lanes = 2;
  MirrorEngine thread_form(core);
  EXPECT_THROW(thread_form.residency_beside_async(0, none, q.get(), 0, nullptr, {}, 1),
               std::invalid_argument);
}

TEST(BadConfig, StoresAndReadsOutsideTheSpaceAreCountedNotWritten) {
  KVT_REQUIRE_GPU();
  MirrorEngine e(small_config(8, EnsureForm::block));
  const std::int64_t tb = e.layout().token_bytes(BankKind::k);
  auto bytes = [&](int v) {
    return std::vector<std::byte>(static_cast<std::size_t>(tb), std::byte(v));
  };
  std::vector<TokenBytes> toks;
  toks.push_back({16, 0, {bytes(1), bytes(2)}});  // page == num_pages (the dummy page)
  toks.push_back({-3, 0, {bytes(1), bytes(2)}});
  toks.push_back({2, 4, {bytes(1), bytes(2)}});  // token == page_size
  toks.push_back({2, 1, {bytes(9), bytes(8)}});  // fine
  e.store(0, toks);
  EXPECT_EQ(e.read_counters().bad_stores, 3);
  const auto dummy = e.host_page(0, BankKind::k, 16);
  EXPECT_TRUE(
      std::all_of(dummy.begin(), dummy.end(), [](std::byte x) { return x == std::byte{0}; }));
  // Translate: garbage resolves to the dummy slot and is counted.
  const auto phys = e.translate(0, std::vector<PageId>{kNoPage, 2, 99, -5});
  EXPECT_EQ(phys, (std::vector<SlotId>{8, 8, 8, 8}));
  EXPECT_EQ(e.read_counters().missing, 3);
  // Read kernel over positions past the table and pages outside the space.
  std::vector<std::int64_t> positions = {0, 5, 1000, -1};
  std::vector<PageId> table = {2, 99};
  std::vector<std::int64_t> len = {2};
  DeviceArray<std::int64_t> d_pos(4), d_len(1);
  DeviceArray<PageId> d_table(2);
  DeviceArray<int> missing(1);
  DeviceArray<unsigned long long> sum(1);
  KVT_CUDA_CHECK(cudaMemcpy(d_pos.get(), positions.data(), d_pos.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(d_table.get(), table.data(), d_table.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(d_len.get(), len.data(), d_len.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemset(missing.get(), 0, 4));
  KVT_CUDA_CHECK(cudaMemset(sum.get(), 0, 8));
  ReadParams rp{d_pos.get(), d_table.get(),
                d_len.get(), e.host().device_bank_table(),
                nullptr,     missing.get(),
                sum.get(),   e.layout(),
                0,           1,
                4,           2,
                16,          16};
  launch_read(rp, nullptr);
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  int m = 0;
  KVT_CUDA_CHECK(cudaMemcpy(&m, missing.get(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(m, 2);  // position 5 is in page 99 (outside), position 1000 past the table
}

TEST(BadConfig, SelectionWiderThanTheWidthIsCountedAsDropped) {
  KVT_REQUIRE_GPU();
  // One row choosing 10 blocks in 10 different pages, width 4: 6 pages + the tail's dropped.
  std::vector<std::int32_t> blocks;
  for (int i = 0; i < 10; ++i)
    blocks.push_back(i * 16);  // page size 64 = 16 blocks
  std::vector<std::int64_t> pos = {64 * 12 + 1};
  std::vector<PageId> table(13);
  for (int i = 0; i < 13; ++i)
    table[i] = 100 + i;
  std::vector<std::int64_t> len = {13};
  DeviceArray<std::int32_t> d_b(10);
  DeviceArray<std::int64_t> d_pos(1), d_len(1);
  DeviceArray<PageId> d_t(13), out(4);
  DeviceArray<int> c(2);
  KVT_CUDA_CHECK(cudaMemcpy(d_b.get(), blocks.data(), d_b.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(d_pos.get(), pos.data(), d_pos.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(d_t.get(), table.data(), d_t.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(d_len.get(), len.data(), d_len.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemset(c.get(), 0, c.bytes()));
  launch_compact({d_b.get(), d_pos.get(), d_t.get(), d_len.get(), out.get(), c.get(), c.get() + 1,
                  1, 10, 13, 4, 4, 64},
                 nullptr);
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  int counts[2];
  std::vector<PageId> o(4);
  KVT_CUDA_CHECK(cudaMemcpy(counts, c.get(), sizeof counts, cudaMemcpyDeviceToHost));
  KVT_CUDA_CHECK(cudaMemcpy(o.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(o, (std::vector<PageId>{100, 101, 102, 103}));
  EXPECT_EQ(counts[0], 7);  // pages 4..9 and the tail's page 12
  EXPECT_EQ(counts[1], 0);
}

}  // namespace
}  // namespace kvtier::cuda
