// The device ensure kernels (the core's code in one thread, and the one-block form) make
// exactly the core's decisions: same result, same copy list, same state afterwards, on
// random consistent states with wide and narrow last_use ranges, ties, slots already used
// in this step, free slots, padding, duplicates, pages outside the space and pools too
// small.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"
#include "model/ensure.hpp"
#include "model/victims_scan.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

struct HostState {
  std::vector<SlotId> slot_of_page;
  std::vector<PageId> page_of_slot;
  std::vector<std::int64_t> last_use;
  ResidencyView view() {
    return {slot_of_page.data(), page_of_slot.data(), last_use.data(),
            static_cast<PageId>(slot_of_page.size()), static_cast<SlotId>(page_of_slot.size())};
  }
  bool operator==(const HostState&) const = default;
};

struct Outcome {
  HostState state;
  EnsureResult result;
  std::vector<CopyOp> copies;
  int copy_count = 0;
};

bool same_result(const EnsureResult& a, const EnsureResult& b) {
  return a.status == b.status && a.lookups == b.lookups && a.hits == b.hits &&
         a.misses == b.misses && a.bypassed == b.bypassed && a.evictions == b.evictions &&
         a.evictable == b.evictable && a.bad_index == b.bad_index;
}

template <class T>
DeviceArray<T> upload(const std::vector<T>& v) {
  DeviceArray<T> d(std::max<std::size_t>(v.size(), 1));
  if (!v.empty())
    KVT_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T>
void download(const DeviceArray<T>& d, std::vector<T>& v) {
  if (!v.empty())
    KVT_CUDA_CHECK(cudaMemcpy(v.data(), d.get(), v.size() * sizeof(T), cudaMemcpyDeviceToHost));
}

Outcome run_device(const HostState& s0, const std::vector<PageId>& query, std::int64_t step,
                   EnsureForm form) {
  Outcome o;
  o.state = s0;
  auto sp = upload(s0.slot_of_page);
  auto ps = upload(s0.page_of_slot);
  auto lu = upload(s0.last_use);
  auto q = upload(query);
  const std::size_t n = std::max<std::size_t>(query.size(), 1);
  DeviceArray<PageId> miss(n);
  DeviceArray<SlotId> vic(n);
  DeviceArray<CopyOp> copies(n);
  DeviceArray<int> count(1), errors(1);
  DeviceArray<EnsureResult> result(1);
  DeviceArray<std::int64_t> d_step = upload(std::vector<std::int64_t>{step});
  KVT_CUDA_CHECK(cudaMemset(errors.get(), 0, sizeof(int)));
  // running totals start at 1, 2, 3 so that the test sees an addition, not a store
  auto totals = upload(std::vector<long long>{1, 2, 3});
  EnsureParams p{{sp.get(), ps.get(), lu.get(), static_cast<PageId>(s0.slot_of_page.size()),
                  static_cast<SlotId>(s0.page_of_slot.size())},
                 q.get(),
                 static_cast<int>(query.size()),
                 d_step.get(),
                 miss.get(),
                 vic.get(),
                 copies.get(),
                 count.get(),
                 result.get(),
                 errors.get(),
                 totals.get()};
  const SlotId slots = static_cast<SlotId>(s0.page_of_slot.size());
  const int chunks = multi_block_chunks(slots);
  DeviceArray<SlotId> cand(static_cast<std::size_t>(chunks) * kMultiChunk);
  DeviceArray<int> ints(static_cast<std::size_t>(3 * chunks + 1 + 4));
  KVT_CUDA_CHECK(cudaMemset(ints.get(), 0, ints.bytes()));
  const MultiBlockScratch ms{cand.get(), ints.get(), ints.get() + chunks, ints.get() + 2 * chunks,
                             ints.get() + 3 * chunks + 1};
  if (form == EnsureForm::multi_block) {
    launch_ensure_multi(p, ms, nullptr);
  } else {
    launch_ensure(p, form, nullptr);
  }
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  download(sp, o.state.slot_of_page);
  download(ps, o.state.page_of_slot);
  download(lu, o.state.last_use);
  KVT_CUDA_CHECK(cudaMemcpy(&o.result, result.get(), sizeof o.result, cudaMemcpyDeviceToHost));
  KVT_CUDA_CHECK(cudaMemcpy(&o.copy_count, count.get(), sizeof(int), cudaMemcpyDeviceToHost));
  o.copies.resize(static_cast<std::size_t>(o.copy_count));
  if (o.copy_count > 0)
    KVT_CUDA_CHECK(cudaMemcpy(o.copies.data(), copies.get(), o.copies.size() * sizeof(CopyOp),
                              cudaMemcpyDeviceToHost));
  std::vector<long long> t(3);
  download(totals, t);
  const bool ok = o.result.status == EnsureStatus::ok;
  EXPECT_EQ(t, (std::vector<long long>{1 + (ok ? o.result.hits : 0), 2 + (ok ? o.result.misses : 0),
                                       3 + (ok ? o.result.evictions : 0)}))
      << "running totals, form " << static_cast<int>(form);
  return o;
}

Outcome run_core(const HostState& s0, const std::vector<PageId>& query, std::int64_t step) {
  Outcome o;
  o.state = s0;
  const std::size_t n = std::max<std::size_t>(query.size(), 1);
  std::vector<PageId> miss(n);
  std::vector<SlotId> vic(n);
  std::vector<CopyOp> copies(n);
  ScanVictims victims;
  o.result = ensure_pages(o.state.view(), query.data(), static_cast<int>(query.size()), step,
                          victims, EnsureScratch{miss.data(), vic.data(), nullptr}, copies.data());
  o.copy_count = o.result.status == EnsureStatus::ok ? o.result.misses : 0;
  o.copies.assign(copies.begin(), copies.begin() + o.copy_count);
  return o;
}

// A random consistent state and a query for it, from one seed.
void make_case(std::uint64_t seed, int max_slots, HostState& s, std::vector<PageId>& query,
               std::int64_t& step) {
  std::mt19937_64 rng(seed);
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const auto slots = static_cast<SlotId>(uni(1, max_slots));
  const auto pages = static_cast<PageId>(uni(1, slots * 3 + 4));
  s.slot_of_page.assign(static_cast<std::size_t>(pages), kNoSlot);
  s.page_of_slot.assign(static_cast<std::size_t>(slots), kNoPage);
  s.last_use.assign(static_cast<std::size_t>(slots), kFreeSlotStep);
  // last_use range: narrow (many ties), wide, or beyond 32 bits.
  const int range_kind = static_cast<int>(uni(0, 2));
  const std::int64_t span = range_kind == 0 ? 8 : range_kind == 1 ? 1000000 : (1ll << 40);
  step = uni(1, span);
  const double fill = std::uniform_real_distribution<double>(0, 1)(rng);
  std::vector<PageId> perm(static_cast<std::size_t>(pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (SlotId sl = 0; sl < slots; ++sl) {
    if (sl >= pages || std::uniform_real_distribution<double>(0, 1)(rng) > fill) continue;
    const PageId pg = perm[static_cast<std::size_t>(sl)];
    s.page_of_slot[sl] = pg;
    s.slot_of_page[pg] = sl;
    // A few slots were already queried in this step (an earlier chunk).
    s.last_use[sl] = uni(0, 9) == 0 ? step : uni(0, step - 1);
  }
  const int n = static_cast<int>(uni(0, std::min<std::int64_t>(pages * 2, 3000)));
  const bool too_many = uni(0, 9) == 0;
  const PageId distinct_cap = too_many ? pages : std::max<PageId>(1, slots / 2);
  std::vector<PageId> pool(perm.begin(), perm.begin() + std::min(distinct_cap, pages));
  for (int i = 0; i < n; ++i) {
    const int r = static_cast<int>(uni(0, 99));
    if (r < 10) {
      query.push_back(kNoPage);
    } else if (r == 10 && uni(0, 9) == 0) {
      query.push_back(uni(0, 1) ? pages + static_cast<PageId>(uni(0, 5)) : -2);
    } else {
      query.push_back(
          pool[static_cast<std::size_t>(uni(0, static_cast<std::int64_t>(pool.size()) - 1))]);
    }
  }
}

void expect_same(const Outcome& core, const Outcome& dev, const char* form) {
  RC_ASSERT(same_result(core.result, dev.result));
  RC_ASSERT(core.copy_count == dev.copy_count);
  RC_ASSERT(core.copies == dev.copies);
  RC_ASSERT(core.state == dev.state);
  (void)form;
}

TEST(EnsureForms, DeviceFormsMakeTheCoresDecisions) {
  KVT_REQUIRE_GPU();
  EXPECT_TRUE(rc::check("both device forms == core", [](std::uint64_t seed) {
    HostState s;
    std::vector<PageId> query;
    std::int64_t step = 0;
    make_case(seed, 300, s, query, step);
    const Outcome core = run_core(s, query, step);
    expect_same(core, run_device(s, query, step, EnsureForm::core_thread), "core_thread");
    expect_same(core, run_device(s, query, step, EnsureForm::block), "block");
    expect_same(core, run_device(s, query, step, EnsureForm::multi_block), "multi_block");
  }));
}

// Larger pools exercise several radix passes and many warps in the one-block form.
TEST(EnsureForms, BlockFormOnLargePools) {
  KVT_REQUIRE_GPU();
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    HostState s;
    std::vector<PageId> query;
    std::int64_t step = 0;
    make_case(seed * 7919, 40000, s, query, step);
    const Outcome core = run_core(s, query, step);
    SCOPED_TRACE("seed " + std::to_string(seed * 7919));
    for (EnsureForm form : {EnsureForm::block, EnsureForm::multi_block}) {
      const Outcome dev = run_device(s, query, step, form);
      EXPECT_TRUE(same_result(core.result, dev.result));
      EXPECT_EQ(core.copies, dev.copies);
      EXPECT_TRUE(core.state == dev.state);
    }
  }
}

// 32k - 100k slots (8 - 25 chunks of the multi-block form; some odd, so that the last chunk and
// the block form's last warp end in a single slot), few misses: the merge path, with narrow
// last_use ranges (many ties across chunks) and wide ones.
TEST(EnsureForms, ManyChunksFewMisses) {
  KVT_REQUIRE_GPU();
  const SlotId sizes[] = {100001, 100000, 32769, 32768, 32767, 65537};
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    const SlotId slots = sizes[seed - 1];
    const PageId pages = 3 * slots;
    HostState s;
    s.slot_of_page.assign(pages, kNoSlot);
    s.page_of_slot.assign(slots, kNoPage);
    s.last_use.assign(slots, kFreeSlotStep);
    const std::int64_t span = seed % 2 ? 4 : (1ll << 36);
    const std::int64_t step = span + 1;
    for (SlotId i = 0; i < slots; ++i) {
      if (seed % 3 == 0 && i % 7 == 0) continue;  // some free slots
      s.page_of_slot[i] = i;
      s.slot_of_page[i] = i;
      s.last_use[i] = std::uniform_int_distribution<std::int64_t>(0, span)(rng);
    }
    std::vector<PageId> query;
    for (int i = 0; i < 72 * static_cast<int>(seed); ++i)
      query.push_back(std::uniform_int_distribution<PageId>(slots, pages - 1)(rng));
    for (int i = 0; i < 441; ++i)
      query.push_back(std::uniform_int_distribution<PageId>(0, slots - 1)(rng));
    std::shuffle(query.begin(), query.end(), rng);
    const Outcome core = run_core(s, query, step);
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_EQ(core.result.status, EnsureStatus::ok);
    for (EnsureForm form : {EnsureForm::block, EnsureForm::multi_block}) {
      const Outcome dev = run_device(s, query, step, form);
      EXPECT_TRUE(same_result(core.result, dev.result));
      EXPECT_EQ(core.copies, dev.copies);
      EXPECT_TRUE(core.state == dev.state);
    }
  }
}

}  // namespace
}  // namespace kvtier::cuda
