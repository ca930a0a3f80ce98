// LayerQueryCache: a layer compacted once at the widest width and cut to each narrower one
// gives exactly FrontEnd::build at that width (pages, padding, drops and every other field),
// on the bundled samples (shared prefixes, wide prefill rows) at every width a row can have.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/front_end.hpp"
#include "frontend/layer_query_cache.hpp"
#include "traces/trace_io.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::frontend {
namespace {

void expect_same(const LayerQuery& a, const LayerQuery& b, const std::string& where) {
  ASSERT_EQ(std::vector<PageId>(a.pages.begin(), a.pages.end()),
            std::vector<PageId>(b.pages.begin(), b.pages.end()))
      << where;
  EXPECT_EQ(a.drops, b.drops) << where;
  EXPECT_EQ(a.selected_tokens, b.selected_tokens) << where;
  EXPECT_EQ(a.last_token_selected, b.last_token_selected) << where;
  EXPECT_EQ(a.row_blocks, b.row_blocks) << where;
  EXPECT_EQ(a.staged_cached_tokens, b.staged_cached_tokens) << where;
  EXPECT_EQ(a.staged_windows, b.staged_windows) << where;
  EXPECT_EQ(a.staged_selected_tokens, b.staged_selected_tokens) << where;
}

class LayerQueryCacheOnSamples : public ::testing::TestWithParam<const char*> {};

TEST_P(LayerQueryCacheOnSamples, CutsGiveWhatBuildGivesAtEveryWidth) {
  const traces::TraceInput input = traces::file_trace(traces::samples_dir() + "/" + GetParam());
  const TraceBounds bounds = scan_trace(input);
  const Geometry& g = input.header.geometry;
  // Two front ends over the same records: one builds directly, one through the cache.
  FrontEnd direct(g, bounds.peak_pages), shared(g, bounds.peak_pages);
  LayerQueryCache cache(shared);
  auto stream = input.open();
  traces::Record rec;
  std::int64_t forward = 0, cut = 0;
  while (stream->next(rec)) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      direct.begin(*b);
      shared.begin(*b);
    } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      ASSERT_EQ(direct.end(*e), shared.end(*e));
    } else {
      const auto& f = std::get<traces::Forward>(rec);
      direct.prepare(f);
      shared.prepare(f);
      cache.prepare();
      const int widest = direct.row_width(static_cast<int>(f.rows.size()), 0);
      // Every 7th forward at every width (the others at a few), narrowest last so that the
      // full compaction is made by the first request of each layer.
      std::vector<int> widths = {widest, widest / 2 + 1, 3, 1};
      if (forward % 7 == 0) {
        widths.clear();
        for (int w = widest; w >= 1; --w)
          widths.push_back(w);
      }
      for (int l = 0; l < g.qsa_layers(); ++l) {
        for (int w : widths) {
          if (w < 1 || w > widest) continue;
          const LayerQuery want = direct.build(f, l, w);
          const LayerQuery got = cache.build(f, l, w);
          expect_same(got, want,
                      "forward " + std::to_string(forward) + " layer " + std::to_string(l) +
                          " width " + std::to_string(w));
          if (w < widest) ++cut;
        }
      }
      ++forward;
    }
  }
  EXPECT_GT(cut, 0);
}

INSTANTIATE_TEST_SUITE_P(Samples, LayerQueryCacheOnSamples,
                         ::testing::Values("prefill-shared-prefix.ktr",
                                           "single-32k-decode1000.ktr"));

}  // namespace
}  // namespace kvtier::frontend
