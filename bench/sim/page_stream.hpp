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

// Draws pages one at a time from `rng` (the stream's and the page-stream trace's draws).
class PageDraw {
 public:
  PageDraw(SplitMix64& rng, PageId pages, double zipf)
      : rng_(rng), n_(static_cast<std::uint64_t>(pages)), e_(1 - zipf), zipf_(zipf > 0) {
    if (!zipf_) return;
    // Popular ranks land on pages spread over the whole space, not on the lowest ids.
    page_of_rank_.resize(static_cast<std::size_t>(n_));
    for (std::size_t i = 0; i < page_of_rank_.size(); ++i)
      page_of_rank_[i] = static_cast<PageId>(i);
    for (std::size_t i = page_of_rank_.size(); i > 1; --i)
      std::swap(page_of_rank_[i - 1], page_of_rank_[rng_.below(i)]);
    const double n1 = static_cast<double>(n_) + 1;
    log_form_ = std::abs(e_) < 1e-9;
    span_ = log_form_ ? std::log(n1) : std::pow(n1, e_) - 1;
  }

  PageId operator()() {
    if (!zipf_) return static_cast<PageId>(rng_.below(n_));
    // Continuous power law by its inverse CDF (the trace generator's popularity model).
    const double u = rng_.uniform();
    const double r = log_form_ ? std::exp(u * span_) : std::pow(span_ * u + 1, 1 / e_);
    const auto rank = std::min(static_cast<std::uint64_t>(r) - 1, n_ - 1);
    return page_of_rank_[static_cast<std::size_t>(rank)];
  }

 private:
  SplitMix64& rng_;
  std::uint64_t n_;
  double e_;
  bool zipf_;
  bool log_form_ = false;
  double span_ = 0;
  std::vector<PageId> page_of_rank_;
};

// The whole stream, generated up front so that a timed replay measures the replay alone.
inline std::vector<PageId> make_page_stream(const PageStreamParams& p) {
  SplitMix64 rng{p.seed};
  PageDraw draw(rng, p.pages, p.zipf);
  std::vector<PageId> out(static_cast<std::size_t>(p.requests));
  for (PageId& x : out)
    x = draw();
  return out;
}

}  // namespace kvtier::bench
