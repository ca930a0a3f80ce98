#include "model/page_space.hpp"

#include <algorithm>
#include <functional>
#include <string>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"

namespace kvtier {

PageSpace::PageSpace(PageId num_pages) : num_pages_(num_pages) {
  if (num_pages < 0) throw ConfigError("page space: negative page count");
  refs_.assign(static_cast<std::size_t>(num_pages), 0);
}

std::vector<PageId>& PageSpace::table(RequestId id) {
  auto it = tables_.find(id);
  if (it == tables_.end())
    throw ConfigError("page space: request " + std::to_string(id) + " is not open");
  return it->second;
}

std::span<const PageId> PageSpace::pages(RequestId id) const {
  auto it = tables_.find(id);
  if (it == tables_.end())
    throw ConfigError("page space: request " + std::to_string(id) + " is not open");
  return it->second;
}

PageId PageSpace::take_lowest_free() {
  if (free_.empty()) return fresh_++;
  std::pop_heap(free_.begin(), free_.end(), std::greater<>());
  PageId p = free_.back();
  free_.pop_back();
  return p;
}

void PageSpace::open(RequestId id, std::span<const PageId> shared_prefix) {
  if (tables_.count(id))
    throw ConfigError("page space: request " + std::to_string(id) + " is already open");
  for (PageId p : shared_prefix) {
    if (p < 0 || p >= num_pages_ || refs_[p] == 0) {
      throw ConfigError("page space: request " + std::to_string(id) + " shares page " +
                        std::to_string(p) + ", which no open request holds");
    }
  }
  for (PageId p : shared_prefix)
    ++refs_[p];
  tables_.emplace(id, std::vector<PageId>(shared_prefix.begin(), shared_prefix.end()));
}

void PageSpace::grow(RequestId id, std::int64_t tokens, int page_size) {
  std::vector<PageId>& t = table(id);
  const std::int64_t need = (tokens + page_size - 1) / page_size;
  const std::int64_t more = need - static_cast<std::int64_t>(t.size());
  if (more <= 0) return;
  if (more > free_pages()) {
    throw CapacityError("host page space exhausted: request " + std::to_string(id) + " needs " +
                        std::to_string(more) + " more pages for " + std::to_string(tokens) +
                        " tokens, " + std::to_string(free_pages()) + " of " +
                        std::to_string(num_pages_) + " pages are free");
  }
  for (std::int64_t i = 0; i < more; ++i) {
    PageId p = take_lowest_free();
    refs_[p] = 1;
    t.push_back(p);
  }
}

std::vector<PageId> PageSpace::close(RequestId id) {
  std::vector<PageId> freed;
  for (PageId p : table(id)) {
    if (--refs_[p] == 0) {
      freed.push_back(p);
      free_.push_back(p);
      std::push_heap(free_.begin(), free_.end(), std::greater<>());
    }
  }
  tables_.erase(id);
  return freed;
}

}  // namespace kvtier
