#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "frontend/front_end.hpp"

namespace kvtier::frontend {

// Several replays of one trace in lockstep over one FrontEnd (the planner's sweep: pools of
// many sizes, each with its own select width and its own rows that bypass it) compact each
// layer of a forward once. The first request for a layer compacts it at the widest width
// with no row bypassing (every page a row can touch); a query for a pool is cut from that:
// compaction keeps a row's first `width` distinct pages and counts the rest as dropped
// (model/compaction.hpp), so a row's cut is what FrontEnd::build gives it at that width.
// A row that bypasses the pool holds only its causal tail: those tails are compacted once
// too, the first time a pool has a bypassing row, and cut the same way.
class LayerQueryCache {
 public:
  explicit LayerQueryCache(FrontEnd& fe);

  // Forgets the previous forward; call after FrontEnd::prepare of each forward.
  void prepare();
  // FrontEnd::build(f, layer, width) of the prepared forward, with the bypass flags of the
  // caller's last FrontEnd::plan_rows (each replay plans its rows, then builds its layers).
  // The pages and rows stay valid until the next build or prepare.
  LayerQuery build(const traces::Forward& f, int layer, int width);

 private:
  // A layer compacted at `width` with every row bypassing or none.
  struct Compacted {
    bool built = false;
    int width = 0;
    LayerQuery query;             // its pages and rows point into the vectors below
    std::vector<PageId> pages;    // write pages, then rows x width
    std::vector<int> row_pages;   // [rows] distinct pages each row keeps at `width`
    std::vector<RowTokens> rows;  // [rows] the row figures (FrontEnd reuses its own buffer)
  };
  struct Layer {
    Compacted full;   // no row bypasses, at the widest width
    Compacted tails;  // every row bypasses: its causal tail alone
  };

  void compact(Compacted& c, const traces::Forward& f, int layer, int width,
               std::span<const std::uint8_t> bypass);

  FrontEnd& fe_;
  std::vector<Layer> layers_;             // [layer]
  std::vector<std::uint8_t> none_, all_;  // [rows] bypass flags: no row, every row
  std::vector<PageId> cut_;
};

}  // namespace kvtier::frontend
