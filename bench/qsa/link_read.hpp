#pragma once
// What the link gives SM loads of a decode row's selection, by the reading grid's shape
// (bench_qsa link; bench/results/qsa-h200.md).
#include <cuda_runtime.h>

#include <cstdint>

namespace kvtier::qsa::bench {

constexpr int kLinkRowU4 = 32;  // one 512-byte bank row in 16-byte loads

// A reading grid: CTAs x threads, each thread with `in_flight` 16-byte loads issued before it
// folds them (4, 8, 16, 32), in load form `form` (0 plain, 1 ld.global.nc L1::no_allocate,
// 2 plain with the L2::256B prefetch hint; 1 and 2 with 16 loads only).
struct LinkShape {
  int ctas, threads, in_flight, form;
};

// Reads `rows` 512-byte rows at the 16-byte offsets rows_u4 of `bank` (mapped host memory).
void launch_link_read(const LinkShape& s, const void* bank, const std::int64_t* rows_u4, int rows,
                      unsigned* sink, cudaStream_t st);

// Prints one table: time and GB/s per shape (graph replay), and cudaMemcpyAsync of the same
// bytes contiguous.
void bench_link_reads();

}  // namespace kvtier::qsa::bench
