#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "validation/compare/error_stats.hpp"
#include "validation/compare/forward_results.hpp"

namespace kvtier::validation {

// Whether the simulator's residency counters equal the GPU's, forward by forward (the core
// decides both, so they must agree exactly).
struct CounterAgreement {
  std::int64_t hits_differ = 0;  // forwards whose hits differ
  std::int64_t misses_differ = 0;
  std::int64_t evictions_differ = 0;
  std::int64_t first_forward = -1;  // the first forward where any differs (-1: none)
  bool exact() const { return hits_differ + misses_differ + evictions_differ == 0; }
};

// One point of the scatter: one forward of one pair.
struct ForwardError {
  std::int64_t forward = 0;
  double gpu_us = 0, sim_us = 0;
  bool decode = false;
  double error() const { return (sim_us - gpu_us) / gpu_us; }
};

// One GPU run against one simulator run of the same trace and configuration.
struct PairComparison {
  std::string label;  // "trace, placement[, N slots], dtype"
  std::string placement;
  ErrorStats all, decode, prefill;
  CounterAgreement counters;
  std::vector<ForwardError> forwards;
};

// Every forward of the pairs with one placement, together.
struct PlacementSummary {
  std::string placement;
  std::int64_t pairs = 0;
  ErrorStats all, decode, prefill;
  bool counters_exact = true;
};

struct Comparison {
  std::vector<PairComparison> pairs;
  std::vector<PlacementSummary> placements;  // in the order they first appear
  // Every pair's forwards together, whatever the placement ("all"): the pooled figures a
  // profile's validation line quotes (docs/validation.md).
  PlacementSummary pooled;
};

// Pairs forward i of `gpu` with forward i of `sim`. Throws ConfigError when the two differ in
// forward count (naming both counts and files), in a forward's index, in placement, in
// dtype, trace name or mirror pool size where both give one.
PairComparison compare_pair(const ForwardResults& gpu, const ForwardResults& sim);
Comparison compare(const std::vector<std::pair<ForwardResults, ForwardResults>>& gpu_sim);

}  // namespace kvtier::validation
