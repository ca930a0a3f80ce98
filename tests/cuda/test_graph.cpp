// A layer-step (store -> compact -> ensure + multi-bank copy -> translate) captured once in
// a CUDA graph and replayed with new inputs equals the same work launched eagerly, bit for
// bit: copy lists, results, block tables, residency state, pool and host banks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/engine.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

constexpr int kRows = 3;
constexpr int kBlocks = 24;
constexpr int kWidth = 8;
constexpr int kTableLen = 40;
constexpr int kStoreTokens = kRows;  // one new token per row
constexpr int kWrite = kRows;        // write pages first in the query

struct StepInputs {
  std::vector<std::int32_t> blocks;  // [rows, blocks]
  std::vector<std::int64_t> pos;     // [rows]
  std::vector<PageId> write_pages;   // [rows]
  std::vector<PageId> store_pages;
  std::vector<std::int32_t> store_tokens;
  std::vector<std::vector<std::byte>> src;  // [kind][tokens * token_bytes]
};

// Device buffers one layer-step reads and writes; fixed shapes.
struct StepBuffers {
  DeviceArray<std::int32_t> blocks{kRows * kBlocks};
  DeviceArray<std::int64_t> pos{kRows};
  DeviceArray<PageId> tables{kRows * kTableLen};
  DeviceArray<std::int64_t> table_len{kRows};
  DeviceArray<PageId> query{kWrite + kRows * kWidth};
  DeviceArray<SlotId> physical{kRows * kWidth};
  DeviceArray<int> counters{2};
  DeviceArray<PageId> store_pages{kStoreTokens};
  DeviceArray<std::int32_t> store_tokens{kStoreTokens};
  DeviceArray<std::byte> src[4];
};

void enqueue_step(MirrorEngine& e, StepBuffers& b, int layer, cudaStream_t s) {
  const std::byte* src[4] = {b.src[0].get(), b.src[1].get(), b.src[2].get(), b.src[3].get()};
  e.store_async(layer, b.store_pages.get(), b.store_tokens.get(), src, kStoreTokens, s);
  CompactParams cp{b.blocks.get(),
                   b.pos.get(),
                   b.tables.get(),
                   b.table_len.get(),
                   b.query.get() + kWrite,
                   b.counters.get(),
                   b.counters.get() + 1,
                   kRows,
                   kBlocks,
                   kTableLen,
                   kWidth,
                   4,
                   e.layout().page_size};
  launch_compact(cp, s);
  launch_advance_step(e.step(), s);
  e.ensure_async(layer, b.query.get(), kWrite + kRows * kWidth, s);
  e.translate_async(layer, b.query.get() + kWrite, kRows * kWidth, b.physical.get(), s);
}

StepInputs make_inputs(std::mt19937_64& rng, const PageLayout& L, int step) {
  StepInputs in;
  for (int r = 0; r < kRows; ++r) {
    const std::int64_t pos = std::int64_t{16} * step + r + 8;  // grows with the step
    in.pos.push_back(pos);
    std::vector<std::int32_t> b;
    const auto max_block = static_cast<std::int32_t>(pos / 4);
    for (int i = 0; i < kBlocks; ++i)
      b.push_back(std::uniform_int_distribution<std::int32_t>(-1, max_block)(rng));
    std::sort(b.begin(), b.end());
    in.blocks.insert(in.blocks.end(), b.begin(), b.end());
    in.store_pages.push_back(static_cast<PageId>(r * kTableLen + pos / L.page_size));
    in.store_tokens.push_back(static_cast<std::int32_t>(pos % L.page_size));
  }
  in.write_pages = in.store_pages;
  for (int k = 0; k < L.banks_per_layer; ++k) {
    std::vector<std::byte> v(
        static_cast<std::size_t>(kStoreTokens * L.token_bytes(PageLayout::kind_of(k))));
    for (auto& x : v)
      x = static_cast<std::byte>(rng() & 0xff);
    in.src.push_back(std::move(v));
  }
  return in;
}

void upload_inputs(StepBuffers& b, const StepInputs& in, cudaStream_t s) {
  KVT_CUDA_CHECK(cudaMemcpyAsync(b.blocks.get(), in.blocks.data(), b.blocks.bytes(),
                                 cudaMemcpyHostToDevice, s));
  KVT_CUDA_CHECK(
      cudaMemcpyAsync(b.pos.get(), in.pos.data(), b.pos.bytes(), cudaMemcpyHostToDevice, s));
  KVT_CUDA_CHECK(cudaMemcpyAsync(b.query.get(), in.write_pages.data(), kWrite * sizeof(PageId),
                                 cudaMemcpyHostToDevice, s));
  KVT_CUDA_CHECK(cudaMemcpyAsync(b.store_pages.get(), in.store_pages.data(), b.store_pages.bytes(),
                                 cudaMemcpyHostToDevice, s));
  KVT_CUDA_CHECK(cudaMemcpyAsync(b.store_tokens.get(), in.store_tokens.data(),
                                 b.store_tokens.bytes(), cudaMemcpyHostToDevice, s));
  for (std::size_t k = 0; k < in.src.size(); ++k)
    KVT_CUDA_CHECK(cudaMemcpyAsync(b.src[k].get(), in.src[k].data(), in.src[k].size(),
                                   cudaMemcpyHostToDevice, s));
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
}

void init_buffers(StepBuffers& b, const PageLayout& L) {
  std::vector<PageId> tables(kRows * kTableLen);
  for (int i = 0; i < kRows * kTableLen; ++i)
    tables[i] = i;  // row r owns pages r*40 .. r*40+39
  std::vector<std::int64_t> len(kRows, kTableLen);
  KVT_CUDA_CHECK(
      cudaMemcpy(b.tables.get(), tables.data(), b.tables.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(
      cudaMemcpy(b.table_len.get(), len.data(), b.table_len.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemset(b.counters.get(), 0, b.counters.bytes()));
  for (int k = 0; k < L.banks_per_layer; ++k)
    b.src[k] = DeviceArray<std::byte>(
        static_cast<std::size_t>(kStoreTokens * L.token_bytes(PageLayout::kind_of(k))));
}

template <class T>
std::vector<T> down(const T* d, std::size_t n) {
  std::vector<T> v(n);
  KVT_CUDA_CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

void graph_equals_eager(bool fp8, ResidencyUnit unit) {
  const PageLayout L = PageLayout::make(2, 8, 2, 16, fp8);
  const MirrorConfig cfg{L,
                         unit,
                         kRows * kTableLen,
                         kWrite + kRows * kWidth + 2,
                         kWrite + kRows * kWidth,
                         EnsureForm::block};
  MirrorEngine eager(cfg), graphed(cfg);
  StepBuffers be, bg;
  init_buffers(be, L);
  init_buffers(bg, L);
  cudaStream_t s;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraphExec_t exec[2];
  for (int layer = 0; layer < 2; ++layer) {
    cudaGraph_t g;
    KVT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    enqueue_step(graphed, bg, layer, s);
    KVT_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    KVT_CUDA_CHECK(cudaGraphInstantiate(&exec[layer], g, 0));
    KVT_CUDA_CHECK(cudaGraphDestroy(g));
  }
  std::mt19937_64 rng(fp8 ? 7 : 11);
  for (int step = 0; step < 12; ++step) {
    const int layer = step % 2;
    const StepInputs in = make_inputs(rng, L, step);
    upload_inputs(be, in, s);
    upload_inputs(bg, in, s);
    enqueue_step(eager, be, layer, s);
    KVT_CUDA_CHECK(cudaGraphLaunch(exec[layer], s));
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    SCOPED_TRACE("step " + std::to_string(step));
    const auto ce = down(eager.copy_count(), 1), cg = down(graphed.copy_count(), 1);
    ASSERT_EQ(ce, cg);
    EXPECT_EQ(down(eager.copies(), static_cast<std::size_t>(ce[0])),
              down(graphed.copies(), static_cast<std::size_t>(cg[0])));
    const auto re = down(eager.result(), 1), rg = down(graphed.result(), 1);
    EXPECT_EQ(re[0].lookups, rg[0].lookups);
    EXPECT_EQ(re[0].hits, rg[0].hits);
    EXPECT_EQ(re[0].misses, rg[0].misses);
    EXPECT_EQ(re[0].evictions, rg[0].evictions);
    EXPECT_EQ(re[0].status, EnsureStatus::ok);
    EXPECT_EQ(down(be.physical.get(), be.physical.size()),
              down(bg.physical.get(), bg.physical.size()));
    EXPECT_EQ(down(be.counters.get(), 2), down(bg.counters.get(), 2));
    for (int l = 0; l < 2; ++l)
      EXPECT_EQ(test::state_difference(eager, graphed, l), "");
  }
  for (int b = 0; b < L.banks(); ++b) {
    EXPECT_EQ(eager.download_pool_bank(b), graphed.download_pool_bank(b)) << "pool bank " << b;
    EXPECT_EQ(0, std::memcmp(eager.host().host(b), graphed.host().host(b),
                             static_cast<std::size_t>(eager.host().bank_bytes(b))))
        << "host bank " << b;
  }
  EXPECT_EQ(eager.read_counters().ensure_errors, 0);
  for (auto& e : exec)
    KVT_CUDA_CHECK(cudaGraphExecDestroy(e));
  KVT_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(Graph, ReplayEqualsEagerBf16PerLayer) {
  KVT_REQUIRE_GPU();
  graph_equals_eager(false, ResidencyUnit::layer_page);
}
TEST(Graph, ReplayEqualsEagerFp8AllLayers) {
  KVT_REQUIRE_GPU();
  graph_equals_eager(true, ResidencyUnit::all_layers_page);
}

}  // namespace
}  // namespace kvtier::cuda
