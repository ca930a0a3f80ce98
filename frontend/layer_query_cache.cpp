#include "frontend/layer_query_cache.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvtier::frontend {

LayerQueryCache::LayerQueryCache(FrontEnd& fe)
    : fe_(fe), full_(static_cast<std::size_t>(fe.geometry().qsa_layers())) {}

void LayerQueryCache::prepare() {
  for (Full& f : full_)
    f.built = false;
}

LayerQuery LayerQueryCache::build(const traces::Forward& f, int layer, int width) {
  Full& full = full_.at(static_cast<std::size_t>(layer));
  const std::size_t rows = f.rows.size();
  const std::size_t writes = static_cast<std::size_t>(fe_.write_pages());
  if (!full.built) {
    full.width = fe_.row_width(static_cast<int>(rows), 0);  // every page a row can touch
    const LayerQuery q = fe_.build(f, layer, full.width);
    full.pages.assign(q.pages.begin(), q.pages.end());
    full.query = q;
    full.query.pages = full.pages;
    // A row's pages are a prefix of its segment, padded with kNoPage.
    full.row_pages.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      const PageId* seg = full.pages.data() + writes + r * static_cast<std::size_t>(full.width);
      full.row_pages[r] = static_cast<int>(std::find(seg, seg + full.width, kNoPage) - seg);
    }
    full.built = true;
  }
  if (width == full.width) return full.query;
  if (width > full.width) {
    throw std::logic_error("layer query cache: width " + std::to_string(width) +
                           " beyond every page a row can touch (" + std::to_string(full.width) +
                           ")");
  }
  // Narrower: each row keeps its first `width` pages; the rest are dropped.
  cut_.resize(writes + rows * static_cast<std::size_t>(width));
  std::copy(full.pages.begin(), full.pages.begin() + static_cast<std::ptrdiff_t>(writes),
            cut_.begin());
  LayerQuery q = full.query;
  for (std::size_t r = 0; r < rows; ++r) {
    const int kept = std::min(full.row_pages[r], width);
    const PageId* from = full.pages.data() + writes + r * static_cast<std::size_t>(full.width);
    PageId* to = cut_.data() + writes + r * static_cast<std::size_t>(width);
    std::copy(from, from + kept, to);
    std::fill(to + kept, to + width, kNoPage);
    q.drops += full.row_pages[r] - kept;
  }
  q.pages = cut_;
  return q;
}

}  // namespace kvtier::frontend
