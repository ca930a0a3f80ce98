#include "model/calibration_terms.hpp"

namespace kvtier {

const std::vector<CalibrationTerm>& calibration_terms() {
  static const std::vector<CalibrationTerm> terms = {
      {"launch_eager", {"kernels"}},
      {"launch_graph", {"kernels"}},
      {"h2d_copy", {"bytes", "transfers"}},
      {"d2h_copy", {"bytes", "transfers"}},
      {"zero_copy_read", {"bytes"}},
      {"zero_copy_write", {"bytes"}},
      {"store", {"bytes"}},
      {"store_fp8", {"bytes"}},
      {"store_host", {"bytes"}},
      {"store_host_fp8", {"bytes"}},
      {"hbm_read", {"bytes"}},
      {"indexer", {"row_blocks"}},
      {"indexer_prefill", {"row_blocks"}},
      {"topk", {"row_blocks"}},
      {"topk_one_cta", {"row_blocks", "rows"}},
      {"topk_chain", {"row_blocks"}},
      {"projection", {"weight_bytes", "rows"}},
      {"projection_wide", {"weight_byte_rows"}},
      {"layer_ops", {"rows"}},
      {"ensure", {"lookups", "slots", "misses"}},
      // retired (points files before 2026-12-03b): read, not fitted (validation/fit)
      {"ensure_beside", {"lookups", "slots", "misses"}},
      {"step_beside", {"rows", "pages", "slots", "misses"}},
      {"step_beside_wide", {"rows", "pages", "slots", "misses"}},
      {"step_beside_copy", {"bytes"}},
      {"attention", {"hbm_bytes", "ctas"}},
      {"attention_span", {"cta_tokens"}},
      {"attention_waves", {"hbm_bytes", "ctas"}},
      {"attention_warm",
       {"rows", "layers", "working_set_bytes", "hbm_bytes", "ctas", "cta_tokens"}},
      {"store_in_forward", {"store_bytes"}},
      {"staging", {"bytes"}},
      {"window_fold", {"rows"}},
      {"fold_reset", {"rows"}},
      {"attention_fp8", {"hbm_bytes", "rows"}},
      {"attention_fp8_host", {"bytes", "rows"}},
      {"non_qsa", {"tokens"}},
  };
  return terms;
}

const CalibrationTerm* find_calibration_term(std::string_view term) {
  for (const CalibrationTerm& t : calibration_terms()) {
    if (t.term == term) return &t;
  }
  return nullptr;
}

}  // namespace kvtier
