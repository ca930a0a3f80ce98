// The trace replay's host-side staging and checksum reference (no GPU needed): the positions a
// row reads lie on exactly the pages the core's compaction keeps, and the checksum reference
// follows what each slot holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cuda/kernels.hpp"
#include "cuda/replay_stage.hpp"
#include "cuda/replay_verify.hpp"
#include "cuda/trace_replay.hpp"
#include "frontend/front_end.hpp"
#include "model/compaction.hpp"
#include "model/page_layout.hpp"
#include "tests/cuda/replay_test_util.hpp"
#include "traces/generator.hpp"

namespace kvtier::cuda {
namespace {

std::vector<traces::Record> small_records(const Geometry& g, std::uint64_t seed) {
  traces::GenParams p = traces::gen_preset("dsv4-flash");
  p.seed = seed;
  p.requests = 4;
  p.concurrent = 2;
  p.prompt_min = 150;
  p.prompt_max = 600;
  p.decode_min = 10;
  p.decode_max = 30;
  p.prefill_chunk = 128;
  p.prefill_samples = 4;
  return test::generated_records(g, p);
}

// For every forward, layer and row, without a pool and with pools small enough for wide prefill
// rows to bypass them: the
// distinct pages of the staged read positions (through the row's table) are the row's entries
// of the core's compacted query, and the query head is the forward's write pages.
TEST(ReplayStage, ReadPositionsLieOnTheCompactedPages) {
  const Geometry g = test::small_replay_geometry();
  int bypassed = 0;  // over the pools
  for (std::int64_t pool : {std::int64_t{0}, std::int64_t{18}, std::int64_t{24}}) {
    frontend::FrontEnd fe(g, 4096);
    StagedForward sf;
    int forwards = 0;
    const int bypassed_before = bypassed;
    for (const traces::Record& rec : small_records(g, 3)) {
      if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
        fe.begin(*b);
        continue;
      }
      if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
        fe.end(*e);
        continue;
      }
      const auto& f = std::get<traces::Forward>(rec);
      fe.prepare(f);
      const int rows = static_cast<int>(f.rows.size());
      const int width = fe.plan_rows(pool);
      stage_forward(g, fe, f, width, sf);
      ++forwards;
      ASSERT_EQ(sf.rows, rows);
      ASSERT_EQ(sf.writes, fe.write_pages());
      ASSERT_EQ(sf.n_store(), static_cast<int>(fe.tokens()));
      for (int l = 0; l < g.qsa_layers(); ++l) {
        const frontend::LayerQuery q = fe.build(f, l, width);
        ASSERT_EQ(static_cast<int>(q.pages.size()), sf.query_len);
        for (int i = 0; i < sf.writes; ++i)
          EXPECT_EQ(q.pages[static_cast<std::size_t>(i)],
                    sf.layer_queries[static_cast<std::size_t>(l) * sf.query_len + i]);
        for (int r = 0; r < rows; ++r) {
          std::vector<PageId> pages;
          for (std::int64_t p : sf.read_positions[static_cast<std::size_t>(l) * rows + r]) {
            const PageId page = sf.tables[static_cast<std::size_t>(r) * sf.stride +
                                          static_cast<std::size_t>(p / g.page_size)];
            if (pages.empty() || pages.back() != page) pages.push_back(page);
          }
          std::vector<PageId> expected;
          for (int i = 0; i < width; ++i) {
            const PageId page =
                q.pages[static_cast<std::size_t>(sf.writes) + static_cast<std::size_t>(r) * width +
                        static_cast<std::size_t>(i)];
            if (page != kNoPage) expected.push_back(page);
          }
          if (fe.bypass()[static_cast<std::size_t>(r)] != 0) {
            // A row that bypasses the pool queries only pages it writes (its tail) and reads
            // its whole selection, no width cutting it.
            ++bypassed;
            const auto w = fe.writes();
            for (PageId page : expected)
              EXPECT_TRUE(std::binary_search(w.begin(), w.end(), page)) << "row " << r;
            const auto& row = f.rows[static_cast<std::size_t>(r)];
            const auto sel = f.selection(l, r);
            const auto table = fe.table(row.request);
            std::vector<PageId> all(table.size() + 1, kNoPage);
            const RowCompaction c = compact_row(
                sel.data(), static_cast<int>(sel.size()), row.position + row.count - 1,
                g.compress_ratio, g.page_size, table.data(),
                static_cast<std::int64_t>(table.size()), static_cast<int>(all.size()), all.data());
            ASSERT_EQ(c.dropped, 0);
            expected.clear();
            for (PageId page : all)
              if (page != kNoPage) expected.push_back(page);
          }
          EXPECT_EQ(pages, expected) << "forward " << forwards << " layer " << l << " row " << r;
        }
      }
    }
    EXPECT_GT(forwards, 10);
    if (pool > 0) {
      EXPECT_GT(bypassed, bypassed_before) << "a small pool makes some prefill rows bypass it";
    } else {
      EXPECT_EQ(bypassed, 0) << "without a pool no row bypasses one";
    }
  }
}

// A slot never written reads as zeros; a written one as the position stored there, even when
// another request reads it at the same position (a shared prefix); storing again replaces it.
TEST(ReplayStage, SlotContentsFollowTheStores) {
  const PageLayout layout = PageLayout::make(2, 16, 1, 64, false);
  SlotContents contents(4, 16);
  StagedForward sf;
  sf.rows = 1;
  sf.stride = 2;
  sf.tables = {2, 3};
  sf.read_positions = {{0, 1, 17}, {0, 1, 17}};  // two layers, one row
  const auto sum_of = [&](int layer, std::int64_t c0, std::int64_t c1, std::int64_t c17) {
    return token_checksum(layout, layer, c0, 0) + token_checksum(layout, layer, c1, 1) +
           token_checksum(layout, layer, c17, 17);
  };
  EXPECT_EQ(contents.expected(layout, 0, sf), sum_of(0, -1, -1, -1));
  sf.store_pos = {1, 17};
  sf.store_pages = {2, 3};
  sf.store_tokens = {1, 1};
  contents.record_stores(sf);
  EXPECT_EQ(contents.expected(layout, 1, sf), sum_of(1, -1, 1, 17));
  EXPECT_NE(contents.expected(layout, 1, sf), sum_of(1, 0, 1, 17));
  // page 2 reused by a request whose token 1 of that page is position 33
  sf.store_pos = {33};
  sf.store_pages = {2};
  sf.store_tokens = {1};
  contents.record_stores(sf);
  EXPECT_EQ(contents.expected(layout, 0, sf), sum_of(0, -1, 33, 17));
  // the zero-bytes term is not the stored-bytes term
  EXPECT_NE(token_checksum(layout, 0, -1, 5), token_checksum(layout, 0, 5, 5));
  EXPECT_EQ(token_checksum(layout, 0, 5), token_checksum(layout, 0, 5, 5));
}

}  // namespace
}  // namespace kvtier::cuda
