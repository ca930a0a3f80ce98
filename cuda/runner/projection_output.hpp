#pragma once
// One matrix of a grouped projection: the runner's projections that read the same normed
// hidden state x (q, k, v, index q / k, gate; the stand-in MLP's gate and up) run as one launch
// of the projection kernels (skinny_gemm, mma_gemm), each matrix a range of the grid.
#include <cstdint>

namespace kvtier::runner {

// Most matrices in one grouped launch (the runner groups six).
inline constexpr int kProjectionMaxGroup = 8;

// W [out][in] bf16 row-major (the safetensors layout), y bf16 [rows][out].
struct ProjectionOutput {
  const std::uint16_t* w;
  int out;
  void* y;
};

}  // namespace kvtier::runner
