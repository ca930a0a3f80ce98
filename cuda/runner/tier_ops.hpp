#pragma once
// Kernels of the model runner that serve the placements rather than the model: the union of
// a prefill chunk's selections (what residency must cover for it, the trace's row
// selection), staging windows for prefill from the host bank, deterministic fill of K/V and
// index keys (`--fill-depth`) and of stand-in weights, and row gathers. Launchers never
// synchronise and return early when there is no work.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kvtier::runner {

// The union of the selected blocks of each group of consecutive query rows (one group per
// trace row: a request's rows in the forward), as an ascending list per group:
// blocks [rows][k] (-1 padded); group_of_row [rows]; lists [groups][list_stride] (-1 padded,
// list_stride >= max_blocks); counts [groups]. bitmap: scratch of
// union_bitmap_words(groups, max_blocks) words (cleared here).
std::int64_t union_bitmap_words(int groups, std::int64_t max_blocks);
void union_selections(const std::int32_t* blocks, int k, int rows, const std::int32_t* group_of_row,
                      int groups, std::int64_t max_blocks, std::uint32_t* bitmap,
                      std::int32_t* lists, std::int64_t list_stride, std::int32_t* counts,
                      cudaStream_t s);

// One staging window of request q: table [requests][stride] with entry (q, i) = i - p0 for
// pages p0 <= i < p1 and -1 everywhere else (other requests read nothing through it).
void window_table(int requests, std::int64_t stride, int q, std::int64_t p0, std::int64_t p1,
                  std::int32_t* table, cudaStream_t s);
// tokens_out [rows][width] = the row's token when the row belongs to request q and the token
// lies in [t0, t1), else -1.
void window_tokens(const std::int32_t* tokens, int width, const std::int32_t* row_req, int rows,
                   int q, std::int64_t t0, std::int64_t t1, std::int32_t* out, cudaStream_t s);

// Page gather over up to four banks: destination page i <- source page pages[i] of each bank
// (page_bytes[b] bytes, a multiple of 16; both sides 16-byte aligned). Source pages read as
// device-mapped host memory in 16-byte loads, n pages in one launch.
struct BankPair {
  const std::byte* src[4] = {};
  std::byte* dst[4] = {};
  std::int64_t page_bytes[4] = {};
  int banks = 0;
};
void gather_pages(const BankPair& b, const std::int32_t* pages, std::int64_t n, cudaStream_t s);

// Deterministic bf16 values uniform in [-scale, scale): element (r, d) of out [rows][dim]
// from (row0 + r, d, salt). The same arguments give the same bits on any device.
void hash_bf16(std::uint16_t* out, std::int64_t rows, int dim, std::int64_t row0,
               std::uint64_t salt, float scale, cudaStream_t s);
// The same values as fp32 (fill of the compress ring).
void hash_f32(float* out, std::int64_t rows, int dim, std::int64_t row0, std::uint64_t salt,
              float scale, cudaStream_t s);
// out [n] = v (device int32 arrays of a fill chunk: positions, request ids).
void iota_i32(std::int32_t* out, std::int64_t n, std::int32_t first, cudaStream_t s);
void fill_i32(std::int32_t* out, std::int64_t n, std::int32_t v, cudaStream_t s);

// out fp32 [n][cols] = x fp32 rows idx[i] (device index list).
void gather_rows(const float* x, const std::int32_t* idx, int n, int cols, float* out,
                 cudaStream_t s);

// out bf16 [count] = silu(gate) * up, fp32 math (the stand-in MLP).
void silu_mul(const std::uint16_t* gate, const std::uint16_t* up, std::int64_t count,
              std::uint16_t* out, cudaStream_t s);

}  // namespace kvtier::runner
