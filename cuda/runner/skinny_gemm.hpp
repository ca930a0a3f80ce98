#pragma once
// Projections of a few rows (decode): y [rows][out] = x [rows][in] . W^T, W [out][in] bf16
// row-major, fp32 accumulation. One warp per output column reads its row of W once for every
// row of x, so the weights stream at HBM speed at one row (80 % of a device copy's rate on the
// H200), less with every row (34 % at 8: bench/results/projections-h200-2026-12-01.md); cuBLAS's
// choice for these shapes is several times slower (bench/results/kernel-choices.md).
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "cuda/runner/projection_output.hpp"

namespace kvtier::runner {

inline constexpr int kSkinnyMaxRows = 8;

// Whether skinny_gemm takes this shape: 1 <= rows <= kSkinnyMaxRows and in % 8 == 0
// (16-byte loads); pointers from cudaMalloc.
bool skinny_gemm_fits(int rows, int in);
// y bf16 (f32_out false) or fp32 (+= y when accumulate).
void skinny_gemm(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, void* y,
                 bool f32_out, bool accumulate, cudaStream_t s);
// Every y_j = x . W_j^T of up to kProjectionMaxGroup matrices in one launch (bf16 outputs), with
// the same bits as one skinny_gemm per matrix.
void skinny_gemm_group(const std::uint16_t* x, int rows, int in,
                       std::span<const ProjectionOutput> outputs, cudaStream_t s);

}  // namespace kvtier::runner
