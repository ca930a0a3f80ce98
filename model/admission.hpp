#pragma once
#include <cstdint>

#include "model/hd.hpp"
#include "model/page_space.hpp"

namespace kvtier {

// Admission decides whether a missing page is copied into the pool or read in place over
// PCIe for this step only. Policies are small classes with a nested Config, like victim
// finders; ensure_pages is compiled once per (finder, admission) pair.

// Every miss is installed: the plain LRU write-through mirror.
struct AdmitAll {
  struct Config {};
  KVT_HD bool admit(PageId, std::int64_t) { return true; }
};

// "hybrid": a miss is installed only when the same page was also queried at an earlier step
// no more than `window` steps ago; otherwise it is read in place. A page seen once never
// enters the pool, so one-off selections cannot flush the hot set.
struct AdmitOnReuse {
  struct Config {
    std::int64_t window = 64;
  };
  static constexpr std::int64_t kNeverSeen = -1;

  std::int64_t* last_seen;  // [num_pages] step a miss on the page was last seen, or kNeverSeen
  Config config;

  KVT_HD bool admit(PageId p, std::int64_t step) {
    const std::int64_t prev = last_seen[p];
    last_seen[p] = step;
    return prev != kNeverSeen && prev < step && step - prev <= config.window;
  }
};

}  // namespace kvtier
