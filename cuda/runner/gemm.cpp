#include "cuda/runner/gemm.hpp"

#include "cuda/cuda_check.hpp"

#include <stdexcept>
#include <string>

#include "cuda/runner/mma_gemm.hpp"
#include "cuda/runner/skinny_gemm.hpp"
#include "model/cost_model.hpp"

namespace kvtier::runner {

namespace {

// Which kernel takes a projection of `rows` rows, by one rule for all three entries below:
//   1 row       : skinny_gemm (CUDA cores: one row's products need no tensor-core tile);
//   2 .. 64 rows: mma_gemm (tensor cores; a group of matrices in one launch);
//   more rows   : cuBLAS (prefill chunks: compute-bound tiles are cuBLAS's ground).
// Why mma_gemm from 2 rows (bench_projections on the H200, 2026-12-02: bench/results/
// projections-h200-2026-12-02.md): skinny_gemm's time grows with the rows (the grouped six 21.0 us
// at 1 row, 29.3 at 4, 50.0 at 8; the output projection 12.6, 15.3, 31.9), while mma_gemm's stays
// near one read of W (23.8 - 24.5 us and 12.8 - 13.0 at 1 - 8 rows). At 2 rows the two tie on the
// grouped six and mma_gemm is 0.8 us ahead on the output projection; at 1 row skinny_gemm is 2.8 us
// ahead. Why not cuBLAS for 2 - 64 rows (bench/results/projections-h200-2026-12-01.md): in the
// runner at 16 rows its projections cost 10.6 ms a decode step (eager) and, replayed as a
// graph, 4.3 ms a step more than mma_gemm's, against 0.2 ms more for the same calls timed alone;
// its first call of each kernel takes 2 - 116 ms; and the six projections of a layer are six
// launches (48 us against 26 at 16 rows). Alone, cuBLAS is still faster on a single large matrix
// (the output projection: 12 - 13 us against 14 - 24), a gap left open. Past 64 rows mma_gemm would
// re-read x too often (rows / 64 bytes a byte of W), and the products near the compute bound.
enum class Path { skinny, mma, cublas };
// The cost model prices the two sides of this boundary with their own terms.
static_assert(kMmaMaxRows == kNarrowProjectionRows);

Path path_for(int rows, int in) {
  if (rows <= kGemmSkinnyRows && skinny_gemm_fits(rows, in)) return Path::skinny;
  if (mma_gemm_fits(rows, in)) return Path::mma;
  return Path::cublas;
}

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
  switch (path_for(rows, in)) {
    case Path::skinny:
      return skinny_gemm(x, w, rows, in, out, y, false, false, s_);
    case Path::mma:
      return mma_gemm(x, w, rows, in, out, y, false, false, s_);
    case Path::cublas:
      return gemm(h_, x, w, rows, in, out, y, CUDA_R_16BF, 0.0f);
  }
}

void Gemm::bf16_out_group(const std::uint16_t* x, int rows, int in,
                          std::span<const ProjectionOutput> outputs) {
  switch (path_for(rows, in)) {
    case Path::skinny:
      return skinny_gemm_group(x, rows, in, outputs, s_);
    case Path::mma:
      return mma_gemm_group(x, rows, in, outputs, s_);
    case Path::cublas:
      for (const ProjectionOutput& o : outputs)
        gemm(h_, x, o.w, rows, in, o.out, o.y, CUDA_R_16BF, 0.0f);
  }
}

void Gemm::f32_out(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out,
                   float* y, bool accumulate) {
  switch (path_for(rows, in)) {
    case Path::skinny:
      return skinny_gemm(x, w, rows, in, out, y, true, accumulate, s_);
    case Path::mma:
      return mma_gemm(x, w, rows, in, out, y, true, accumulate, s_);
    case Path::cublas:
      return gemm(h_, x, w, rows, in, out, y, CUDA_R_32F, accumulate ? 1.0f : 0.0f);
  }
}

}  // namespace kvtier::runner
