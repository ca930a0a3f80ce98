// MirrorEngine::prefetch_async (the prefetch policy's ensure into the next layer's pool) in
// every ensure form: the core's PrefetchNextLayer decisions on a CPU copy of the state, the
// pages' bytes in the pool bit for bit the host bank's, and a prefetch that does not fit
// installs nothing and counts no error.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/engine.hpp"
#include "model/ensure.hpp"
#include "model/mirror_policy.hpp"
#include "model/residency_state.hpp"
#include "model/step_stamp.hpp"
#include "model/victims_heap.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

constexpr PageId kPages = 40;
constexpr SlotId kSlots = 8;

// A two-layer engine whose host bank holds random bytes, and the core's state of layer 1.
struct PrefetchRig {
  MirrorEngine engine;
  ResidencyState core{kPages, kSlots};
  HeapVictims victims{kSlots};
  DeviceArray<PageId> query{64};
  DeviceArray<std::int64_t> step{1};
  DeviceArray<long long> totals{3};

  explicit PrefetchRig(EnsureForm form)
      : engine(MirrorConfig{PageLayout::make(2, 8, 2, 16, false), ResidencyUnit::layer_page, kPages,
                            kSlots, 64, form}) {
    std::mt19937_64 rng(20261202);
    for (int b = 0; b < engine.host().banks(); ++b) {
      std::byte* h = engine.host().host(b);
      for (std::int64_t i = 0; i < engine.host().bank_bytes(b); ++i)
        h[i] = static_cast<std::byte>(rng() & 0xff);
    }
    KVT_CUDA_CHECK(cudaMemset(totals.get(), 0, totals.bytes()));
  }

  // Prefetches `pages` into layer 1 at `stamp` on the device and in the core; returns the
  // core's result and leaves both copy lists in gpu / cpu.
  EnsureResult prefetch(const std::vector<PageId>& pages, std::int64_t stamp,
                        std::vector<CopyOp>& gpu, std::vector<CopyOp>& cpu) {
    KVT_CUDA_CHECK(cudaMemcpy(query.get(), pages.data(), pages.size() * sizeof(PageId),
                              cudaMemcpyHostToDevice));
    KVT_CUDA_CHECK(cudaMemcpy(step.get(), &stamp, sizeof stamp, cudaMemcpyHostToDevice));
    engine.prefetch_async(1, query.get(), static_cast<int>(pages.size()), nullptr,
                          EnsureHooks{step.get(), totals.get()});
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    int count = 0;
    KVT_CUDA_CHECK(cudaMemcpy(&count, engine.copy_count(), sizeof count, cudaMemcpyDeviceToHost));
    gpu.resize(static_cast<std::size_t>(count));
    if (count > 0)
      KVT_CUDA_CHECK(cudaMemcpy(gpu.data(), engine.copies(), gpu.size() * sizeof(CopyOp),
                                cudaMemcpyDeviceToHost));
    std::vector<PageId> miss(pages.size() + 1);
    std::vector<SlotId> vict(pages.size() + 1);
    cpu.resize(pages.size() + 1);
    // the core's prefetch_stamp(ls) is stamp here: the layer-step whose prefetch it is
    const EnsureResult r =
        ensure_pages(core.view(), pages.data(), static_cast<int>(pages.size()), stamp, victims,
                     EnsureScratch{miss.data(), vict.data(), nullptr}, cpu.data());
    cpu.resize(r.status == EnsureStatus::ok ? static_cast<std::size_t>(r.misses) : 0);
    return r;
  }

  // The state of layer 1 on the device equals the core's.
  void expect_state_equal(const std::string& where) {
    std::vector<SlotId> sop;
    std::vector<PageId> pos;
    std::vector<std::int64_t> lu;
    engine.download_state(1, sop, pos, lu);
    EXPECT_EQ(sop, core.slot_of_page()) << where;
    EXPECT_EQ(pos, core.page_of_slot()) << where;
    EXPECT_EQ(lu, core.last_use()) << where;
  }

  // Every page resident in layer 1 reads the host bank's bytes through the pool.
  void expect_pool_bytes_are_host_bytes(const std::string& where) {
    for (PageId p = 0; p < kPages; ++p) {
      if (core.slot_of_page()[static_cast<std::size_t>(p)] < 0) continue;
      for (BankKind kind : {BankKind::k, BankKind::v})
        EXPECT_EQ(engine.read_through_table(1, kind, p), engine.host_page(1, kind, p))
            << where << ": page " << p;
    }
  }
};

class Prefetch : public ::testing::TestWithParam<EnsureForm> {};

TEST_P(Prefetch, MakesTheCoresDecisionsAndSkipsWhatDoesNotFit) {
  KVT_REQUIRE_GPU();
  PrefetchRig s(GetParam());
  std::vector<CopyOp> gpu, cpu;
  // Layer-step 0 prefetches 8 pages into layer 1's empty pool (duplicates and padding too).
  const std::int64_t first = prefetch_stamp(layer_step(0, 2, 0));
  EnsureResult r = s.prefetch({3, 7, kNoPage, 3, 11, 12, 13, 14, 15, 16}, first, gpu, cpu);
  EXPECT_EQ(r.status, EnsureStatus::ok);
  EXPECT_EQ(r.misses, 8);
  EXPECT_EQ(gpu, cpu);
  s.expect_state_equal("first prefetch");
  s.expect_pool_bytes_are_host_bytes("first prefetch");
  // At the same stamp every slot is in use: two new pages do not fit. Nothing is installed,
  // nothing copied, no error counted, and the state is as the core leaves it.
  r = s.prefetch({3, 20, 21}, first, gpu, cpu);
  EXPECT_EQ(r.status, EnsureStatus::pool_too_small);
  EXPECT_TRUE(gpu.empty());
  EXPECT_TRUE(cpu.empty());
  EXPECT_EQ(s.engine.read_counters().ensure_errors, 0);
  s.expect_state_equal("skipped prefetch");
  // A later layer-step's prefetch evicts the least recently used slots, as the core does.
  r = s.prefetch({20, 21, 3, 39}, prefetch_stamp(layer_step(1, 2, 0)), gpu, cpu);
  EXPECT_EQ(r.status, EnsureStatus::ok);
  EXPECT_EQ(r.misses, 3);
  EXPECT_EQ(r.evictions, 3);
  EXPECT_EQ(gpu, cpu);
  s.expect_state_equal("evicting prefetch");
  s.expect_pool_bytes_are_host_bytes("evicting prefetch");
  // The totals count the prefetches that succeeded: 0 + 1 hits (page 3, used at an earlier
  // stamp), 8 + 3 misses, 3 evictions.
  long long totals[3] = {};
  KVT_CUDA_CHECK(cudaMemcpy(totals, s.totals.get(), sizeof totals, cudaMemcpyDeviceToHost));
  EXPECT_EQ(totals[0], 1);
  EXPECT_EQ(totals[1], 11);
  EXPECT_EQ(totals[2], 3);
  // Layer 0's state is untouched.
  std::vector<SlotId> sop;
  std::vector<PageId> pos;
  std::vector<std::int64_t> lu;
  s.engine.download_state(0, sop, pos, lu);
  EXPECT_EQ(sop, std::vector<SlotId>(kPages, kNoSlot));
}

INSTANTIATE_TEST_SUITE_P(Forms, Prefetch,
                         ::testing::Values(EnsureForm::block, EnsureForm::multi_block,
                                           EnsureForm::core_thread));

}  // namespace
}  // namespace kvtier::cuda
