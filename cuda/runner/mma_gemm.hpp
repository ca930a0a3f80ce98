#pragma once
// Projections of up to 64 rows on tensor cores (batched decode, short prefill chunks):
// y [rows][out] = x [rows][in] . W^T, W [out][in] bf16 row-major, fp32 accumulation.
//
// Below ~200 rows these products are bound by reading W once from HBM (2 bytes a weight,
// 2 x rows FLOP a weight). The skinny GEMM (CUDA cores) keeps up with that at one row; by 8 rows it
// takes twice mma_gemm's time (gemm.cpp has the figures); at 64 rows the weights must be consumed
// at ~300 TFLOP/s, which only the tensor cores give. So W is the mma's large operand (A: 16 output
// columns a tile) and x the small one (B: 8 rows a tile): the warps of a block stream neighbouring
// weight rows from HBM through shared memory (cp.async), share the chunk of x beside them, and run
// mma.sync m16n8k16 (bf16 in, fp32 accumulate); a cluster of blocks splits K and adds its partial
// sums through distributed shared memory, in block order (mma_gemm.cu).
//
// Bits: for a given k_split, an output depends on its x row, its W row and `in` alone: not on
// the other rows or their number (the mma adds each (row, column) product chain on its own), nor
// on the column tiles or the matrices grouped with it. Same inputs, same bits, run to run.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "cuda/runner/projection_output.hpp"

namespace kvtier::runner {

inline constexpr int kMmaMaxRows = 64;

// How a launch is cut: each warp computes col_tiles x 16 output columns for every row over one
// of k_split contiguous slices of K; a block is 4 warps of neighbouring columns on one slice, a
// cluster the k_split blocks of one column range.
struct MmaTiling {
  int col_tiles = 1;  // 1 or 2
  int k_split = 1;    // 1, 2, 4 or 8
};

// The tiling mma_gemm and mma_gemm_group use for these matrices (mma_gemm.cu says why): it
// follows the rows, `in` and the matrices' columns.
MmaTiling mma_gemm_tiling(int rows, int in, std::span<const ProjectionOutput> outputs);

// Whether mma_gemm takes this shape: 1 <= rows <= kMmaMaxRows, in > 0 and in % 8 == 0
// (16-byte loads). x, W and y must be 16-byte aligned (cudaMalloc; rows of x at in % 8 == 0).
bool mma_gemm_fits(int rows, int in);
// y bf16 (f32_out false) or fp32 (+= y when accumulate).
void mma_gemm(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, void* y,
              bool f32_out, bool accumulate, cudaStream_t s);
// Every y_j = x . W_j^T of up to kProjectionMaxGroup matrices in one launch (bf16 outputs): the
// bits of one mma_gemm_tiled per matrix with the group's tiling.
void mma_gemm_group(const std::uint16_t* x, int rows, int in,
                    std::span<const ProjectionOutput> outputs, cudaStream_t s);
// The same with a tiling of the caller's (benchmarks compare tilings; bits follow k_split).
void mma_gemm_tiled(const std::uint16_t* x, int rows, int in,
                    std::span<const ProjectionOutput> outputs, bool f32_out, bool accumulate,
                    MmaTiling t, cudaStream_t s);

}  // namespace kvtier::runner
