#pragma once
// An LSD radix sort of keys in [0, bound), 8 bits a pass over the bits that bound uses, through
// a caller's scratch of the same length; the result ends in `a`. For the host's larger sorts of
// distinct ids (a step's misses, a front run of slots): a comparison sort of random ids
// mispredicts about half its branches (perf put the heap sort of a layer-step's ~400 misses at
// 40 % of ensure_pages on the page-stream replay, bench_sim's BM_ReplayStream). One read counts
// every digit; a digit that all keys share (the high bits of ids drawn from a narrow range)
// costs no pass. Host only: a device thread sorts with heap_sort instead.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace kvtier {

template <class T>
inline void radix_sort_below(T* a, std::size_t n, T bound, T* scratch) {
  static_assert(sizeof(T) == 4, "32-bit keys");
  if (n < 2) return;
  constexpr int kMaxDigits = 4;
  int digits = 0;
  while (digits < kMaxDigits &&
         (std::uint64_t{1} << (8 * digits)) < static_cast<std::uint64_t>(bound))
    ++digits;
  std::uint32_t count[kMaxDigits][256] = {};
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::uint32_t>(a[i]);
    for (int d = 0; d < digits; ++d)
      ++count[d][(k >> (8 * d)) & 0xff];
  }
  T* from = a;
  T* to = scratch;
  for (int d = 0; d < digits; ++d) {
    const unsigned shift = 8 * static_cast<unsigned>(d);
    std::uint32_t* c = count[d];
    if (c[(static_cast<std::uint32_t>(from[0]) >> shift) & 0xff] == n) continue;
    std::uint32_t sum = 0;
    for (int b = 0; b < 256; ++b)
      sum += std::exchange(c[b], sum);
    for (std::size_t i = 0; i < n; ++i)
      to[c[(static_cast<std::uint32_t>(from[i]) >> shift) & 0xff]++] = from[i];
    std::swap(from, to);
  }
  if (from != a) std::copy(from, from + n, a);
}

}  // namespace kvtier
