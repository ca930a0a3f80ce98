#pragma once
// The miss-heavy page stream of bench/sim/page_stream.hpp as a trace (issue 16, item 9), so
// that the simulator's replay (sim::simulate: front end, compaction, ensure, pricing) is
// measured on it, not only the core's ensure loop. Many requests hold long contexts at once and
// take turns at decoding: each forward decodes `rows` of them (in rotation), and each row
// selects, in every QSA layer, one block in each of `pages_per_row` pages drawn from the page
// stream over its request's pages (uniform or Zipf, a ranking shared by every request). The page
// space is requests x the context's pages, several times a pool of a quarter of it, so most
// lookups miss. Seeded and fully specified, like the stream.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/sim/page_stream.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::bench {

struct PageStreamTraceParams {
  std::uint64_t seed = 16;
  int requests = 256;              // open at once; the page space is about requests x context pages
  std::int64_t context = 256'000;  // tokens each request holds before its first decode
  int rows = 1;                    // decode rows per forward
  int pages_per_row = 512;         // pages each row draws per layer (at most block_topk)
  std::int64_t lookups = 20'000'000;  // forwards enough for about this many page draws
  double zipf = 0.0;
};

// Forwards of the stream's draws; RequestBegin first, RequestEnd last. The selection of a row
// is its drawn pages' blocks, ascending (a page drawn twice may give two of its blocks, which
// compaction counts as one page).
inline traces::TraceInput make_page_stream_trace(const PageStreamTraceParams& p) {
  traces::TraceHeader h;
  h.producer = "bench page_stream_trace";
  const Geometry& g = h.geometry;
  const int layers = g.qsa_layers();
  const int blocks_per_page = g.page_size / g.compress_ratio;
  const auto context_pages = static_cast<PageId>(p.context / g.page_size);
  SplitMix64 rng{p.seed};
  PageDraw draw(rng, context_pages, p.zipf);
  std::vector<traces::Record> recs;
  for (int r = 0; r < p.requests; ++r)
    recs.emplace_back(traces::RequestBegin{static_cast<RequestId>(r + 1), p.context, 0, 0});
  std::vector<std::int64_t> position(static_cast<std::size_t>(p.requests), p.context);
  const std::int64_t per_forward = std::int64_t{layers} * p.rows * p.pages_per_row;
  const std::int64_t forwards = (p.lookups + per_forward - 1) / per_forward;
  std::vector<std::int32_t> blocks;
  for (std::int64_t fi = 0; fi < forwards; ++fi) {
    traces::Forward f;
    f.layers = layers;
    for (int i = 0; i < p.rows; ++i) {
      const auto r = static_cast<std::size_t>((fi * p.rows + i) % p.requests);
      f.rows.push_back({static_cast<RequestId>(r + 1), position[r]++, 1, traces::RowKind::decode});
    }
    f.offsets.push_back(0);
    for (int l = 0; l < layers; ++l) {
      for (int i = 0; i < p.rows; ++i) {
        blocks.clear();
        for (int k = 0; k < p.pages_per_row; ++k) {
          const auto page = static_cast<std::int32_t>(draw());
          blocks.push_back(
              page * blocks_per_page +
              static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(blocks_per_page))));
        }
        std::sort(blocks.begin(), blocks.end());
        blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
        f.ids.insert(f.ids.end(), blocks.begin(), blocks.end());
        f.offsets.push_back(static_cast<std::int64_t>(f.ids.size()));
      }
    }
    recs.emplace_back(std::move(f));
  }
  for (int r = 0; r < p.requests; ++r)
    recs.emplace_back(traces::RequestEnd{static_cast<RequestId>(r + 1)});
  return traces::memory_trace("page_stream_trace", std::move(h), std::move(recs));
}

}  // namespace kvtier::bench
