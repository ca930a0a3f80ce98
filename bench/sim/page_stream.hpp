#pragma once
// A synthetic page-reference stream for the replay's lookups/s (issue 16, item 9): the kind of
// request stream cache simulators such as libCacheSim are measured on, one page per request.
// Pages are drawn uniformly or by a power law (Zipf-like) over a page space that is several
// times the pool, so most lookups miss and the victim search is what is measured. Seeded and
// fully specified (SplitMix64, no std:: distributions), so a figure can be repeated exactly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/page_space.hpp"
#include "traces/split_mix64.hpp"

namespace kvtier::bench {

struct PageStreamParams {
  std::uint64_t seed = 1;
  std::int64_t requests = 20'000'000;
  PageId pages = PageId{1} << 20;  // the page space
  // 0: uniform over the pages; > 0: P(rank r) ~ (r + 1)^-zipf over a random ranking of them.
  double zipf = 0.0;
};

using traces::SplitMix64;

// The whole stream, generated up front so that a timed replay measures the replay alone.
inline std::vector<PageId> make_page_stream(const PageStreamParams& p) {
  SplitMix64 rng{p.seed};
  std::vector<PageId> out(static_cast<std::size_t>(p.requests));
  const auto n = static_cast<std::uint64_t>(p.pages);
  if (p.zipf <= 0) {
    for (PageId& x : out)
      x = static_cast<PageId>(rng.below(n));
    return out;
  }
  // Popular ranks land on pages spread over the whole space, not on the lowest ids.
  std::vector<PageId> page_of_rank(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < page_of_rank.size(); ++i)
    page_of_rank[i] = static_cast<PageId>(i);
  for (std::size_t i = page_of_rank.size(); i > 1; --i)
    std::swap(page_of_rank[i - 1], page_of_rank[rng.below(i)]);
  // Continuous power law by its inverse CDF (the trace generator's popularity model).
  const double n1 = static_cast<double>(n) + 1;
  const double e = 1 - p.zipf;
  const bool log_form = std::abs(e) < 1e-9;
  const double span = log_form ? std::log(n1) : std::pow(n1, e) - 1;
  for (PageId& x : out) {
    const double u = rng.uniform();
    const double r = log_form ? std::exp(u * span) : std::pow(span * u + 1, 1 / e);
    const auto rank = std::min(static_cast<std::uint64_t>(r) - 1, n - 1);
    x = page_of_rank[static_cast<std::size_t>(rank)];
  }
  return out;
}

}  // namespace kvtier::bench
