#pragma once
// The needle protocol (`--needle-at`, docs/needle.md) on one runner: the prompt ends with the
// query token; everything before it is prefilled with the probe at the needle's position, the
// query token is decoded as one row, and every QSA layer's attention output of that row is
// compared with the needle's value; the remaining decode steps run without the probe. Written
// for any runner with QsaRunner's generate, step and probe, so that the bookkeeping is tested
// on the CPU.
#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/runner/qsa_runner.hpp"
#include "cuda/weights/needle.hpp"
#include "model/config_error.hpp"
#include "model/geometry.hpp"

namespace kvtier::runner {

struct NeedleRun {
  std::vector<std::int32_t> tokens;  // `decode` greedy tokens, the first after the query token
  std::vector<double> cosines;       // per QSA layer: attention output vs the needle's value
};

// `on_forward` (optional) sees the prefill's prompt tokens done and in total; `on_prefilled`
// (optional) runs once the prefill is done, before the query token.
template <class Runner>
NeedleRun run_needle(Runner& r, const Geometry& g, const std::vector<std::int32_t>& prompt,
                     std::int64_t needle_at, int rows_per_request, int decode,
                     const std::function<void(std::int64_t, std::int64_t)>& on_forward,
                     const std::function<void()>& on_prefilled) {
  if (prompt.size() < 2) throw ConfigError("runner: the needle prompt ends with the query token");
  const std::vector<std::int32_t> query{prompt.back()};
  const std::vector<std::vector<std::int32_t>> head{{prompt.begin(), prompt.end() - 1}};
  r.set_probe(needle_at);
  r.generate(head, rows_per_request, 1, on_forward);
  if (on_prefilled) on_prefilled();
  NeedleRun out;
  out.tokens.push_back(r.step({{0, query}})[0]);
  for (std::size_t l = 0; l < r.last_attention().size(); ++l)
    out.cosines.push_back(weights::needle_cosine(r.last_attention()[l], r.probe_values()[l],
                                                 g.q_heads, g.kv_heads, g.head_dim));
  r.set_probe(-1);
  for (int d = 1; d < decode; ++d)
    out.tokens.push_back(r.step({{0, {out.tokens.back()}}})[0]);
  return out;
}

}  // namespace kvtier::runner
