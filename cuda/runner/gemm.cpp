#include "cuda/runner/gemm.hpp"

#include "cuda/cuda_check.hpp"

#include <stdexcept>
#include <string>

#include "cuda/runner/skinny_gemm.hpp"

namespace kvtier::runner {

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error ") + cublasGetStatusName(st) + " in " +
                             what);
}

// Row-major y [rows][out] is column-major y' [out][rows] = W x^T, where row-major W [out][in] is
// column-major W' [in][out] (so W = W'^T) and row-major x [rows][in] is column-major x' [in][rows].
void gemm(cublasHandle_t h, const std::uint16_t* x, const std::uint16_t* w, int rows, int in,
          int out, void* y, cudaDataType_t yt, float beta) {
  if (rows <= 0 || out <= 0) return;
  const float alpha = 1.0f;
  check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w, CUDA_R_16BF, in, x,
                     CUDA_R_16BF, in, &beta, y, yt, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

}  // namespace

Gemm::Gemm() {
  check(cublasCreate(&h_), "cublasCreate");
  KVT_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  check(cublasSetWorkspace(h_, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
}

Gemm::~Gemm() {
  if (h_) cublasDestroy(h_);
  if (workspace_) cudaFree(workspace_);
}

void Gemm::set_stream(cudaStream_t s) {
  s_ = s;
  check(cublasSetStream(h_, s), "cublasSetStream");
  // cublasSetStream resets the workspace to the default pool
  check(cublasSetWorkspace(h_, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
}

void Gemm::bf16_out(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out,
                    std::uint16_t* y) {
  if (skinny_gemm_fits(rows, in)) return skinny_gemm(x, w, rows, in, out, y, false, false, s_);
  gemm(h_, x, w, rows, in, out, y, CUDA_R_16BF, 0.0f);
}

void Gemm::bf16_out_group(const std::uint16_t* x, int rows, int in,
                          std::span<const SkinnyOutput> outputs) {
  if (skinny_gemm_fits(rows, in)) return skinny_gemm_group(x, rows, in, outputs, s_);
  for (const SkinnyOutput& o : outputs)
    gemm(h_, x, o.w, rows, in, o.out, o.y, CUDA_R_16BF, 0.0f);
}

void Gemm::f32_out(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out,
                   float* y, bool accumulate) {
  if (skinny_gemm_fits(rows, in)) return skinny_gemm(x, w, rows, in, out, y, true, accumulate, s_);
  gemm(h_, x, w, rows, in, out, y, CUDA_R_32F, accumulate ? 1.0f : 0.0f);
}

}  // namespace kvtier::runner
