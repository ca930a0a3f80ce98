#pragma once
// The small element-wise kernels of the QSA model runner (everything that is not a projection
// or a QSA kernel): embedding gather, zero-centred RMSNorm, sigmoid output gate, greedy argmax.
// bf16 travels as its 16-bit code. Launchers never synchronise and return early on no work.
#include <cuda_runtime.h>

#include <cstdint>

namespace kvtier::runner {

// out fp32 [rows][hidden] = table bf16 [vocab][hidden] row tokens[r] (tokens device int32).
void embed(const std::uint16_t* table, const std::int32_t* tokens, int rows, int hidden, float* out,
           cudaStream_t s);

// out bf16 [rows][n] = x / sqrt(mean(x^2) + eps) * (1 + w), x fp32 [rows][n], w bf16 [n];
// statistics in fp32, one CTA per row.
void rms_norm(const float* x, const std::uint16_t* w, int rows, int n, float eps,
              std::uint16_t* out, cudaStream_t s);

// out bf16 [count] = o fp32 * sigmoid(gate bf16), element-wise.
void gate_mul(const float* o, const std::uint16_t* gate, std::int64_t count, std::uint16_t* out,
              cudaStream_t s);

// out [rows] = index of the largest of logits fp32 [rows][n] (NaN as -inf, ties to the lower
// index), one CTA per row.
void argmax(const float* logits, int rows, int n, std::int32_t* out, cudaStream_t s);

}  // namespace kvtier::runner
