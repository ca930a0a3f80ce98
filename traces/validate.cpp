#include "traces/validate.hpp"

#include <algorithm>

namespace kvtier::traces {

TraceValidator::TraceValidator(const Geometry& g)
    : layers_(g.qsa_layers()),
      ratio_(g.compress_ratio),
      page_size_(g.page_size),
      max_context_(g.max_context(true)),
      topk_(g.block_topk()) {}

std::string TraceValidator::beyond_context(const std::string& what) const {
  return what + " is beyond the geometry's largest context, " + std::to_string(max_context_) +
         " tokens (rope_max_positions x yarn_factor)";
}

std::string TraceValidator::check(const Record& r, IdOrder order) {
  if (const auto* b = std::get_if<RequestBegin>(&r)) {
    if (b->prompt_tokens < 0)
      return "request " + std::to_string(b->id) + ": negative prompt_tokens";
    if (b->shared_pages < 0) return "request " + std::to_string(b->id) + ": negative shared_pages";
    const std::string who = "request " + std::to_string(b->id);
    if (b->prompt_tokens > max_context_) {
      return beyond_context(who + ": prompt_tokens " + std::to_string(b->prompt_tokens));
    }
    if (b->shared_pages > max_context_ / page_size_) {
      return beyond_context(who + ": shared_pages " + std::to_string(b->shared_pages));
    }
    if (b->shared_pages > 0 && b->shared_with == b->id) {
      return "request " + std::to_string(b->id) + " shares a prefix with itself";
    }
    if (b->shared_pages > 0 && !open_.count(b->shared_with)) {
      return "request " + std::to_string(b->id) + " shares a prefix of request " +
             std::to_string(b->shared_with) + ", which is not open";
    }
    if (!open_.insert(b->id).second) {
      return "request " + std::to_string(b->id) + " begins twice";
    }
    return {};
  }
  if (const auto* e = std::get_if<RequestEnd>(&r)) {
    if (open_.erase(e->id) == 0) {
      return "request " + std::to_string(e->id) + " ends but is not open";
    }
    return {};
  }
  return check_forward(std::get<Forward>(r), order);
}

std::string TraceValidator::check_forward(const Forward& f, IdOrder order) {
  const std::size_t rows = f.rows.size();
  if (f.layers != layers_) {
    return "forward has " + std::to_string(f.layers) + " layers but the geometry has " +
           std::to_string(layers_) + " QSA layers";
  }
  if (f.offsets.size() != static_cast<std::size_t>(layers_) * rows + 1 || f.offsets[0] != 0 ||
      f.offsets.back() != static_cast<std::int64_t>(f.ids.size())) {
    return "forward offsets do not match its " + std::to_string(rows) + " rows x " +
           std::to_string(layers_) + " layers and " + std::to_string(f.ids.size()) + " ids";
  }
  seen_.clear();
  for (const ForwardRow& row : f.rows) {
    const std::string who = "row of request " + std::to_string(row.request);
    if (!open_.count(row.request)) return who + ": the request is not open";
    if (row.position < 0) return who + ": negative position";
    if (row.count < 1) return who + ": count must be >= 1";
    if (row.kind == RowKind::decode && row.count != 1) return who + ": a decode row has count 1";
    // Compared as max_context_ - count so that the check itself cannot overflow.
    if (row.position > max_context_ - row.count) {
      return beyond_context(who + ": position " + std::to_string(row.position) + " + count " +
                            std::to_string(row.count));
    }
    if (row.kind != RowKind::decode && row.kind != RowKind::prefill) return who + ": bad kind";
    seen_.push_back(row.request);
  }
  std::sort(seen_.begin(), seen_.end());
  if (std::adjacent_find(seen_.begin(), seen_.end()) != seen_.end()) {
    return "forward has two rows of one request";
  }
  for (int l = 0; l < layers_; ++l) {
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t k = static_cast<std::size_t>(l) * rows + r;
      const std::int64_t lo = f.offsets[k], hi = f.offsets[k + 1];
      if (hi < lo) return "forward offsets decrease";
      const ForwardRow& row = f.rows[r];
      const std::int64_t visible = (row.position + row.count) / ratio_;
      if (row.kind == RowKind::decode && hi - lo > topk_) {
        return "decode row of request " + std::to_string(row.request) + " at layer " +
               std::to_string(l) + " selects " + std::to_string(hi - lo) + " blocks, more than " +
               "block_topk " + std::to_string(topk_);
      }
      std::int64_t prev = -1;
      if (order == IdOrder::ids_ascending) {
        if (hi > lo && f.ids[lo] < 0) return "selection holds a negative block id";
        if (hi > lo) prev = f.ids[hi - 1];
      } else {
        for (std::int64_t i = lo; i < hi; ++i) {
          const std::int64_t id = f.ids[i];
          if (id <= prev) {
            return "selection of request " + std::to_string(row.request) + " at layer " +
                   std::to_string(l) + " is not strictly ascending (" + std::to_string(id) +
                   " after " + std::to_string(prev) + ")";
          }
          prev = id;
        }
      }
      if (hi > lo && prev >= visible) {
        return "selection of request " + std::to_string(row.request) + " at layer " +
               std::to_string(l) + " holds block " + std::to_string(prev) +
               " beyond the context (position " + std::to_string(row.position) + " + count " +
               std::to_string(row.count) + " sees blocks < " + std::to_string(visible) + ")";
      }
    }
  }
  return {};
}

}  // namespace kvtier::traces
