#include "model/micro_batch_choice.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/layer_compute.hpp"

namespace kvtier {
namespace {

struct StepParts {
  double link_ns = 0;
  double compute_ns = 0;
};

// One decode step of `rows` requests (one row each) at `context` tokens, host placement, as the
// simulator's model forward prices it: per QSA layer the layer's work besides the KV tier
// (model/layer_compute.hpp), the store into the host bank and the attend (its reads over the
// link apart).
StepParts step_parts(const CostModel& c, const Geometry& g, KvDtype dtype, std::int64_t rows,
                     std::int64_t context) {
  const std::int64_t blocks = context / g.compress_ratio;
  const std::int64_t row_blocks = rows * blocks;
  const std::int64_t selected = std::min<std::int64_t>(g.select_width_tokens(), context);
  const std::int64_t bytes = rows * selected * g.kv_bytes_per_token(dtype);
  std::int64_t compute = layer_compute(c, g, {rows, row_blocks, blocks, 1}).total_ns() +
                         c.store_ns(0, rows * g.kv_bytes_per_token(dtype), dtype);
  std::int64_t link = 0;
  if (dtype == KvDtype::fp8) {
    // the fp8 attend over the host bank: one term for its reads and its work
    link = c.attention_fp8_host_ns(bytes, rows);
  } else {
    link = c.in_place_read_ns(bytes);
    compute += c.attention_ns(
        0, rows, c.attend_ctas(static_cast<int>(rows), g.kv_heads, g.select_width_tokens()));
  }
  const double layers = g.qsa_layers();
  return {static_cast<double>(link) * layers, static_cast<double>(compute) * layers};
}

}  // namespace

MicroBatchChoice choose_micro_batches(const CostModel& cost, const Geometry& g, KvDtype dtype,
                                      int requests, std::int64_t context) {
  if (requests < 1 || context < 1)
    throw std::invalid_argument("choose_micro_batches: requests and context must be positive");
  MicroBatchChoice out;
  for (const int k : {1, 2, 4}) {
    if (k > requests) break;
    // groups as split_requests makes them: sizes differ by one at most
    double link = 0, compute = 0;
    for (int i = 0; i < k; ++i) {
      const std::int64_t rows =
          (std::int64_t{i} + 1) * requests / k - std::int64_t{i} * requests / k;
      const StepParts s = step_parts(cost, g, dtype, rows, context);
      link += s.link_ns;
      compute += s.compute_ns;
    }
    const double step = std::max(link, compute) + std::min(link, compute) / k;
    out.estimates.push_back({k, step / 1e6, link / 1e6, compute / 1e6});
  }
  const double one = out.estimates.front().step_ms;
  double best = one;
  for (const MicroBatchEstimate& e : out.estimates) {
    if (e.step_ms <= one * (1 - kMicroBatchMinGain) && e.step_ms < best) {
      best = e.step_ms;
      out.micro_batches = e.micro_batches;
    }
  }
  return out;
}

}  // namespace kvtier
