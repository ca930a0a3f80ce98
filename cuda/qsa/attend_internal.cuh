#pragma once
// Shared between the attend translation units (attend_fold.cu: entry points, fp8 SIMT kernel,
// merge, fold; attend_mma.cu: the tensor-core kernel). Not a public header.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "cuda/cuda_check.hpp"
#include "cuda/qsa/qsa_common.cuh"

namespace kvtier::qsa::detail {

constexpr int kAttWarps = 4;  // warps per KV head of a CTA
constexpr int kAttThreads = kAttWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -__builtin_huge_valf();

struct AttendParams {
  const std::uint16_t* q;
  int q_heads;
  Rows rows;
  const std::int32_t* tokens;
  int width;
  KvBanks kv;
  PageTable table;
  int splits;
  float* work_acc;  // [rows][q_heads][splits][256]
  float* work_ml;   // [rows][q_heads][splits][2]
  // Tensor-core kernel only: launched as a programmatic dependent of the kernel before it
  // (attend_fold.cu: early_launch_pays); its CTAs start while that kernel finishes and wait
  // (griddepcontrol.wait) before their first read of anything it may have written.
  bool early = false;
};

// kernel<<<grid, block, smem, s>>>(args...) launched as a programmatic dependent of the kernel
// before it in s: it may start before that kernel ends, so it must wait (griddepcontrol.wait)
// before it reads what that kernel writes. Throws CudaError if the launch fails.
template <class... Params, class... Args>
void launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                         cudaStream_t s, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  KVT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

// The tensor-core attend (bf16 banks, GQA group 12), attend_mma.cu: one CTA of 4 warps per
// (KV head, split, row). async: cp.async gather (else 16-byte register loads, double-buffered
// in registers); either gathers p.table.in_place rows. Both gathers give the same bits.
void launch_attend_tc(const AttendParams& p, bool async, cudaStream_t s);

}  // namespace kvtier::qsa::detail
