#pragma once
#include <cstdint>
#include <vector>

#include "frontend/front_end.hpp"

namespace kvtier::frontend {

// Several replays of one trace in lockstep over one FrontEnd (the planner's sweep: pools of
// many sizes, each with its own select width) compact each layer of a forward once. The
// first request for a layer compacts it at the widest width (every page a row can touch);
// a narrower width is cut from that: compaction keeps a row's first `width` distinct pages
// and counts the rest as dropped (model/compaction.hpp), so the cut is exactly what
// FrontEnd::build would give at that width.
class LayerQueryCache {
 public:
  explicit LayerQueryCache(FrontEnd& fe);

  // Forgets the previous forward; call after FrontEnd::prepare of each forward.
  void prepare();
  // FrontEnd::build(f, layer, width) of the prepared forward. The pages stay valid until the
  // next build or prepare.
  LayerQuery build(const traces::Forward& f, int layer, int width);

 private:
  struct Full {
    bool built = false;
    int width = 0;
    LayerQuery query;            // at `width`; its pages point into `pages`
    std::vector<PageId> pages;   // write pages, then rows x width
    std::vector<int> row_pages;  // [rows] distinct pages each row keeps at `width`
  };

  FrontEnd& fe_;
  std::vector<Full> full_;  // [layer]
  std::vector<PageId> cut_;
};

}  // namespace kvtier::frontend
