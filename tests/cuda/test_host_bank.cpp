// HostBank and DevicePool: exact sizes, zeroed (dummy page/slot included), mapped for
// kernels, and allocation failures that say what was asked and what is available.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/host_bank.hpp"
#include "model/capacity_error.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

TEST(HostBank, ExactSizesZeroedAndMapped) {
  KVT_REQUIRE_GPU();
  const PageLayout L = PageLayout::make(3, 64, 2, 256, true);  // fp8: 4 banks a layer
  std::uint64_t last = 0, total = 0;
  HostBank bank(L, 1001, [&](std::uint64_t d, std::uint64_t t) {
    EXPECT_GE(d, last);
    last = d;
    total = t;
  });
  ASSERT_EQ(bank.banks(), 12);
  std::int64_t sum = 0;
  for (int b = 0; b < bank.banks(); ++b) {
    const std::int64_t want = 1002 * L.page_bytes(PageLayout::kind_of(b % 4));
    EXPECT_EQ(bank.bank_bytes(b), want) << "bank " << b;  // exact, not rounded up
    sum += want;
    const std::byte* p = bank.host(b);
    EXPECT_TRUE(std::all_of(p, p + want, [](std::byte x) { return x == std::byte{0}; }));
    cudaPointerAttributes a{};
    KVT_CUDA_CHECK(cudaPointerGetAttributes(&a, bank.device(b)));
    EXPECT_EQ(a.type, cudaMemoryTypeHost);
  }
  EXPECT_EQ(bank.total_bytes(), sum);
  EXPECT_EQ(last, static_cast<std::uint64_t>(sum));
  EXPECT_EQ(total, static_cast<std::uint64_t>(sum));
}

TEST(HostBank, LargeBankReportsProgressInSteps) {
  KVT_REQUIRE_GPU();
  // 2 layers x 2 banks x 2049 pages x 64 KiB = 512 MiB + dummy pages: the parallel path.
  const PageLayout L = PageLayout::make(2, 64, 2, 256, false);
  int calls = 0;
  HostBank bank(L, 2048, [&](std::uint64_t, std::uint64_t) { ++calls; });
  EXPECT_GE(calls, 4);
  EXPECT_EQ(bank.total_bytes(), 4 * 2049 * std::int64_t{65536});
}

TEST(HostBank, ImpossibleSizeSaysAskedAndAvailable) {
  KVT_REQUIRE_GPU();
  const PageLayout L = PageLayout::make(12, 64, 2, 256, false);
  try {
    HostBank bank(L, 2000000000, {});  // 2e9 pages x 64 KiB x 24 banks
    FAIL() << "a 3 PiB host bank was allocated";
  } catch (const CapacityError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("available"), std::string::npos) << m;
  }
}

TEST(DevicePool, ZeroedAndExact) {
  KVT_REQUIRE_GPU();
  const PageLayout L = PageLayout::make(1, 8, 1, 7, false);  // odd sizes: 14 B tokens
  DevicePool pool(L, 33);
  EXPECT_EQ(pool.bank_bytes(0), 34 * 8 * 14);
  std::vector<std::byte> v(static_cast<std::size_t>(pool.bank_bytes(1)), std::byte{1});
  KVT_CUDA_CHECK(cudaMemcpy(v.data(), pool.bank(1), v.size(), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](std::byte x) { return x == std::byte{0}; }));
}

// Provokes cudaMalloc's out-of-memory on purpose: left out of the compute-sanitizer runs,
// which report the failing API call as an error.
TEST(DevicePool, TooLargeSaysAskedAndFree) {
  KVT_REQUIRE_GPU();
  try {
    DevicePool huge(PageLayout::make(12, 64, 2, 256, false), 2000000000);
    FAIL() << "a 3 PiB pool was allocated";
  } catch (const CapacityError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("free"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kvtier::cuda
