#pragma once
// The plain arithmetic of the GPU calibration (no CUDA): what each benchmark sweeps, medians, how
// many calls go into one timed graph, and the random selections and page tables the attention,
// read and residency benchmarks walk.
#include <cstdint>
#include <random>
#include <vector>

namespace kvtier::calibrate {

// What every sweep covers. The full grid (quick = false) takes about 30 s of an H200; the quick
// one (tests) a few seconds, with at least k + 2 points per term and every input varying alone.
struct CalibrationGrid {
  // launch_eager, launch_graph: kernels per point
  std::vector<int> launch_kernels;
  // h2d_copy, d2h_copy: bytes per cudaMemcpyAsync x transfers, points up to copy_max_bytes
  std::vector<std::int64_t> copy_pieces;
  std::vector<int> copy_transfers;
  std::int64_t copy_max_bytes = 0;
  // zero_copy_read, the miss copy: misses per copy of per-layer pages (bf16, fp8) and of
  // all-layers pages (12 layers, bf16); host bank pages behind each
  std::vector<int> layer_misses;
  std::vector<int> all_layers_misses;
  int layer_copy_bank_pages = 0;
  int all_layers_copy_bank_pages = 0;
  // attention, zero_copy_read (in place), hbm_read: rows x selected tokens per row, each row a
  // request of context_pages pages scattered over a bank of bank_pages pages (the attention's
  // CTAs follow from rows and tokens: model/attend_grid.hpp)
  std::vector<int> attend_rows;
  std::vector<int> attend_tokens;
  int context_pages = 0;
  int bank_pages = 0;
  // attention_span: rows x the wide row's selected tokens, the other rows at each of
  // span_narrow_tokens (the series: kSpanBoundRows rows or more at the first; every point
  // reported beside)
  std::vector<int> span_rows;
  std::vector<int> span_tokens;
  std::vector<int> span_narrow_tokens;
  // attention_waves: rows of prefill chunks (waves_chunk_rows rows a request, one page table
  // each) x selected tokens per row, past one wave of CTAs (every CTA walks its whole row)
  std::vector<int> waves_rows;
  std::vector<int> waves_tokens;
  int waves_chunk_rows = 0;
  // staging: pages of each window gathered from a host bank of staging_bank_pages pages (bf16
  // layer pages); window_fold, fold_reset: rows of a request's chunk
  std::vector<int> staging_pages;
  int staging_bank_pages = 0;
  std::vector<int> window_rows;
  // store_then_attend (reported): tokens stored, then one row attends each of attend_tokens and
  // span_tokens
  std::vector<int> store_attend_tokens;
  // attention_warm: rows of 2,051 tokens x layers, each layer's attend read again by the next
  // forward (the fitter takes the one-row points)
  std::vector<int> warm_rows;
  std::vector<int> warm_layers;
  // store*, store_host*: tokens stored per call, into the pool, the host bank (and both)
  std::vector<int> store_tokens;
  // indexer, topk: decode rows (one request each) x context tokens; the prefill shape (rows of
  // one request ending at the context) is an extra sweep
  std::vector<int> index_rows;
  std::vector<std::int64_t> index_contexts;
  std::vector<int> prefill_rows;
  std::vector<std::int64_t> prefill_contexts;
  std::int64_t slab_bytes = 0;    // index slabs of every call of a point, at most
  std::int64_t logits_bytes = 0;  // index logits, likewise (at least one call always fits)
  // ensure: rows (lookups = rows x (1 + 513)) x pool slots x misses per layer-step, of rows
  // of a 2,048-page context; step_beside*: also x the rows' context pages (the distinct pages a
  // row's 512 blocks touch follow from them). step_beside_copy: misses (at least one) of bf16
  // layer pages.
  std::vector<int> ensure_rows;
  std::vector<int> ensure_slots;
  std::vector<int> ensure_misses;
  std::vector<int> ensure_context_pages;
  std::vector<int> beside_copy_misses;
  // projection (the runner's own GEMMs) and projection_wide (cuBLAS): rows of each call
  std::vector<int> projection_rows;
  std::vector<int> projection_wide_rows;
  // layer_ops: rows (one request each)
  std::vector<int> layer_ops_rows;
  // the decode layer, graph against eager: rows
  std::vector<int> layer_rows;
  // calls of one timed graph: enough for about target_us per replay, at most max_calls
  int max_calls = 1;
  double target_us = 0;
  // wall-clock budget of the whole run, shared by the groups of sweeps
  double budget_s = 0;
};
CalibrationGrid calibration_grid(bool quick);

// From this many rows, one wide row's CTAs bound the attend over its narrow neighbours' bytes
// (H200: 4 rows of one 4,096-token row among 512-token ones, 125 tokens a CTA); below, the CTAs
// are short and the bytes bound it (the attention series).
inline constexpr int kSpanBoundRows = 4;

// Median of v (mean of the middle two for an even count); throws std::invalid_argument when v is
// empty or holds a NaN.
double median(std::vector<double> v);

// Calls of one operation in one timed graph: about target_us / probe_us (so that the graph's own
// launch weighs little against the calls), clamped to [1, max_calls]; 1 for a probe that is not
// positive and finite.
int calls_per_graph(double probe_us, double target_us, int max_calls);

// `total` spread over `parts` as evenly as possible, the larger shares first.
std::vector<int> spread(int total, int parts);

// k distinct values of [0, n), ascending. Throws std::invalid_argument unless 0 <= k <= n.
std::vector<std::int32_t> sample_sorted(std::mt19937_64& rng, std::int32_t n, std::int32_t k);

// The positions a decode row of a context of `context` tokens attends: tokens / 4 distinct
// 4-token blocks below the last block, ascending, expanded, then the last tokens % 4 positions
// (the causal tail, as qsa::expand writes it: 2051 = 512 blocks + 3). Needs context % 4 == 0 and
// tokens / 4 < context / 4.
std::vector<std::int32_t> decode_positions(std::mt19937_64& rng, std::int64_t context, int tokens);

// Each of `rows` rows' page table: `pages` distinct pages of a bank of `bank_pages`, in random
// order ([rows][pages]).
std::vector<std::int32_t> scattered_tables(std::mt19937_64& rng, int rows, int pages,
                                           std::int32_t bank_pages);

}  // namespace kvtier::calibrate
