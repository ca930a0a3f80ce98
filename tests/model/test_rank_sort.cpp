#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "model/rank_sort.hpp"

namespace kvtier {
namespace {

// Every size up to the limit, odd ones included, distinct values from a wide range (negative
// ones too), against std::sort. Seeded: the same cases every run.
TEST(RankSort, SortsDistinctValuesLikeStdSort) {
  std::mt19937 rng(20261202);
  for (int n = 0; n <= kRankSortMax; ++n) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<std::int32_t> v;
      std::uniform_int_distribution<std::int32_t> d(-1000, 1 << 20);
      while (static_cast<int>(v.size()) < n) {
        const std::int32_t x = d(rng);
        if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
      }
      std::vector<std::int32_t> want = v;
      std::sort(want.begin(), want.end());
      rank_sort_distinct(v.data(), n);
      ASSERT_EQ(v, want) << "n = " << n << ", rep = " << rep;
    }
  }
}

TEST(RankSort, AlreadySortedAndReversed) {
  std::vector<std::int32_t> up(kRankSortMax), down(kRankSortMax);
  for (int i = 0; i < kRankSortMax; ++i) {
    up[i] = 3 * i;
    down[i] = 3 * (kRankSortMax - 1 - i);
  }
  const std::vector<std::int32_t> want = up;
  rank_sort_distinct(up.data(), kRankSortMax);
  rank_sort_distinct(down.data(), kRankSortMax);
  EXPECT_EQ(up, want);
  EXPECT_EQ(down, want);
}

}  // namespace
}  // namespace kvtier
