#include "frontend/layer_query_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvtier::frontend {

namespace {

// A causal tail lies in one page (the page size is a multiple of the compress ratio).
constexpr int kTailWidth = 1;

}  // namespace

LayerQueryCache::LayerQueryCache(FrontEnd& fe)
    : fe_(fe), layers_(static_cast<std::size_t>(fe.geometry().qsa_layers())) {}

void LayerQueryCache::prepare() {
  for (Layer& l : layers_) {
    l.full.built = false;
    l.tails.built = false;
  }
}

void LayerQueryCache::compact(Compacted& c, const traces::Forward& f, int layer, int width,
                              std::span<const std::uint8_t> bypass) {
  const std::size_t rows = f.rows.size();
  const auto writes = static_cast<std::size_t>(fe_.write_pages());
  const LayerQuery q = fe_.build(f, layer, width, bypass);
  c.width = width;
  c.pages.assign(q.pages.begin(), q.pages.end());
  c.rows.assign(q.rows.begin(), q.rows.end());
  c.query = q;
  c.query.pages = c.pages;
  c.query.rows = c.rows;
  // A row's pages are a prefix of its segment, padded with kNoPage.
  c.row_pages.resize(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const PageId* seg = c.pages.data() + writes + r * static_cast<std::size_t>(width);
    c.row_pages[r] = static_cast<int>(std::find(seg, seg + width, kNoPage) - seg);
  }
  c.built = true;
}

LayerQuery LayerQueryCache::build(const traces::Forward& f, int layer, int width) {
  Layer& lc = layers_.at(static_cast<std::size_t>(layer));
  const std::size_t rows = f.rows.size();
  const auto writes = static_cast<std::size_t>(fe_.write_pages());
  const std::span<const std::uint8_t> bypass = fe_.bypass();
  if (bypass.size() != rows) {
    throw std::logic_error("layer query cache: the front end has not planned this forward's rows");
  }
  Compacted& full = lc.full;
  if (!full.built) {
    none_.assign(rows, 0);
    compact(full, f, layer, fe_.full_width(), none_);
  }
  const bool any_bypass = std::find(bypass.begin(), bypass.end(), 1) != bypass.end();
  if (any_bypass && !lc.tails.built) {
    all_.assign(rows, 1);
    compact(lc.tails, f, layer, kTailWidth, all_);
  }
  // A row truncated even at the widest width (or a tail over one page) has drops the cuts
  // cannot attribute to it: the front end builds such a layer itself.
  if (full.query.drops != 0 || (any_bypass && lc.tails.query.drops != 0)) {
    return fe_.build(f, layer, width, bypass);
  }
  if (width == full.width && !any_bypass) return full.query;
  if (width > full.width) {
    throw std::logic_error("layer query cache: width " + std::to_string(width) +
                           " beyond every page a row can touch (" + std::to_string(full.width) +
                           ")");
  }
  // Each row keeps the first `width` pages of its own compaction (the full one, or its tail
  // where it bypasses the pool); the rest are dropped.
  cut_.resize(writes + rows * static_cast<std::size_t>(width));
  std::copy(full.pages.begin(), full.pages.begin() + static_cast<std::ptrdiff_t>(writes),
            cut_.begin());
  LayerQuery q = full.query;
  q.page_entries = static_cast<std::int64_t>(writes);
  for (std::size_t r = 0; r < rows; ++r) {
    const Compacted& from = bypass[r] != 0 ? lc.tails : full;
    const int have = from.row_pages[r];
    const int kept = std::min(have, width);
    const PageId* src = from.pages.data() + writes + r * static_cast<std::size_t>(from.width);
    PageId* to = cut_.data() + writes + r * static_cast<std::size_t>(width);
    std::copy(src, src + kept, to);
    std::fill(to + kept, to + width, kNoPage);
    q.drops += have - kept;
    q.page_entries += kept;
    if (bypass[r] != 0) add_bypassed_row(q, full.rows[r], f.rows[r].kind);
  }
  q.pages = cut_;
  return q;
}

}  // namespace kvtier::frontend
