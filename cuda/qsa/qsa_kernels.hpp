#pragma once
// The QSA attention kernels (issue 6; docs/architecture.md). Plain device pointers and strides
// only: no class of the residency backend. bf16 tensors travel as their 16-bit codes
// (std::uint16_t), fp8 pages as e4m3 codes (std::uint8_t) plus fp32 scales.
//
// Row conventions, shared by every kernel: a batch holds `rows` query rows; row r belongs to
// request row_req[r] at position row_pos[r]. The rows of one request are consecutive with
// consecutive positions. Per-request page tables map a logical page (pos / page_size) to a
// physical page id of the banks; kNoPage (-1) reads the dummy page and is never written.
// Every entry point validates its shapes (throws std::invalid_argument naming the value),
// returns early when there is no work, never synchronises and is safe inside a CUDA graph.
#include <cuda_runtime.h>

#include "cuda/cuda_check.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvtier::qsa {

// Multiprocessors of the current device, asked once (grids sized per SM: the QSA kernels, the
// residency kernels, kvtier run). Throws CudaError when the device cannot be asked.
inline int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    KVT_CUDA_CHECK(cudaGetDevice(&dev));
    KVT_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}

constexpr int kHeadDim = 256;   // attention head dim (the one compiled size)
constexpr int kIndexDim = 128;  // indexer head dim (the one compiled size)
constexpr int kMaxRopeHalf = 64;
constexpr float kFp8Max = 448.0f;
constexpr float kFp8ScaleFloor = 1e-12f;  // scale = max(amax / 448, floor)

// Rotary table: inverse frequencies (fp64) of the partial NeoX RoPE, YaRN already applied.
struct Rope {
  int rope_dims = 64;  // rotated leading dims of a head (even, <= 2 * kMaxRopeHalf)
  double inv_freq[kMaxRopeHalf] = {};
  double attention_factor = 1.0;  // YaRN mscale on cos / sin
};
Rope make_rope(int rope_dims, double theta, bool yarn, double yarn_factor = 4.0,
               double yarn_original_max = 262144.0);

// The paged K/V banks of one layer (PageLayout of model/page_layout.hpp: [page][token][kv_head]
// [head_dim] codes, [page][token][kv_head] fp32 scales for fp8).
struct KvBanks {
  void* k = nullptr;  // codes
  void* v = nullptr;
  float* k_scale = nullptr;  // fp8 only
  float* v_scale = nullptr;
  bool fp8 = false;
  int page_size = 64;
  int kv_heads = 2;
  bool host = false;  // the banks are mapped host memory (read in place over the link)
};
struct PageTable {
  const std::int32_t* pages = nullptr;  // [requests][stride] physical page ids, -1 = none
  std::int64_t stride = 0;
  std::int32_t dummy = 0;  // physical page read for padding / -1 entries (zeroed)
  // attend only: with in_place.k set, an entry e <= -2 names page -2 - e of these banks (same
  // layout and dtype as the table's banks), read in place: the mirror's pages that are not
  // resident yet, and those of rows that bypass the pool, from the host bank
  // (model/translate.hpp, locate_pages). Unset: such entries read the dummy page.
  KvBanks in_place{};
  // With in_place set: most of what the attend reads is in place (rows that bypass the pool),
  // so the bf16 kernel gathers every entry by register loads, the host banks' form. Its cp.async
  // gather reads host memory at ~30 GB/s against ~50 for register loads (H200: one row in place,
  // 162 against 103 us, bench/results/kernel-choices.md; a mirror prefill layer of 8 bypassing
  // rows, 3.1 against 1.8 ms), and device memory faster. Same bits either way.
  bool mostly_in_place = false;
};
struct Rows {
  const std::int32_t* req = nullptr;  // [rows]
  const std::int32_t* pos = nullptr;  // [rows]
  int count = 0;
};

// RoPE in place on bf16 [rows][heads][kKHeadDim-or-any dim] at each row's position.
void rope_inplace(std::uint16_t* x, int heads, int head_dim, Rows rows, const Rope& rope,
                  cudaStream_t s);

// Index queries: each of the heads zero-centred RMSNormed with weight (+1), rotated at pos:
// raw bf16 [rows][heads][128] -> out bf16 [rows][heads][128].
void index_queries(const std::uint16_t* raw, const float* norm_weight, int heads, float eps,
                   Rows rows, const Rope& rope, std::uint16_t* out, cudaStream_t s);

// Store K (rotated) and V bf16 [rows][kv_heads][256] into the pages (bf16 copy, or fp8 codes +
// scales). `mirror` (optional, banks.k == nullptr to skip) is written through as well with the
// same bytes, through its own table (e.g. logical ids into a mapped host bank).
void store_kv(const std::uint16_t* k, const std::uint16_t* v, Rows rows, const KvBanks& dst,
              const PageTable& dst_table, const KvBanks& mirror, const PageTable& mirror_table,
              cudaStream_t s);

// The requests of a forward as compress sees them: rows [row_begin, row_begin + row_count) of the
// batch hold the request's positions pos_begin .. pos_begin + row_count - 1.
struct CompressRequests {
  const std::int32_t* row_begin = nullptr;  // [requests]
  const std::int32_t* row_count = nullptr;
  const std::int32_t* pos_begin = nullptr;
  int requests = 0;
};
// Closes every group of `ratio` (= 4) positions a row ends (pos % 4 == 3): fp32 mean of the raw
// index keys (bf16 [rows][128]; members from earlier forwards read from ring [requests][4][128]
// fp32 at slot pos % 4), norm, RoPE at the group's first position -> slab bf16
// [requests][slab_stride][128] row pos / 4. Then updates the ring with this forward's open
// group members (a second launch, so no row reads a slot being written).
void compress(const std::uint16_t* raw_keys, Rows rows, const CompressRequests& fwd,
              const float* norm_weight, float eps, const Rope& rope, float* ring,
              std::uint16_t* slab, std::int64_t slab_stride, cudaStream_t s);

// Index logits of each row: logits[r][b] = sum_h relu(q_h . k_b) / sqrt(128) for blocks
// b < (pos + 1) / 4, fp32, in a [rows][logit_stride] workspace (entries beyond are not
// written). Tiles of rows of one request run on tensor cores (bf16 in, fp32 accumulate).
// `max_blocks` bounds the visible blocks of every row (grid size). With 4 heads, a row scored
// in a batch of at most 16 rows, or in a batch whose requests have at most 16 rows each
// (`rows_per_request`, the most any request has; 0: not known), gets the bits it gets in a
// prefill tile of its request's rows; rows of batches beyond that whose tiles span several
// requests are scored on the CUDA cores.
void index_scores(const std::uint16_t* iq, int heads, Rows rows, const std::uint16_t* slab,
                  std::int64_t slab_stride, float* logits, std::int64_t logit_stride,
                  std::int64_t max_blocks, cudaStream_t s, int rows_per_request = 0);

// Exact top-k of each row's first n_valid logits as a set (NaN counts as -inf; ties to the
// lower block id), ascending, padded with -1: out [rows][k]. n_valid per row from `n_valid`
// or, when null, (pos + 1) / ratio. Radix select over the fp32 keys: up to 16 rows, one
// launch of a cluster of CTAs per row with the keys in shared memory (topk_cluster.cu);
// more rows, one CTA per row.
void topk(const float* logits, std::int64_t logit_stride, const std::int32_t* n_valid, Rows rows,
          int ratio, int k, std::int32_t* out, cudaStream_t s);

// The same selection (identical output) for long rows: up to 16 rows whose CTA slices stay
// within 32k keys take the cluster kernel (no use of `work`); otherwise several CTAs per row,
// chunks of 8192 keys, five launches after a memset of `work` (topk_workspace_bytes(rows,
// max_n) bytes, 4-byte aligned). `max_n` bounds every row's n_valid (rows are clamped to it);
// graph-safe.
std::int64_t topk_workspace_bytes(int rows, std::int64_t max_n);
void topk(const float* logits, std::int64_t logit_stride, const std::int32_t* n_valid, Rows rows,
          int ratio, int k, std::int32_t* out, void* work, std::int64_t max_n, cudaStream_t s);

// Token positions per row: block * ratio + {0..ratio-1} for each chosen block, then the causal
// tail of pos, padded with -1: tokens [rows][width], width >= k * ratio + ratio - 1.
void expand(const std::int32_t* blocks, int k, Rows rows, int ratio, std::int32_t* tokens,
            int width, cudaStream_t s);

// Sparse paged GQA attention: q bf16 [rows][q_heads][256] (rotated) over each row's tokens
// (-1 skipped), K/V through the page table of the row's request; softmax scale 1/sqrt(256)
// folded with log2 e into exp2. Split over the tokens in `splits` CTAs per (row, KV head),
// merged by fp32 log-sum-exp. Outputs o fp32 [rows][q_heads][256] and, when lse != null, the
// base-2 LSE [rows][q_heads] (-inf for a row with no token). `work` must hold
// attend_workspace_floats(rows, q_heads, splits) floats.
//
// bf16 banks run on tensor cores (mma.sync bf16: exact bf16 products, fp32 accumulation, the
// probabilities as a bf16 hi + lo pair), the tiles gathered by cp.async from device banks and
// by 16-byte register loads from host banks (kv.host: the register gather reads the link
// faster, cp.async reads HBM faster); both gathers give the same bits. fp8 banks run on the
// SIMT kernel (fp32).
enum class AttendVariant { mma_async, mma_load };
// The bf16 kernel attend runs for banks in host (true) or device memory.
AttendVariant attend_bf16_kernel(bool host_banks);
std::int64_t attend_workspace_floats(int rows, int q_heads, int splits);
int attend_default_splits(int rows, int kv_heads, int width);
void attend(const std::uint16_t* q, int q_heads, Rows rows, const std::int32_t* tokens, int width,
            const KvBanks& kv, const PageTable& table, int splits, float* work, float* o,
            float* lse, cudaStream_t s);
// The attend's last step, for tests: merges the partials in `work` (as attend leaves them, rows x
// q_heads x splits) into o and lse, in `slices` blocks per (row, head), 1 or 4; both give the
// same bits. attend takes merge_default_slices: 4 for rows of more splits than one block holds
// (72) when there are fewer (row, head) pairs than SMs, whose few blocks would otherwise each
// walk all of a head's partials; else 1.
int merge_default_slices(int rows, int q_heads, int splits);
void merge(const float* work, int rows, int q_heads, int splits, float* o, float* lse, int slices,
           cudaStream_t s);

// Folds a pass (o, lse) over a disjoint token window into the accumulator (acc_o, acc_lse),
// all fp32 [rows][heads][256] and [rows][heads]. An accumulator starts at lse = -inf.
void fold(float* acc_o, float* acc_lse, const float* o, const float* lse, int rows, int heads,
          cudaStream_t s);
// Sets an accumulator to the empty pass (o = 0, lse = -inf).
void fold_reset(float* acc_o, float* acc_lse, int rows, int heads, cudaStream_t s);

}  // namespace kvtier::qsa
