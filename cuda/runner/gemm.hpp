#pragma once
// The runner's projections: y [rows][out] = x [rows][in] . W^T with W [out][in] row-major
// (the safetensors layout), bf16 inputs, fp32 accumulation; y bf16, or fp32 with an optional
// accumulate (y += ..., the residual add of the output projection). By rows (gemm.cpp says
// why): up to kGemmSkinnyRows skinny_gemm, up to kMmaMaxRows mma_gemm, beyond that cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "cuda/runner/mma_gemm.hpp"
#include "cuda/runner/projection_output.hpp"
#include "cuda/runner/skinny_gemm.hpp"

namespace kvtier::runner {

// The rows up to which Gemm takes skinny_gemm (which itself takes up to kSkinnyMaxRows).
inline constexpr int kGemmSkinnyRows = 1;

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void set_stream(cudaStream_t s);
  // y bf16 [rows][out] = x . W^T
  void bf16_out(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out,
                std::uint16_t* y);
  // every y_j bf16 [rows][out_j] = x . W_j^T: one launch up to kMmaMaxRows rows
  void bf16_out_group(const std::uint16_t* x, int rows, int in,
                      std::span<const ProjectionOutput> outputs);
  // y fp32 [rows][out] = x . W^T (+ y when accumulate)
  void f32_out(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, float* y,
               bool accumulate);

 private:
  cublasHandle_t h_ = nullptr;
  cudaStream_t s_ = nullptr;
  void* workspace_ = nullptr;  // fixed, so that captured forwards never allocate
};

}  // namespace kvtier::runner
