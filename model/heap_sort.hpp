#pragma once
#include "model/hd.hpp"

namespace kvtier {

// In-place heap sort with a caller-given strict weak order `less`: O(n log n), no extra
// memory, no recursion, so a single device thread can run it. Not stable (callers sort by
// keys that are unique).
template <class T, class Less>
KVT_HD void heap_sift_down(T* a, int n, int i, Less less) {
  for (;;) {
    int top = i;
    const int l = 2 * i + 1;
    const int r = l + 1;
    if (l < n && less(a[top], a[l])) top = l;
    if (r < n && less(a[top], a[r])) top = r;
    if (top == i) return;
    T t = a[i];
    a[i] = a[top];
    a[top] = t;
    i = top;
  }
}

template <class T, class Less>
KVT_HD void heap_sort(T* a, int n, Less less) {
  for (int i = n / 2 - 1; i >= 0; --i)
    heap_sift_down(a, n, i, less);
  for (int end = n - 1; end > 0; --end) {
    T t = a[0];
    a[0] = a[end];
    a[end] = t;
    heap_sift_down(a, end, 0, less);
  }
}

}  // namespace kvtier
