#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "model/radix_sort.hpp"

namespace kvtier {
namespace {

// Bounds of one to four digits and at a digit's edge, odd sizes, keys spread over the whole
// range or packed in a narrow one (high digits all alike, passes skipped), against std::sort.
// Seeded: the same cases every run.
TEST(RadixSort, SortsLikeStdSortAtEveryBound) {
  std::mt19937 rng(20261203);
  for (const std::int32_t bound : {1, 2, 255, 256, 257, 65'536, 1 << 20, INT32_MAX}) {
    for (const std::size_t n : {0u, 1u, 2u, 3u, 65u, 257u, 1'001u}) {
      for (const bool narrow : {false, true}) {
        const std::int32_t lo = narrow ? bound - std::min(bound, 300) : 0;
        std::uniform_int_distribution<std::int32_t> d(lo, bound - 1);
        std::vector<std::int32_t> v(n), scratch(n);
        for (auto& x : v)
          x = d(rng);
        std::vector<std::int32_t> want = v;
        std::sort(want.begin(), want.end());
        radix_sort_below(v.data(), n, bound, scratch.data());
        ASSERT_EQ(v, want) << "bound " << bound << " n " << n << " narrow " << narrow;
      }
    }
  }
}

}  // namespace
}  // namespace kvtier
