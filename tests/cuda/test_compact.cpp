// The block-scan compaction kernel gives compact_row's output, drop count and status count
// on random rows (ascending blocks with padding, unsorted rows, rows past their page table,
// widths that truncate), and so does the one-thread form.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <random>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"
#include "model/compaction.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

struct Rows {
  int rows, n_blocks, stride, width, ratio, page_size;
  std::vector<std::int32_t> blocks;
  std::vector<std::int64_t> pos, table_len;
  std::vector<PageId> tables;
};

Rows make_rows(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Rows r{};
  r.rows = uni(1, 9);
  r.n_blocks = uni(0, 700);
  r.ratio = 4;
  r.page_size = 4 * uni(1, 16);
  r.width = uni(1, 600);
  r.stride = uni(1, 400);
  for (int i = 0; i < r.rows; ++i) {
    const int len = uni(1, r.stride);
    r.table_len.push_back(len);
    const std::int64_t max_block = std::int64_t{len} * r.page_size / r.ratio;
    std::vector<std::int32_t> b;
    for (int j = 0; j < r.n_blocks; ++j)
      b.push_back(static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(
          0, max_block + (uni(0, 20) == 0 ? 40 : 0))(rng)));
    std::sort(b.begin(), b.end());
    const int kind = uni(0, 9);
    if (kind == 0 && b.size() > 2) std::swap(b[1], b[b.size() - 1]);  // unsorted
    for (auto& x : b)
      if (uni(0, 15) == 0) x = -1;  // padding, also in the middle
    r.blocks.insert(r.blocks.end(), b.begin(), b.end());
    r.pos.push_back(
        std::uniform_int_distribution<std::int64_t>(0, std::int64_t{len} * r.page_size - 1)(rng));
    for (int k = 0; k < r.stride; ++k)
      r.tables.push_back(static_cast<PageId>(uni(0, 100000)));
  }
  return r;
}

template <class T>
DeviceArray<T> up(const std::vector<T>& v) {
  DeviceArray<T> d(std::max<std::size_t>(v.size(), 1));
  if (!v.empty())
    KVT_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

struct Out {
  std::vector<PageId> pages;
  int dropped = 0, bad = 0;
  bool operator==(const Out&) const = default;
};

Out run_device(const Rows& r, bool block_form) {
  auto b = up(r.blocks);
  auto pos = up(r.pos);
  auto tl = up(r.table_len);
  auto tables = up(r.tables);
  DeviceArray<PageId> out(static_cast<std::size_t>(r.rows) * r.width);
  DeviceArray<int> counters(2);
  KVT_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  KVT_CUDA_CHECK(cudaMemset(out.get(), 0x5a, out.bytes()));  // poison
  CompactParams p{
      b.get(), pos.get(),  tables.get(), tl.get(), out.get(), counters.get(), counters.get() + 1,
      r.rows,  r.n_blocks, r.stride,     r.width,  r.ratio,   r.page_size};
  if (block_form) {
    launch_compact(p, nullptr);
  } else {
    launch_compact_core(p, nullptr);
  }
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  Out o;
  o.pages.resize(out.size());
  KVT_CUDA_CHECK(cudaMemcpy(o.pages.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
  int c[2];
  KVT_CUDA_CHECK(cudaMemcpy(c, counters.get(), sizeof c, cudaMemcpyDeviceToHost));
  o.dropped = c[0];
  o.bad = c[1];
  return o;
}

Out run_core(const Rows& r) {
  Out o;
  o.pages.resize(static_cast<std::size_t>(r.rows) * r.width);
  for (int i = 0; i < r.rows; ++i) {
    const RowCompaction c =
        compact_row(r.blocks.data() + std::int64_t{i} * r.n_blocks, r.n_blocks, r.pos[i], r.ratio,
                    r.page_size, r.tables.data() + std::int64_t{i} * r.stride, r.table_len[i],
                    r.width, o.pages.data() + std::int64_t{i} * r.width);
    o.dropped += c.dropped;
    o.bad += c.status != CompactStatus::ok ? 1 : 0;
  }
  return o;
}

TEST(Compaction, DeviceFormsEqualCompactRow) {
  KVT_REQUIRE_GPU();
  EXPECT_TRUE(rc::check("compaction == compact_row", [](std::uint64_t seed) {
    const Rows r = make_rows(seed);
    const Out core = run_core(r);
    RC_ASSERT(run_device(r, true) == core);
    RC_ASSERT(run_device(r, false) == core);
  }));
}

}  // namespace
}  // namespace kvtier::cuda
