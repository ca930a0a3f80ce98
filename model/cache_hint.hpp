#pragma once
// A hint that an address will be read or written soon, so that its cache line is fetched while
// other work goes on. Beyond the caches a replay's lookups are random reads of arrays of
// megabytes (a page's slot, a slot's last use and page), each waiting on the one before;
// issued a few lookups ahead, the hints let those reads overlap. Only a hint: it changes no
// value and no decision, and compiles to nothing on the device (a CUDA block hides latency by
// its threads instead) or where the compiler offers no prefetch.
#include "model/hd.hpp"

namespace kvtier {

// On x86-64 an asm volatile prefetch: GCC 12 drops some __builtin_prefetch calls that sit under
// a condition (ensure_each's hints of the coming victims were all gone from the -O3 binary, and
// a hint under `if (p >= 0)` at -O2), and an asm volatile is never dropped. Both forms fetch
// for reading (prefetcht0): __builtin_prefetch's write form emits the same on CPUs without
// PREFETCHW in the target flags.

KVT_HD inline void cache_hint_read([[maybe_unused]] const void* p) {
#if !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_prefetch(p, 0, 3);
#endif
}

KVT_HD inline void cache_hint_write([[maybe_unused]] const void* p) {
#if !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_prefetch(p, 1, 3);
#endif
}

}  // namespace kvtier
