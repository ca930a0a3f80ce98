#pragma once
// How many micro-batches a host-placement decode runs when the user leaves it to kvtier
// (`kvtier run --micro-batches auto`): the cost model's estimate of a decode step in K groups.
//
// One batch runs each layer's work and then its reads over the link, one after the other. K
// groups overlap one group's reads with the others' work, but each group reads the weights
// again and pays the kernels' fixed parts again. The estimate of a step in K groups: the link's
// reads (the same bytes however split) and the layers' other work (summed over the groups), the
// larger of the two plus 1/K of the smaller (the pipeline's fill). K is taken only where that
// estimate is at least kMicroBatchMinGain below one batch's: measured on the H200
// (bench/results/scale-h200-2026-12-02.md), groups paid where the work between the reads was a
// large share of the step (8 x 1M fp8: -15 % with 2, -20 % with 4) and not where the link
// already set the step (32 x 128k and 64 x 32k bf16: -1 % to +3 %).
#include <cstdint>
#include <vector>

#include "model/cost_model.hpp"
#include "model/geometry.hpp"
#include "model/kv_dtype.hpp"

namespace kvtier {

inline constexpr double kMicroBatchMinGain = 0.10;

struct MicroBatchEstimate {
  int micro_batches = 1;
  double step_ms = 0;     // the estimated decode step
  double link_ms = 0;     // the attention's reads over the link, all groups
  double compute_ms = 0;  // the layers' work besides the link's reads, all groups
};

struct MicroBatchChoice {
  int micro_batches = 1;
  std::vector<MicroBatchEstimate> estimates;  // K = 1, 2, 4 as far as the requests go
  // the attention's reads of a step over the link in one batch
  double link_ms() const { return estimates.front().link_ms; }
};

// Host placement, decode steps of one row per request, `requests` requests at `context`
// tokens each. Throws std::invalid_argument for requests < 1 or context < 1.
MicroBatchChoice choose_micro_batches(const CostModel& cost, const Geometry& g, KvDtype dtype,
                                      int requests, std::int64_t context);

}  // namespace kvtier
