#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvtier {

// How a profile was checked against its card: the figures `kvtier validate compare` printed
// (docs/validation.md). Errors are fractions of |sim - gpu| / gpu (0.021 = 2.1 %).
struct ProfileValidation {
  std::string card;
  std::string date;
  double decode_median_error = 0;
  double decode_p95_error = 0;
  std::optional<double> prefill_median_error;  // absent when prefill was not compared
  std::vector<std::string> traces;             // what was replayed on both sides
  // The model forward (what `kvtier plan` prices): the simulator on traces `kvtier run
  // --weights --record` wrote, against the runner's own figures (validation/results/); absent
  // when not held. Decode: the median and the worst |error| per step; prefill: the worst.
  std::optional<double> model_decode_median_error;
  std::optional<double> model_decode_worst_error;
  std::optional<double> model_prefill_worst_error;
};

// What a profile written over a base changed (model/profile_override.hpp); absent for a
// complete profile.
struct ProfileDerivation {
  std::string base;                  // the base profile's name
  std::vector<std::string> changed;  // the fields the override file gives, in file order
  // The changed fields the base's validation covered (model/profile_trust.hpp): non-empty
  // exactly when the base was validated and that validation was dropped for them.
  std::vector<std::string> voided_validation;
};

// The figures of one GPU + host pair that the cost model prices operations with. Rates are
// in GB/s (1 GB/s == 1 byte per ns), times in microseconds or nanoseconds as named. Every
// value in a profile file carries its source (a measurement, a datasheet, or "estimate").
// The form is kept calibration-friendly: a fixed cost plus a rate per unit of work.
struct HardwareProfile {
  std::string name;
  std::string description;
  double device_memory_gib = 0;  // usable HBM for KV pool sizing

  // PCIe, one figure per direction (full duplex: the directions do not share bandwidth).
  double pcie_h2d_gbps = 0;         // bulk cudaMemcpyAsync host -> device, pinned
  double pcie_d2h_gbps = 0;         // bulk cudaMemcpyAsync device -> host, pinned
  double pcie_latency_us = 0;       // fixed cost of one transfer (one cudaMemcpyAsync)
  double zero_copy_read_gbps = 0;   // kernel reading mapped pinned host memory
  double zero_copy_write_gbps = 0;  // kernel storing to mapped pinned host memory (bf16 store)
  double hbm_gbps = 0;              // random page reads in device memory (the bf16 attend's)
  double sm_count = 0;              // multiprocessors: the attend's CTAs (model/attend_grid.hpp)

  double launch_us = 0;        // one kernel launch on a stream
  double graph_launch_us = 0;  // one kernel as a node of a CUDA graph

  // QSA layer compute, linear in the work.
  double indexer_fixed_us = 0;          // index scoring, one call, fixed part
  double indexer_ns_per_row_block = 0;  // scoring one visible block for one row
  // The same by the prefill kernel (tiles of 128 rows of one request: IndexPath::prefill).
  double indexer_prefill_fixed_us = 0;
  double indexer_prefill_ns_per_row_block = 0;
  double topk_fixed_us = 0;          // top-k + expand, one call, fixed part
  double topk_ns_per_row_block = 0;  // top-k over one row's scores, per block
  // The same for the runner's other top-k kernels (model/cost_model.hpp, TopkPath): one CTA per
  // row (many rows of short contexts: prefill chunks, large decode batches) and the multi-CTA
  // chain (more rows than a cluster takes, longer contexts).
  double topk_one_cta_fixed_us = 0;
  double topk_one_cta_ns_per_row_block = 0;
  // its CTAs' own part, one a row (a prefill chunk of 2,048 rows: about 150 us on the H200)
  double topk_one_cta_ns_per_row = 0;
  double topk_chain_fixed_us = 0;
  double topk_chain_ns_per_row_block = 0;
  // A projection of `rows` rows through `weight_bytes` of bf16 weights (one call: the runner's
  // grouped six that read the normed input, or its output projection), y = x . W^T. Up to
  // kNarrowProjectionRows rows (the runner's own GEMMs: model/cost_model.hpp) a fixed part, W
  // read at projection_gbps and a cost per row (on the H200 about the same for the grouped six
  // and the output projection: not the flops, which the tensor cores hide); past that (cuBLAS,
  // prefill chunks) a fixed part and rows x W flops (2 FLOP a weight a row: weight bytes x
  // rows) at projection_wide_tflops, never faster than reading W at projection_gbps.
  double projection_fixed_us = 0;
  double projection_gbps = 0;
  double projection_ns_per_row = 0;
  double projection_wide_fixed_us = 0;
  double projection_wide_tflops = 0;
  // The small kernels of a QSA layer-step around its projections, index, top-k, store and
  // attend (RMSNorm, RoPE of q and k, index queries, compress, sigmoid gate): per layer-step
  // and per row.
  double layer_ops_fixed_us = 0;
  double layer_ops_ns_per_row = 0;
  double ensure_fixed_us = 0;       // compaction + ensure kernel, fixed part
  double ensure_ns_per_lookup = 0;  // per queried page entry
  double ensure_ns_per_slot = 0;    // victim scan, per pool slot (only a step that misses scans)
  double ensure_ns_per_miss = 0;    // per installed page
  // The same step as the mirror in place runs it beside the attention (a few blocks on a side
  // stream, no translate: MirrorEngine::residency_beside_async), timed beside an attention of
  // its own rows, which sets much of its time: per page entry of its query (padding apart), per
  // miss, and by its rows; a step that misses also searches the slots and goes over its pages
  // again (per slot, per page). Two pieces: up to kStepGroupedRows rows (the compaction by
  // groups of warps; per doubling of the rows), and past them (one warp a row; per row, and
  // no fixed part of its own for a step that misses: the attention of its rows hides it).
  double step_beside_fixed_us = 0;
  double step_beside_us_per_row_doubling = 0;
  double step_beside_ns_per_page = 0;
  double step_beside_ns_per_slot = 0;
  double step_beside_ns_per_miss = 0;
  double step_beside_ns_per_page_missing = 0;
  double step_beside_us_missing = 0;  // a step that misses: its searches' fixed part
  double step_beside_wide_fixed_us = 0;
  double step_beside_wide_ns_per_row = 0;
  double step_beside_wide_ns_per_page = 0;
  double step_beside_wide_ns_per_slot = 0;
  double step_beside_wide_ns_per_miss = 0;
  double step_beside_wide_ns_per_page_missing = 0;
  // The copy of its misses by that step's few blocks (not the full grid's zero_copy_read_gbps):
  // its first page's latency, then the rate.
  double step_beside_copy_us = 0;
  double step_beside_copy_gbps = 0;
  double attention_fixed_us = 0;    // bf16 attend + merge fixed part (bytes priced by hbm_gbps)
  double attention_ns_per_cta = 0;  // bf16 attend, per CTA of its grid (partials + merge)
  // bf16 attend: per token its longest CTA walks, one tile after another (the span's bound
  // beside the bytes' bound: attention_span)
  double attention_ns_per_cta_token = 0;
  // bf16 attend past one wave of CTAs (more than 2 a multiprocessor: a prefill chunk's rows, each
  // CTA walking its whole row): its own fixed part, per CTA, and the rate its bytes stream at,
  // above hbm_gbps, which decode-shaped attends of at most one wave give
  // (attention_waves). attention_waves_gbps 0: not measured, priced by the one-wave terms.
  double attention_waves_fixed_us = 0;
  double attention_waves_ns_per_cta = 0;
  double attention_waves_gbps = 0;
  // A prefill staged through device windows (host, mirror bypass): the gather of a window's
  // pages from the host bank (staging: a kernel reading mapped host memory, per window and per
  // byte), each window's page table, token list and fold of its pass into the rows' accumulator
  // (window_fold: per window and per row of its request), and the accumulator's reset once a
  // layer (fold_reset: per call and per row). staging_gbps 0: not measured, the windows priced
  // as copies (h2d_copy) with neither the window ops nor the reset.
  double staging_fixed_us = 0;
  double staging_gbps = 0;
  double window_fold_fixed_us = 0;
  double window_fold_ns_per_row = 0;
  double fold_reset_fixed_us = 0;
  double fold_reset_ns_per_row = 0;
  // bf16 attend of one decode row whose pages the forward before read (the trace replay's decode:
  // nothing else passes through the L2 between its forwards): what it saves while that forward's
  // selections fit the L2 (attention_l2_reuse_us, up to attention_l2_reuse_full_bytes of them),
  // falling to nothing at attention_l2_reuse_none_bytes (CostModel::attention_l2_reuse_ns).
  // 0: not priced.
  double attention_l2_reuse_us = 0;
  double attention_l2_reuse_full_bytes = 0;
  double attention_l2_reuse_none_bytes = 0;
  // The fp8 attend (codes + scales, its own kernel): fixed part, the rate it reads at, per row.
  // Its bytes in two pieces joined at a knee (flat while the CTAs fit on the SMs, then
  // linear): attention_fp8_ns_per_kib up to attention_fp8_knee_bytes, the bytes past it at
  // attention_fp8_gbps (knee 0: one line).
  double attention_fp8_fixed_us = 0;
  double attention_fp8_gbps = 0;
  double attention_fp8_ns_per_row = 0;
  double attention_fp8_knee_bytes = 0;  // may be 0
  double attention_fp8_ns_per_kib = 0;  // below the knee; may be 0
  // The fp8 attend over the host bank in place (the host placement): compute-bound on the
  // link's bytes, its own fixed part, rate and per-row cost.
  double attention_fp8_host_fixed_us = 0;
  double attention_fp8_host_gbps = 0;
  double attention_fp8_host_ns_per_row = 0;
  double attention_fp8_host_knee_bytes = 0;  // may be 0; the two pieces as attention_fp8's
  double attention_fp8_host_ns_per_kib = 0;  // may be 0
  // The store of a forward's new K/V (one kernel per layer), bf16. Into the pool: a fixed part
  // and the bytes at a rate. Into the host bank (and the pool beside it, the mirror): two
  // pieces joined at a knee: a fixed part and a small cost per KiB up to store_host_knee_bytes
  // (the link absorbs small writes), then the bytes past it at zero_copy_write_gbps.
  // The pool's bytes in two pieces as well: store_ns_per_kib up to store_knee_bytes, the bytes
  // past it at store_hbm_gbps (knee 0: one line).
  double store_fixed_us = 0;
  double store_hbm_gbps = 0;
  double store_knee_bytes = 0;  // may be 0
  double store_ns_per_kib = 0;  // may be 0
  double store_host_us = 0;
  double store_host_knee_bytes = 0;  // may be 0
  double store_host_ns_per_kib = 0;  // below the knee; may be 0
  // The same for fp8 codes + scales (its own rates: per-token scales are small host writes).
  double store_fp8_fixed_us = 0;
  double store_fp8_hbm_gbps = 0;
  double store_fp8_knee_bytes = 0;  // may be 0
  double store_fp8_ns_per_kib = 0;  // may be 0
  double store_fp8_host_us = 0;
  double store_fp8_host_knee_bytes = 0;  // may be 0
  double store_fp8_host_ns_per_kib = 0;  // may be 0
  double store_fp8_host_gbps = 0;

  // The layers without KV pages (36 of the reference model's 48, and its MoE): they take
  // most of a decode step's time and nothing here runs them. Per forward and per token.
  double non_qsa_forward_us = 0;
  double non_qsa_token_us = 0;

  // Every value's source, by field name, in file order.
  std::vector<std::pair<std::string, std::string>> sources;

  // Derived from another card's figures through datasheet ratios ("scaled_from_datasheets":
  // true in the file); such a profile is never validated.
  bool scaled_from_datasheets = false;
  // Set when the profile's values were held against its card (docs/validation.md).
  std::optional<ProfileValidation> validation;
  // Set when the profile is an override over a base (model/profile_override.hpp).
  std::optional<ProfileDerivation> derived_from;

  // Throws ConfigError naming the first value that is not positive and finite (the non-QSA
  // figures, an input the user may set to 0, not negative), with the value.
  void validate() const;

  // The numeric fields by their names in a profile file's "params" (ConfigError for a name
  // that is not one); `set` replaces the value and its source (appending a new source).
  double param(std::string_view field) const;
  void set(std::string_view field, double value, std::string source);
  // The field's source, or an empty string when it has none.
  std::string source(std::string_view field) const;
};

// The names of a profile's numeric fields, in the order a profile file lists them.
std::vector<std::string_view> hardware_profile_params();

// Parses a profile file: {"name": ..., "description": ..., "params": {"<field>": {"value": x,
// "source": "..."}, ...}}, optionally "scaled_from_datasheets": true and "validation": {"card",
// "date", "decode_median_error", "decode_p95_error", ["prefill_median_error",] "traces": [...]}.
// Unknown fields and values without a source are errors (ConfigError).
HardwareProfile hardware_profile_from_json(const std::string& json_text);
// The same format, params in hardware_profile_params() order; every field needs a source
// (ConfigError naming the first without one). hardware_profile_from_json of the result gives
// the same values, sources, flag and validation back.
std::string hardware_profile_to_json(const HardwareProfile& p);

}  // namespace kvtier
