#pragma once
#include "model/hd.hpp"

namespace kvtier {

// The most values rank_sort_distinct sorts (its copy lives on the stack).
inline constexpr int kRankSortMax = 64;

// Sorts n <= kRankSortMax distinct values ascending in place: each value goes to the place
// given by how many values are below it. O(n^2) comparisons, but none a branch depends on, so
// the compiler vectorises them; for the few dozen misses or victims of a small step that beats
// a comparison sort, whose every branch on random keys is a coin toss. Distinct values only:
// equal ones would share a place.
template <class T>
KVT_HD void rank_sort_distinct(T* a, int n) {
  if (n < 2) return;  // the common single miss of a replay of single requests, without setup
  T copy[kRankSortMax];
  for (int i = 0; i < n; ++i)
    copy[i] = a[i];
  for (int i = 0; i < n; ++i) {
    int rank = 0;
    for (int j = 0; j < n; ++j)
      rank += copy[j] < copy[i] ? 1 : 0;
    a[rank] = copy[i];
  }
}

}  // namespace kvtier
