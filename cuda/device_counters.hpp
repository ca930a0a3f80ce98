#pragma once
// What a forward's kernels count on the device, read back once per forward by the trace
// replay and the runner alike.

namespace kvtier::cuda {

struct DeviceCounters {
  long long ensure[3];    // hits, misses, evictions: EnsureHooks::counters points here
  long long prefetch[3];  // the same of the prefetch policy's ensures
  int dropped;            // compaction: selected pages past the select width
  int bad_rows;           // compaction: rows that failed (a selection outside the row's table)
  // Pages looked up that were not resident. Trace replay: selected pages read as the zero
  // dummy slot. Runner: pages of whole request tables no row selected (expected, never read).
  int missing;
  int bad_stores;  // stores outside the page space
};

}  // namespace kvtier::cuda
