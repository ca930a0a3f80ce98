#pragma once
// How many micro-batches a host- or mirror-placement decode runs when the user leaves it to
// kvtier (`kvtier run --micro-batches auto`): the cost model's estimate of a decode step in K
// groups.
//
// One batch runs each layer's work and then its reads over the link, one after the other. K
// groups overlap one group's reads with the others' work, but each group reads the weights
// again and pays the kernels' fixed parts again. The estimate of a step in K groups: the link's
// reads (the same bytes however split) and the layers' other work (summed over the groups), the
// larger of the two plus 1/K of the smaller (the pipeline's fill). K is taken only where that
// estimate is at least kMicroBatchMinGain below one batch's. Measured on the H200, with the
// groups' reads yielding the SMs to the others' work
// (bench/results/micro-batches-h200-2026-12-03.md): 32 x 128k bf16 -2.5 % with 2 groups and -4.2 to
// -4.8 % with 4 (estimated -2.6 and -3.6 %), 64 x 32k bf16 +0.8 % and -0.9 % (estimated -0.4 and
// -1.0 %), 8 x 1M fp8 -2.8 % and -6.7 % (estimated -12.2 and -1.3 %: the fp8 read's term prices its
// work poorly in groups).
#include <cstdint>
#include <vector>

#include "model/cost_model.hpp"
#include "model/geometry.hpp"
#include "model/kv_dtype.hpp"

namespace kvtier {

inline constexpr double kMicroBatchMinGain = 0.03;

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

// A mirror micro-batch: its requests (one decode row each) and its pool's slots per QSA layer.
struct MirrorGroup {
  int rows = 0;
  std::int64_t pool_slots = 0;
};

// The pages of one row's selection at `context` tokens, spread evenly: its blocks (the top-k
// and the causal tail's) fall into distinct pages as draws over the context's blocks do.
double spread_selection_pages(const Geometry& g, std::int64_t context);

// Host placement, decode steps of one row per request, `requests` requests at `context`
// tokens each. Throws std::invalid_argument for requests < 1 or context < 1.
MicroBatchChoice choose_micro_batches(const CostModel& cost, const Geometry& g, KvDtype dtype,
                                      int requests, std::int64_t context);

// Mirror placement, decode steps at `context` tokens: `candidates` holds, per K, the K groups as
// the session would build them (rows and pool each), K = 1 first. Throws std::invalid_argument
// for no candidates, a first candidate of more than one group, an empty candidate, rows or
// pools below 1, or context < 1.
MicroBatchChoice choose_mirror_micro_batches(
    const CostModel& cost, const Geometry& g, KvDtype dtype, std::int64_t context,
    const std::vector<std::vector<MirrorGroup>>& candidates);

}  // namespace kvtier
