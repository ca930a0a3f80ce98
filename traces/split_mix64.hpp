#pragma once
// SplitMix64: small, fast and fully specified, so that whatever draws from it (the trace
// generator, the benchmarks' page streams) is identical on every platform (std:: distributions
// are not).
#include <cstdint>

namespace kvtier::traces {

struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // In [0, n), n < 2^32.
  std::uint32_t below(std::uint64_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * n) >> 32);
  }
};

}  // namespace kvtier::traces
