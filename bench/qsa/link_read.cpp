// How fast the SMs read a decode row's selection over PCIe, by the shape of the reading grid:
// the host-placement attend reads 2051 tokens x 2 KV heads x (K, V) = 8,204 rows of 512 B from
// mapped host memory; link_read.cu's kernel reads the same rows (same random pages) and only
// checksums them, so the figures say what the link gives SM loads of each shape, with no
// attention around them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/qsa/graph_timing.hpp"
#include "bench/qsa/link_read.hpp"
#include "tests/qsa/qsa_gpu_runner.hpp"

namespace kvtier::qsa::bench {

void bench_link_reads() {
  using testing::Buf;
  // The attend benchmark's bank: 64-token pages of 2 KV heads x 512 B, K and V banks, a 64k
  // context on shuffled pages; here K and V are the two halves of one mapped buffer.
  const int ps = 64, context = 65536, width = 2051, kv_heads = 2, pages = context / ps;
  const std::int64_t bank_u4 = std::int64_t{pages} * ps * kv_heads * kLinkRowU4;
  Buf<std::uint8_t> bank(static_cast<std::size_t>(2 * bank_u4 * 16), true, true);
  std::mt19937 rng(11);
  std::vector<std::int32_t> perm(pages), toks(context);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::iota(toks.begin(), toks.end(), 0);
  std::shuffle(toks.begin(), toks.end(), rng);
  toks.resize(width);
  std::sort(toks.begin(), toks.end());
  // Row order as the attend's grid reads them: per KV head, the K then V rows of each token.
  std::vector<std::int64_t> scattered, adjacent;
  for (int h = 0; h < kv_heads; ++h)
    for (std::int32_t t : toks)
      for (int kv = 0; kv < 2; ++kv) {
        const std::int64_t row = (std::int64_t{perm[t / ps]} * ps + t % ps) * kv_heads + h;
        scattered.push_back(kv * bank_u4 + row * kLinkRowU4);
      }
  for (std::size_t i = 0; i < scattered.size(); ++i)
    adjacent.push_back(static_cast<std::int64_t>(i) * kLinkRowU4);
  Buf<std::int64_t> d_scattered(scattered.size()), d_adjacent(adjacent.size());
  d_scattered.upload(scattered);
  d_adjacent.upload(adjacent);
  Buf<unsigned> sink(1);
  const int rows = static_cast<int>(scattered.size());
  const double bytes = double(rows) * kLinkRowU4 * 16;

  std::printf("\nlink reads: %d rows of 512 B (%.2f MB) from mapped host memory, graph of 10\n",
              rows, bytes / 1e6);
  std::printf("%-44s %10s %10s\n", "shape", "time_us", "GB/s");
  auto report = [&](const std::string& what, double us) {
    std::printf("%-44s %10.2f %10.2f\n", what.c_str(), us, bytes / us / 1e3);
  };
  const std::vector<LinkShape> shapes = {
      {130, 128, 16, 0},  // the attend's gather: 65 splits x 2 KV heads, 4 warps, one tile
      {130, 128, 16, 1}, {130, 128, 16, 2}, {130, 128, 8, 0},  {130, 128, 32, 0},
      {130, 256, 8, 0},  {260, 128, 8, 0},  {264, 256, 4, 0},  {528, 256, 4, 0},
      {66, 128, 32, 0},  {132, 512, 4, 0},  {1056, 128, 4, 0}, {264, 128, 16, 0}};
  for (int pass = 0; pass < 2; ++pass)
    for (const LinkShape& s : shapes) {
      const std::string what = std::to_string(s.ctas) + " CTAs x " + std::to_string(s.threads) +
                               " thr x " + std::to_string(s.in_flight) + " loads, form " +
                               std::to_string(s.form);
      report(what + " scattered", graph_us_per_call(
                                      [&](int, cudaStream_t st) {
                                        launch_link_read(s, bank.get(), d_scattered.get(), rows,
                                                         sink.get(), st);
                                      },
                                      10, 30));
      if (pass == 0 && s.form == 0 && (s.in_flight == 16 || s.ctas >= 264))
        report(what + " adjacent", graph_us_per_call(
                                       [&](int, cudaStream_t st) {
                                         launch_link_read(s, bank.get(), d_adjacent.get(), rows,
                                                          sink.get(), st);
                                       },
                                       10, 30));
    }
  Buf<std::uint8_t> dev(static_cast<std::size_t>(bytes));
  report("cudaMemcpyAsync H2D, contiguous",
         graph_us_per_call(
             [&](int, cudaStream_t st) {
               KVT_CUDA_CHECK(cudaMemcpyAsync(
                   dev.get(), bank.get(), static_cast<std::size_t>(bytes), cudaMemcpyDefault, st));
             },
             10, 30));
  KVT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvtier::qsa::bench
