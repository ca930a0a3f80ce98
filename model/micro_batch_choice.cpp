#include "model/micro_batch_choice.hpp"

#include <algorithm>
#include <cmath>
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

// One decode step of a mirror group at `context` tokens, as the runner runs it when its
// forwards miss: per QSA layer the layer's work, the store (pool and host bank), the step before
// the attention (compaction and ensure of the rows' pages; its miss copy on the link) and the
// attention over the pool.
StepParts mirror_step_parts(const CostModel& c, const Geometry& g, KvDtype dtype,
                            const MirrorGroup& grp, std::int64_t context) {
  const std::int64_t rows = grp.rows;
  const std::int64_t blocks = context / g.compress_ratio;
  const std::int64_t selected = std::min<std::int64_t>(g.select_width_tokens(), context);
  const double touched = spread_selection_pages(g, context);
  const double group_pages =
      static_cast<double>(rows) * static_cast<double>(g.pages_for_context(context));
  const double hit = std::min(1.0, static_cast<double>(grp.pool_slots) / group_pages);
  const double lookups = static_cast<double>(rows) * touched;
  const auto misses = static_cast<std::int64_t>(std::llround(lookups * (1.0 - hit)));
  const std::int64_t token_bytes = g.kv_bytes_per_token(dtype);
  const std::int64_t link =
      misses > 0 ? c.zero_copy_read_ns(misses * g.kv_bytes_per_page(dtype)) : 0;
  const int ctas =
      static_cast<int>(c.attend_ctas(static_cast<int>(rows), g.kv_heads, g.select_width_tokens()));
  const std::int64_t compute =
      layer_compute(c, g, {rows, rows * blocks, blocks, 1}).total_ns() +
      c.store_ns(rows * token_bytes, rows * token_bytes, dtype) +
      c.ensure_ns(static_cast<std::int64_t>(std::llround(lookups)), grp.pool_slots, misses) +
      c.attention_ns(
          rows * selected * token_bytes, rows, ctas, dtype,
          c.attend_cta_tokens(static_cast<int>(rows), g.kv_heads, g.select_width_tokens()));
  const double layers = g.qsa_layers();
  return {static_cast<double>(link) * layers, static_cast<double>(compute) * layers};
}

// K groups' summed parts -> the estimate of their overlapped step.
MicroBatchEstimate overlapped(int k, const StepParts& sum) {
  const double step =
      std::max(sum.link_ns, sum.compute_ns) + std::min(sum.link_ns, sum.compute_ns) / k;
  return {k, step / 1e6, sum.link_ns / 1e6, sum.compute_ns / 1e6};
}

// The K whose estimate is at least kMicroBatchMinGain below one batch's and the lowest.
void choose(MicroBatchChoice& out) {
  const double one = out.estimates.front().step_ms;
  double best = one;
  for (const MicroBatchEstimate& e : out.estimates) {
    if (e.step_ms <= one * (1 - kMicroBatchMinGain) && e.step_ms < best) {
      best = e.step_ms;
      out.micro_batches = e.micro_batches;
    }
  }
}

}  // namespace

double spread_selection_pages(const Geometry& g, std::int64_t context) {
  const double pages = static_cast<double>(g.pages_for_context(context));
  const double blocks = std::max<double>(1.0, static_cast<double>(context / g.compress_ratio));
  const double chosen = std::min<double>(g.block_topk(), blocks);
  const double per_page = static_cast<double>(g.page_size / g.compress_ratio);
  // a page is untouched when none of its blocks is drawn; plus the tail's page
  const double touched = pages * (1.0 - std::pow(1.0 - chosen / blocks, per_page));
  return std::min(pages, touched + 1.0);
}

MicroBatchChoice choose_micro_batches(const CostModel& cost, const Geometry& g, KvDtype dtype,
                                      int requests, std::int64_t context) {
  if (requests < 1 || context < 1)
    throw std::invalid_argument("choose_micro_batches: requests and context must be positive");
  MicroBatchChoice out;
  for (const int k : {1, 2, 4}) {
    if (k > requests) break;
    // groups as split_requests makes them: sizes differ by one at most
    StepParts sum;
    for (int i = 0; i < k; ++i) {
      const std::int64_t rows =
          (std::int64_t{i} + 1) * requests / k - std::int64_t{i} * requests / k;
      const StepParts s = step_parts(cost, g, dtype, rows, context);
      sum.link_ns += s.link_ns;
      sum.compute_ns += s.compute_ns;
    }
    out.estimates.push_back(overlapped(k, sum));
  }
  choose(out);
  return out;
}

MicroBatchChoice choose_mirror_micro_batches(
    const CostModel& cost, const Geometry& g, KvDtype dtype, std::int64_t context,
    const std::vector<std::vector<MirrorGroup>>& candidates) {
  if (candidates.empty() || context < 1)
    throw std::invalid_argument(
        "choose_mirror_micro_batches: needs a candidate and a positive context");
  if (candidates.front().size() != 1)
    throw std::invalid_argument(
        "choose_mirror_micro_batches: the first candidate is one batch, the estimates' base");
  MicroBatchChoice out;
  for (const std::vector<MirrorGroup>& groups : candidates) {
    if (groups.empty())
      throw std::invalid_argument("choose_mirror_micro_batches: a candidate without groups");
    StepParts sum;
    for (const MirrorGroup& grp : groups) {
      if (grp.rows < 1 || grp.pool_slots < 1)
        throw std::invalid_argument(
            "choose_mirror_micro_batches: a group needs a row and a pool slot");
      const StepParts s = mirror_step_parts(cost, g, dtype, grp, context);
      sum.link_ns += s.link_ns;
      sum.compute_ns += s.compute_ns;
    }
    out.estimates.push_back(overlapped(static_cast<int>(groups.size()), sum));
  }
  choose(out);
  return out;
}

}  // namespace kvtier
