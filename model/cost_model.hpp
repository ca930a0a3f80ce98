#pragma once
#include <cmath>
#include <cstdint>

#include "model/hardware_profile.hpp"
#include "model/kv_dtype.hpp"

namespace kvtier {

// The runner's projections take its own GEMMs up to this many rows and cuBLAS past it
// (cuda/runner/gemm.cpp, kMmaMaxRows, which asserts the two equal): the profile prices the two
// with their own terms.
inline constexpr std::int64_t kNarrowProjectionRows = 64;

// Which top-k kernel the runner runs over a layer's `rows` rows whose longest sees
// `max_blocks` blocks (cuda/runner/runner_layer.cpp and qsa::topk, which assert these values):
// up to kTopkClusterRows rows a cluster of CTAs per row (for the longest rows the multi-CTA
// chain, which the same term prices); from kTopkOneCtaRows rows whose blocks all fit
// kTopkOneCtaBlocks, one CTA per row; otherwise the multi-CTA chain (a memset and five
// launches). Each has its own terms.
enum class TopkPath : std::uint8_t { cluster, one_cta, chain };
// Which index-scoring kernel (qsa::index_scores, which asserts these values): the decode
// kernel for up to kIndexDecodeRows rows, or for requests of at most kIndexDecodeRows rows
// each (batched decode); the prefill kernel's 128-row tiles of one request otherwise.
enum class IndexPath : std::uint8_t { decode, prefill };
inline constexpr std::int64_t kIndexDecodeRows = 16;
constexpr IndexPath index_path(std::int64_t rows, std::int64_t rows_per_request) {
  return rows <= kIndexDecodeRows || rows_per_request <= kIndexDecodeRows ? IndexPath::decode
                                                                          : IndexPath::prefill;
}
// The residency step compacts up to this many rows by groups of warps, more one warp a row
// (cuda/step_compaction.cuh, which takes its form by it): the step beside has a piece for each.
inline constexpr std::int64_t kStepGroupedRows = 8;
// The mirror's residency step beside the attention runs on this many blocks of 1,024 threads,
// each a whole multiprocessor (MirrorEngine::kBesideBlocks), or on kStepBesideBlocksWide where
// the trace replay's steps take two lanes and the attend leaves them the SMs
// (frontend::beside_steps): their miss copy is bound by the loads in flight, so twice the blocks
// copy a step's misses in two thirds of the time (H200, 2026-12-04,
// bench/results/mirror-gap-probes-h200-2026-12-04.md).
inline constexpr std::int64_t kStepBesideBlocks = 4;
inline constexpr std::int64_t kStepBesideBlocksWide = 8;
inline constexpr std::int64_t kTopkClusterRows = 16;
inline constexpr std::int64_t kTopkOneCtaRows = 64;
inline constexpr std::int64_t kTopkOneCtaBlocks = 32768;
constexpr TopkPath topk_path(std::int64_t rows, std::int64_t max_blocks) {
  if (rows <= kTopkClusterRows) return TopkPath::cluster;
  if (rows >= kTopkOneCtaRows && max_blocks <= kTopkOneCtaBlocks) return TopkPath::one_cta;
  return TopkPath::chain;
}

// Prices the operations of one QSA layer-step from a hardware profile, in integer
// nanoseconds. Each function is a fixed part plus a rate times the work, so that each can be
// compared with (and later fitted to) one GPU micro-benchmark. 1 GB/s moves 1 byte per ns.
class CostModel {
 public:
  explicit CostModel(HardwareProfile profile, bool graphs = true);

  const HardwareProfile& profile() const { return p_; }
  bool graphs() const { return graphs_; }

  // `kernels` launches on one stream (graph nodes when graphs are on).
  std::int64_t launch_ns(int kernels) const;
  // The launches of `kernels` kernels whose calibrated term holds their graph nodes already
  // (the calibration times a kernel as calls in one CUDA graph: docs/validation.md): nothing
  // more with graphs; eager, each launch's extra over a graph node, launch_us - graph_launch_us
  // (not below 0).
  std::int64_t kernel_launch_ns(int kernels) const;
  // Bulk copies: `transfers` cudaMemcpyAsync calls moving `bytes` in all.
  std::int64_t h2d_copy_ns(std::int64_t bytes, std::int64_t transfers) const;
  std::int64_t d2h_copy_ns(std::int64_t bytes, std::int64_t transfers) const;
  // A prefill staged through device windows (HardwareProfile's staging_*, window_fold_*,
  // fold_reset_*): the gathers of `windows` windows holding `bytes` in all; the device work of
  // those windows beside their attends, whose requests have `window_rows` rows summed over the
  // windows (each window's page table, token list and fold); the reset of the rows' accumulator,
  // once a layer. Without the staging terms (staging_gbps 0) the windows are priced as copies and
  // the other two as nothing.
  std::int64_t staging_ns(std::int64_t bytes, std::int64_t windows) const;
  std::int64_t window_fold_ns(std::int64_t windows, std::int64_t window_rows) const;
  std::int64_t fold_reset_ns(std::int64_t rows) const;
  // One gather/scatter kernel over mapped host memory (the multi-bank miss copy, in-place
  // reads, mirror stores): one PCIe latency plus bytes at the zero-copy rate.
  std::int64_t zero_copy_read_ns(std::int64_t bytes) const;
  std::int64_t zero_copy_write_ns(std::int64_t bytes) const;
  // The attend's reads of host pages in place (host placement, the mirror's misses): the bytes
  // at the zero-copy rate, without a latency of their own: they are the attend kernel's reads,
  // whose fixed part the attend's terms price (the calibration's in-place attend points lie on
  // attention_fixed_us + CTAs + bytes at zero_copy_read_gbps).
  std::int64_t in_place_read_ns(std::int64_t bytes) const;
  std::int64_t hbm_read_ns(std::int64_t bytes) const;

  // Indexer scoring, and top-k + expand, over `row_blocks` (sum over rows of visible blocks):
  // one call each, its fixed part included; the one-CTA-per-row top-k also pays per row of its
  // `rows`.
  std::int64_t indexer_ns(std::int64_t row_blocks, IndexPath path = IndexPath::decode) const;
  std::int64_t topk_ns(std::int64_t row_blocks, TopkPath path = TopkPath::cluster,
                       std::int64_t rows = 0) const;
  // One projection call of `rows` rows through `weight_bytes` of bf16 weights
  // (HardwareProfile's projection_* fields say the form).
  std::int64_t projection_ns(std::int64_t weight_bytes, std::int64_t rows) const;
  // The small kernels of one QSA layer-step of `rows` rows (HardwareProfile::layer_ops_*).
  std::int64_t layer_ops_ns(std::int64_t rows) const;
  // Compaction + ensure: queried entries, the pool's slots, pages installed. Only a step that
  // misses searches the slots for victims; an all-hit step does not look at them.
  std::int64_t ensure_ns(std::int64_t lookups, std::int64_t slots, std::int64_t misses) const;
  // The same step as the mirror in place launches it beside the attention (a few blocks on the
  // side stream, no translate: MirrorEngine::residency_beside_async), as timed beside an
  // attention of its `rows` rows: `pages` are its query's entries that are not padding. One
  // piece up to kStepGroupedRows rows, one past them (the compaction's two forms).
  // A step that misses also searches the slots and goes over its pages again.
  std::int64_t step_beside_ns(std::int64_t rows, std::int64_t pages, std::int64_t slots,
                              std::int64_t misses) const;
  // The copy of that step's misses, by its own few blocks: the first page's latency, the rate.
  std::int64_t step_beside_copy_ns(std::int64_t bytes) const;
  // The rows' input of the step beside up to kStepGroupedRows rows: their doublings.
  static double row_doublings(double rows) { return rows > 1 ? std::log2(rows) : 0.0; }
  // The slots the ensure searches: all of them when the step misses, none when all hit (the
  // calibration's fit prices its points through the same rule).
  static double ensure_slots_scanned(double slots, double misses) {
    return misses > 0 ? slots : 0.0;
  }
  // The store of a layer's new tokens (one kernel, qsa::store_kv): `device_bytes` written to
  // the pool, `host_bytes` to the host bank (mapped, over the link). Into the pool alone: its
  // fixed part + the bytes in two pieces joined at a knee (a small cost per KiB up to
  // it, the rest at its rate; knee 0: one rate); into the host bank: its fixed part, a small cost
  // per KiB up to the knee, the bytes past it at the link's rate, and the pool's bytes beside (the
  // mirror). bf16 and fp8 have their own terms.
  std::int64_t store_ns(std::int64_t device_bytes, std::int64_t host_bytes,
                        KvDtype dtype = KvDtype::bf16) const;
  // The attend's CTAs for `rows` rows of at most `width` selected tokens (model/attend_grid.hpp
  // with the profile's SM count), and the tokens the longest of them walks.
  std::int64_t attend_ctas(int rows, int kv_heads, int width) const;
  std::int64_t attend_cta_tokens(int rows, int kv_heads, int width) const;
  // The bytes of `bytes` read over `tokens` selected tokens, scaled to `grid_tokens` (rows x
  // the widest row's tokens): what an attend whose span is its longest CTA's costs as, every
  // row split as the widest is (the fp8 SIMT attend; the calibration's rows are equally wide).
  static std::int64_t grid_bytes(std::int64_t bytes, std::int64_t grid_tokens,
                                 std::int64_t tokens) {
    return tokens > 0 && grid_tokens > tokens ? bytes * grid_tokens / tokens : bytes;
  }
  // Attention over `hbm_bytes` of selected KV in device memory (in-place host reads are
  // priced separately on the PCIe link), `rows` query rows, `ctas` CTAs of its grid.
  // bf16 and fp8 run different kernels, each with its own terms: the bf16 (tensor-core) attend
  // pays per CTA (each writes partial results the merge reads), the fp8 (SIMT) attend per row, its
  // bytes in two pieces joined at a knee (flat while its CTAs fit on the SMs, then linear; knee 0:
  // a line). The bf16 attend lasts as long as the longer of its bytes at the HBM rate and its
  // longest CTA's walk over `cta_tokens` tokens (attend_cta_tokens; 0: not priced): rows of
  // equal width are bound by their bytes, one wide row among narrow ones by its CTAs. Past one
  // wave of CTAs (past_one_wave), the attention_waves terms price it: every CTA walks a whole
  // row, and the bytes stream faster than decode-shaped attends read them.
  std::int64_t attention_ns(std::int64_t hbm_bytes, std::int64_t rows, std::int64_t ctas,
                            KvDtype dtype = KvDtype::bf16, std::int64_t cta_tokens = 0) const;
  // What the bf16 attend of one decode row saves when the forward before read its pages and
  // `working_set_bytes` in all (that forward's selections over its layers): the profile's
  // attention_l2_reuse_us while they fit the L2, falling to 0 past it (l2_reuse_reach).
  std::int64_t attention_l2_reuse_ns(std::int64_t working_set_bytes) const;
  // Whether a bf16 attend of `ctas` CTAs is priced by the attention_waves terms: more CTAs than
  // one wave holds, on a profile that measured them.
  bool past_one_wave(std::int64_t ctas) const;
  // The share of the saving left at working set x: 1 up to `full`, linear to 0 at `none`.
  static double l2_reuse_reach(double x, double full, double none) {
    if (x <= full) return 1.0;
    if (x >= none) return 0.0;
    return (none - x) / (none - full);
  }
  // The fp8 attend reading `bytes` of the host bank in place over `rows` rows (the host
  // placement): the SIMT kernel is compute-bound there, so one term prices its reads and its
  // work together (bf16 in-place reads are link-bound: in_place_read_ns + attention_ns).
  std::int64_t attention_fp8_host_ns(std::int64_t bytes, std::int64_t rows) const;
  // The non-QSA layers of one forward of `tokens` tokens, all of them together.
  std::int64_t non_qsa_ns(std::int64_t tokens) const;

 private:
  HardwareProfile p_;
  bool graphs_;
};

}  // namespace kvtier
