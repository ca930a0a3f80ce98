// StackDistance against a naive stack (a vector of pages and holes, searched from the top) on
// long random reference strings with releases: every depth equal, through many renumberings
// of its times (a stack of a few hundred entries renumbers every few thousand references).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sim/stack_distance.hpp"

namespace kvtier::sim {
namespace {

// The stack as the planner defines it: entries top first; a hole is a freed place.
class NaiveStack {
 public:
  std::int64_t reference(PageId p) {
    const auto it = std::find(stack_.begin(), stack_.end(), p);
    const bool in_stack = it != stack_.end();
    const std::int64_t depth = in_stack ? (it - stack_.begin()) + 1 : 0;
    // The topmost hole above p's place (any hole, for a page not in the stack) moves to p's
    // place, or is used up; without one p's place just goes.
    const auto hole = std::find(stack_.begin(), it, kHole);
    if (hole != it) {
      stack_.erase(hole);
      if (in_stack) *std::find(stack_.begin(), stack_.end(), p) = kHole;
    } else if (in_stack) {
      stack_.erase(it);
    }
    stack_.insert(stack_.begin(), p);
    return depth;
  }
  void release(PageId p) {
    const auto it = std::find(stack_.begin(), stack_.end(), p);
    if (it != stack_.end()) *it = kHole;
  }

 private:
  static constexpr PageId kHole = -1;
  std::vector<PageId> stack_;
};

TEST(StackDistance, EqualsANaiveStackOverLongRandomStrings) {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    std::mt19937 rng(seed);
    const PageId pages = seed % 2 ? 300 : 5000;
    StackDistance fast(pages);
    NaiveStack naive;
    for (int i = 0; i < 60000; ++i) {
      // A hot set and the whole space, and releases now and then.
      const PageId p = static_cast<PageId>(rng() % (rng() % 3 ? pages / 10 + 1 : pages));
      if (rng() % 50 == 0) {
        fast.release(p);
        naive.release(p);
        continue;
      }
      ASSERT_EQ(fast.reference(p), naive.reference(p)) << "seed " << seed << " reference " << i;
    }
  }
}

}  // namespace
}  // namespace kvtier::sim
