// LayerQueryCache: a layer compacted once at the widest width and cut to each narrower one
// gives exactly FrontEnd::build at that width (pages, padding, drops and every other field),
// on the bundled samples (shared prefixes, wide prefill rows) at every width a row can have,
// and at the width and bypassing rows FrontEnd::plan_rows gives each pool size, from pools
// that every wide prefill row bypasses to pools that hold every row.
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
  EXPECT_EQ(a.bypass_selected_tokens, b.bypass_selected_tokens) << where;
  EXPECT_EQ(a.bypass_last_token_selected, b.bypass_last_token_selected) << where;
  EXPECT_EQ(a.bypass_read_tokens, b.bypass_read_tokens) << where;
  ASSERT_EQ(a.rows.size(), b.rows.size()) << where;
  for (std::size_t r = 0; r < a.rows.size(); ++r) {
    EXPECT_EQ(a.rows[r].selected, b.rows[r].selected) << where << " row " << r;
    EXPECT_EQ(a.rows[r].last_token_selected, b.rows[r].last_token_selected)
        << where << " row " << r;
    EXPECT_EQ(a.rows[r].staged_cached, b.rows[r].staged_cached) << where << " row " << r;
    EXPECT_EQ(a.rows[r].staged_selected, b.rows[r].staged_selected) << where << " row " << r;
  }
}

// Pool sizes for a forward: from the smallest that holds one page per row and the write
// pages (where every prefill row wider than a page bypasses) up by half each time, to one
// that holds every row whole (none bypasses), so each bypass set a pool can give is met.
std::vector<std::int64_t> pool_sizes(const FrontEnd& fe, std::size_t rows) {
  const std::int64_t lo = static_cast<std::int64_t>(rows) + fe.write_pages();
  const std::int64_t hi = fe.write_pages() + static_cast<std::int64_t>(rows) * fe.full_width();
  std::vector<std::int64_t> sizes;
  for (std::int64_t p = lo; p < hi; p += p / 2 + 1)
    sizes.push_back(p);
  sizes.push_back(hi);
  return sizes;
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
  std::int64_t forward = 0, cut = 0, bypassing = 0;
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
      const int widest = direct.full_width();
      ASSERT_EQ(direct.plan_rows(0), widest);
      // Every 7th forward at every width (the others at a few), narrowest last so that the
      // full compaction is made by the first request of each layer; no row bypasses.
      std::vector<int> widths = {widest, widest / 2 + 1, 3, 1};
      if (forward % 7 == 0) {
        widths.clear();
        for (int w = widest; w >= 1; --w)
          widths.push_back(w);
      }
      const std::string at = "forward " + std::to_string(forward);
      for (int l = 0; l < g.qsa_layers(); ++l) {
        ASSERT_EQ(shared.plan_rows(0), widest);
        for (int w : widths) {
          if (w < 1 || w > widest) continue;
          const LayerQuery want = direct.build(f, l, w);
          const LayerQuery got = cache.build(f, l, w);
          expect_same(got, want,
                      at + " layer " + std::to_string(l) + " width " + std::to_string(w));
          if (w < widest) ++cut;
        }
      }
      // Each pool size with its own width and bypassing rows, the layers in the order a
      // replay asks for them; the pools interleaved, as simulate_together steps them.
      for (const std::int64_t pool : pool_sizes(direct, f.rows.size())) {
        const int width = direct.plan_rows(pool);
        ASSERT_EQ(shared.plan_rows(pool), width);
        if (direct.bypassed_rows() > 0) ++bypassing;
        for (int l = 0; l < g.qsa_layers(); ++l) {
          expect_same(cache.build(f, l, width), direct.build(f, l, width),
                      at + " layer " + std::to_string(l) + " pool " + std::to_string(pool) +
                          " width " + std::to_string(width));
        }
      }
      ++forward;
    }
  }
  EXPECT_GT(cut, 0);
  EXPECT_GT(bypassing, 0) << "no pool size made a prefill row bypass";
}

INSTANTIATE_TEST_SUITE_P(Samples, LayerQueryCacheOnSamples,
                         ::testing::Values("prefill-shared-prefix.ktr", "single-32k-decode1000.ktr",
                                           "concurrent8-16k-128k.ktr"));

}  // namespace
}  // namespace kvtier::frontend
