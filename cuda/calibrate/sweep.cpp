#include "cuda/calibrate/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace kvtier::calibrate {

CalibrationGrid calibration_grid(bool quick) {
  constexpr std::int64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
  CalibrationGrid g;
  if (quick) {
    g.launch_kernels = {1, 4, 16};
    g.copy_pieces = {64 * KiB, MiB};
    g.copy_transfers = {1, 4, 64};
    g.copy_max_bytes = 64 * MiB;
    g.layer_misses = {1, 16, 64};
    g.all_layers_misses = {1, 4};
    g.layer_copy_bank_pages = 256;
    g.all_layers_copy_bank_pages = 16;
    g.attend_rows = {1, 4, 8};
    g.attend_tokens = {512, 2051};
    g.context_pages = 256;
    g.bank_pages = 2048;
    g.span_rows = {4, 8};
    g.span_tokens = {4096, 8192};
    g.span_narrow_tokens = {512};
    g.waves_rows = {272, 544, 1088};  // 2 KV heads: past 2, 4 and 8 waves of 2 x 132 CTAs
    g.waves_tokens = {515, 2051};
    g.waves_chunk_rows = 512;
    g.staging_pages = {16, 64, 256};
    g.staging_bank_pages = 512;
    g.window_rows = {64, 256, 1024};
    g.store_attend_tokens = {1, 4096};
    g.warm_rows = {1, 2};  // 8 points: a points-file series of 6 inputs needs 8
    g.warm_layers = {1, 2, 3, 4};
    g.store_tokens = {1, 16, 256, 4096};  // 4 sizes: the host bank's store is fitted with a knee
    g.index_rows = {1, 4, 32, 64};        // top-k: the cluster kernel, the chain, one CTA per row
    g.index_contexts = {16384, 32768, 65536};
    g.prefill_rows = {64, 128};
    g.prefill_contexts = {16384, 32768};
    g.slab_bytes = 256 * MiB;
    g.logits_bytes = 64 * MiB;
    g.ensure_rows = {1, 2, 12};  // 12: the step's compaction one warp a row (step_beside_wide)
    g.ensure_slots = {2048, 8192, 16384};  // 2,048: the rows of 2,048 pages do not fit
    g.ensure_misses = {0, 32};
    g.ensure_context_pages = {128, 2048};
    g.beside_copy_misses = {1, 4, 16};
    g.projection_rows = {1, 2, 8, 64};  // two matrices each: 8 points for 3 coefficients
    g.projection_wide_rows = {128, 512};
    g.layer_ops_rows = {1, 8, 64};
    g.layer_rows = {1, 4};
    g.max_calls = 4;
    g.target_us = 100;
    g.budget_s = 90;
    return g;
  }
  g.launch_kernels = {1, 2, 4, 8, 16, 32, 64, 128};
  g.copy_pieces = {2 * KiB, 64 * KiB, MiB, 16 * MiB};
  g.copy_transfers = {1, 4, 16, 64};
  g.copy_max_bytes = 256 * MiB;
  g.layer_misses = {1, 4, 16, 64, 256, 1024};
  g.all_layers_misses = {1, 4, 16, 64};
  g.layer_copy_bank_pages = 4096;
  g.all_layers_copy_bank_pages = 256;
  g.attend_rows = {1, 2, 4, 8, 16, 32};
  g.attend_tokens = {512, 1024, 2051};
  g.context_pages = 1024;
  g.bank_pages = 16384;
  g.span_rows = {1, 2, 4, 8, 16, 32};
  g.span_tokens = {4096, 8192, 16384};
  g.span_narrow_tokens = {512, 2051};
  // from 2 to 124 waves: a 2,048-row chunk of one request up to 8 requests' chunks together
  g.waves_rows = {264, 528, 1056, 2048, 4096, 8192, 16384};
  g.waves_tokens = {515, 1027, 2051};
  g.waves_chunk_rows = 2048;
  // windows of 1 MB - 512 MB (one layer's bf16 pages; the runner's default window is 2,048 pages)
  // from a 2 GiB bank, and the rows of one request's prefill chunk up to 8 chunks' worth
  g.staging_pages = {8, 32, 128, 512, 1024, 2048, 4096};
  g.staging_bank_pages = 16384;
  g.window_rows = {264, 1024, 2048, 4096, 8192, 16384};
  g.store_attend_tokens = {1, 4096};
  g.warm_rows = {1, 2, 4};
  g.warm_layers = {1, 2, 3, 4, 6, 8, 12, 16};
  // up to a prefill chunk of 4,096 tokens for each of 32 requests (256 MiB a layer): the rate
  // past the knee is that of the prefill's large stores
  g.store_tokens = {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 131072};
  g.index_rows = {1, 4, 8, 16, 32, 64, 128};
  g.index_contexts = {16384, 65536, 131072, 262144, 1048576};
  g.prefill_rows = {256, 512, 2048};
  g.prefill_contexts = {16384, 32768, 131072};
  g.slab_bytes = 4 * GiB;
  g.logits_bytes = 512 * MiB;
  g.ensure_rows = {1, 2, 4, 6, 8, 12, 16, 24, 32};  // both sides of kStepGroupedRows
  // small pools apart (the searches of a step that misses have a fixed part); the steps that do
  // not fit a pool's halves are left out (bench_residency.cpp)
  g.ensure_slots = {1024, 2048, 4096, 8192, 16384, 32768, 131072};
  g.ensure_misses = {0, 16, 64, 256};
  g.ensure_context_pages = {128, 384, 2048};  // about 126, 283 and 453 distinct pages a row
  g.beside_copy_misses = {1, 2, 4, 8, 16, 32, 64};
  g.projection_rows = {1, 2, 4, 8, 16, 24, 32, 48, 64};
  g.projection_wide_rows = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  g.layer_ops_rows = {1, 2, 8, 16, 64, 256, 1024, 4096};
  g.layer_rows = {1, 4, 16};
  g.max_calls = 16;
  g.target_us = 300;
  g.budget_s = 200;
  return g;
}

double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("median of no values");
  for (const double x : v)
    if (std::isnan(x)) throw std::invalid_argument("median of values holding a NaN");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int calls_per_graph(double probe_us, double target_us, int max_calls) {
  if (max_calls < 1) return 1;
  if (!(probe_us > 0) || !std::isfinite(probe_us)) return 1;
  const double want = std::ceil(target_us / probe_us);
  if (!(want >= 1)) return 1;
  return want >= max_calls ? max_calls : static_cast<int>(want);
}

std::vector<int> spread(int total, int parts) {
  if (parts < 1) throw std::invalid_argument("spread: parts must be positive");
  std::vector<int> v(static_cast<std::size_t>(parts), total / parts);
  for (int i = 0; i < total % parts; ++i)
    ++v[static_cast<std::size_t>(i)];
  return v;
}

std::vector<std::int32_t> sample_sorted(std::mt19937_64& rng, std::int32_t n, std::int32_t k) {
  if (k < 0 || k > n)
    throw std::invalid_argument("sample_sorted: " + std::to_string(k) + " of " + std::to_string(n));
  // Floyd's algorithm: k draws, each distinct, uniform over the k-subsets.
  std::vector<char> taken(static_cast<std::size_t>(n), 0);
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(k));
  for (std::int32_t j = n - k; j < n; ++j) {
    std::int32_t t = std::uniform_int_distribution<std::int32_t>(0, j)(rng);
    if (taken[static_cast<std::size_t>(t)]) t = j;
    taken[static_cast<std::size_t>(t)] = 1;
    out.push_back(t);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int32_t> decode_positions(std::mt19937_64& rng, std::int64_t context, int tokens) {
  const std::int64_t blocks = context / 4;
  const int chosen = tokens / 4, tail = tokens % 4;
  if (context % 4 != 0 || tokens < 0 || chosen >= blocks || blocks > INT32_MAX)
    throw std::invalid_argument("decode_positions: " + std::to_string(tokens) +
                                " tokens of a context of " + std::to_string(context));
  std::vector<std::int32_t> pos;
  pos.reserve(static_cast<std::size_t>(tokens));
  for (const std::int32_t b : sample_sorted(rng, static_cast<std::int32_t>(blocks - 1), chosen))
    for (int i = 0; i < 4; ++i)
      pos.push_back(b * 4 + i);
  for (int i = tail; i > 0; --i)
    pos.push_back(static_cast<std::int32_t>(context - i));
  return pos;
}

std::vector<std::int32_t> scattered_tables(std::mt19937_64& rng, int rows, int pages,
                                           std::int32_t bank_pages) {
  std::vector<std::int32_t> t;
  t.reserve(static_cast<std::size_t>(rows) * static_cast<std::size_t>(pages));
  for (int r = 0; r < rows; ++r) {
    std::vector<std::int32_t> row = sample_sorted(rng, bank_pages, pages);
    std::shuffle(row.begin(), row.end(), rng);
    t.insert(t.end(), row.begin(), row.end());
  }
  return t;
}

}  // namespace kvtier::calibrate
