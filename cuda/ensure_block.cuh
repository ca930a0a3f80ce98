#pragma once
// The one-block ensure (the same decisions as the core's ensure_pages<ScanVictims, AdmitAll>) as
// device functions: the ensure kernels' block and multi-block forms and the one-launch
// residency step (cuda/residency_step.cu) run them.
#include <climits>

#include "cuda/kernels.hpp"
#include "model/victims_scan.hpp"

namespace kvtier::cuda::ensure_block {

// The result of an ensure that succeeded, its copy count and the caller's running totals
// (atomic: steps of different layers on two lanes beside the attention share them).
__device__ inline void finish_ok(const EnsureParams& p, const EnsureResult& r) {
  *p.result = r;
  *p.copy_count = r.misses;
  if (p.totals != nullptr) {
    auto* t = reinterpret_cast<unsigned long long*>(p.totals);
    atomicAdd(t, static_cast<unsigned long long>(r.hits));
    atomicAdd(t + 1, static_cast<unsigned long long>(r.misses));
    atomicAdd(t + 2, static_cast<unsigned long long>(r.evictions));
  }
}

// The result of an ensure that failed (the state is as the core leaves it): no copies, and one
// error unless the caller counts none (a prefetch that does not fit is skipped).
__device__ inline void finish_failed(const EnsureParams& p, const EnsureResult& r) {
  *p.result = r;
  *p.copy_count = 0;
  if (p.errors != nullptr) atomicAdd(p.errors, 1);
}

// An ensure with a query entry outside the page space (its first index): nothing changed.
__device__ inline void finish_out_of_range(const EnsureParams& p, int bad_index) {
  EnsureResult r;
  r.status = EnsureStatus::page_out_of_range;
  r.bad_index = bad_index;
  finish_failed(p, r);
}

// ---------------------------------------------------------------------------------------
// Ensure, one block. The same decisions as ensure_pages<ScanVictims, AdmitAll>:
//  1. range check: the first offending index (block min) -> page_out_of_range, no change;
//  2. hits: atomicMax(last_use[s], step) returns the old value, so exactly one thread sees
//     old < step for a slot and counts the hit; misses: atomicCAS(slot_of_page[p], kNoSlot,
//     kPendingSlot) lets exactly one thread collect each missing page;
//  3. the misses are ranked into ascending order (keys are distinct pages);
//  4. victims: the m smallest (last_use, slot) over slots with last_use < step. A radix
//     select over last_use - min finds the m-th smallest last_use T and how many slots with
//     last_use == T are needed; those are the lowest-indexed ones (warp ballots rank them in
//     slot order); all slots with last_use < T are taken. The m victims are then ranked by
//     (last_use, slot), the order ScanVictims returns;
//  5. the i-th miss goes to the i-th victim, as in the core.
// Hit marking runs before the victim search in both forms, so the victims see the same
// last_use values. The test tests/cuda/test_ensure_forms.cpp checks the decisions against
// the core on random states.
constexpr int kEnsureThreads = 1024;
constexpr int kWarps = kEnsureThreads / 32;
constexpr int kRadixBits = 8;
constexpr int kRadixBins = 1 << kRadixBits;
// Query entries a thread has in flight in the first phases (8 x 1024: a decode query of 8 rows
// in one round).
constexpr int kMarkBatch = 8;

// The first phases of ensure, shared by the one-block form and the multi-block form's mark
// kernel (every thread of the block calls them).
// s_bad = the smallest query index outside the page space (kNoPage is padding).
__device__ inline void record_first_bad_query(const EnsureParams& p, const ResidencyView& st,
                                              int& s_bad) {
  for (int base = 0; base < p.n; base += kMarkBatch * static_cast<int>(blockDim.x)) {
    PageId q[kMarkBatch];
#pragma unroll
    for (int b = 0; b < kMarkBatch; ++b) {
      const int i = base + b * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
      q[b] = i < p.n ? p.query[i] : kNoPage;
    }
#pragma unroll
    for (int b = 0; b < kMarkBatch; ++b) {
      const int i = base + b * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
      if (q[b] < kNoPage || q[b] >= st.num_pages) atomicMin(&s_bad, i);
    }
  }
}

// Resident pages get last_use = step (a hit the first time this step sees them); each missing
// page is claimed once (kPendingSlot) and appended to p.miss_pages[s_m++], in no order.
__device__ inline void mark_hits_and_collect_misses(const EnsureParams& p, const ResidencyView& st,
                                                    std::int64_t step, int& s_lookups, int& s_hits,
                                                    int& s_m) {
  // A thread's entries in batches: the query loads, then the slot loads, then the atomics of
  // a batch are all in flight together (one block: latency, not bandwidth, bounds this loop).
  // Within a thread, atomics on one address stay in program order, so a page listed twice
  // counts one hit and is claimed once, as in an entry-at-a-time loop.
  int lookups = 0, hits = 0;
  for (int base = 0; base < p.n; base += kMarkBatch * static_cast<int>(blockDim.x)) {
    PageId q[kMarkBatch];
    SlotId slot[kMarkBatch];
#pragma unroll
    for (int b = 0; b < kMarkBatch; ++b) {
      const int i = base + b * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
      q[b] = i < p.n ? p.query[i] : kNoPage;
    }
#pragma unroll
    for (int b = 0; b < kMarkBatch; ++b)
      slot[b] = q[b] != kNoPage ? st.slot_of_page[q[b]] : kPendingSlot;
    long long old[kMarkBatch];
#pragma unroll
    for (int b = 0; b < kMarkBatch; ++b) {
      old[b] = step;
      if (q[b] == kNoPage) continue;
      ++lookups;
      if (slot[b] >= 0) {
        old[b] = atomicMax(reinterpret_cast<long long*>(st.last_use + slot[b]),
                           static_cast<long long>(step));
      } else if (slot[b] == kNoSlot) {
        if (atomicCAS(st.slot_of_page + q[b], kNoSlot, kPendingSlot) == kNoSlot) {
          p.miss_pages[atomicAdd(&s_m, 1)] = q[b];
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kMarkBatch; ++b)
      hits += old[b] < step ? 1 : 0;
  }
  if (lookups) atomicAdd(&s_lookups, lookups);
  if (hits) atomicAdd(&s_hits, hits);
}

// p.miss_pages[0, m) into ascending order: a rank sort through p.victims (distinct keys).
// Ends without a barrier: callers that read miss_pages afterwards synchronise.
__device__ inline void sort_misses_ascending(const EnsureParams& p, int m) {
  for (int i = threadIdx.x; i < m; i += blockDim.x)
    p.victims[i] = p.miss_pages[i];
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += blockDim.x) {
    const PageId v = p.victims[i];
    int rank = 0;
    for (int j = 0; j < m; ++j)
      rank += p.victims[j] < v ? 1 : 0;
    p.miss_pages[rank] = v;
  }
}

// Step 5 of both block forms: the i-th miss goes to the i-th victim (every thread of the block
// calls it; the caller's barrier follows). Returns this thread's evictions.
__device__ inline int install_misses(const EnsureParams& p, const ResidencyView& st,
                                     std::int64_t step, int m) {
  int evictions = 0;
  for (int i = static_cast<int>(threadIdx.x); i < m; i += static_cast<int>(blockDim.x)) {
    const PageId pg = p.miss_pages[i];
    const SlotId s = p.victims[i];
    const PageId old = install_page(st, pg, s);
    if (old != kNoPage) ++evictions;
    st.last_use[s] = step;
    p.copies[i] = CopyOp{pg, s, old};
  }
  return evictions;
}

// Steps 1 and 2 at once, for a query the block holds in one round (n <= B x threads, B <=
// kMarkBatch; the caller takes the smallest B: the leader's phases cost their instructions
// more than their loads, bench/results/residency-step-h200-2026-12-02.md):
// each thread loads its entries and their slots once, the range check's barrier comes between
// the loads and the atomics, and nothing changes when an entry is out of range. The slots are
// read before the barrier: a page another thread claims meanwhile (a repeated miss) still fails
// the claim's compare-and-swap, so the decisions are those of the two passes above. Returns
// false (the state untouched, s_bad set) when an entry is out of range.
template <int B>
__device__ inline bool check_and_mark_one_round(const EnsureParams& p, const ResidencyView& st,
                                                std::int64_t step, int& s_bad, int& s_lookups,
                                                int& s_hits, int& s_m) {
  PageId q[B];
  SlotId slot[B];
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const int i = b * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    q[b] = i < p.n ? p.query[i] : kNoPage;
  }
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const int i = b * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    const bool bad = q[b] < kNoPage || q[b] >= st.num_pages;
    if (bad) atomicMin(&s_bad, i);
    slot[b] = q[b] != kNoPage && !bad ? st.slot_of_page[q[b]] : kPendingSlot;
  }
  __syncthreads();
  if (s_bad != INT_MAX) return false;
  int lookups = 0, hits = 0;
#pragma unroll
  for (int b = 0; b < B; ++b) {
    if (q[b] == kNoPage) continue;
    ++lookups;
    if (slot[b] >= 0) {
      const long long old = atomicMax(reinterpret_cast<long long*>(st.last_use + slot[b]),
                                      static_cast<long long>(step));
      hits += old < step ? 1 : 0;
    } else if (slot[b] == kNoSlot) {
      if (atomicCAS(st.slot_of_page + q[b], kNoSlot, kPendingSlot) == kNoSlot) {
        p.miss_pages[atomicAdd(&s_m, 1)] = q[b];
      }
    }
  }
  if (lookups) atomicAdd(&s_lookups, lookups);
  if (hits) atomicAdd(&s_hits, hits);
  return true;
}

// A phase's end in a benchmark's stamp row (kernels.hpp, StepStamp): thread 0's clock, after
// the barrier that ends the phase. Nothing when the row is null.
__device__ inline void stamp_clock(unsigned long long* row, StepStamp at) {
  if (row != nullptr && threadIdx.x == 0) row[at] = clock64();
}

// The one-block ensure: every thread of a block of kEnsureThreads calls it; all return
// together. `stamps`: a StepStamps row for the phases' ends, or null.
__device__ inline void ensure_in_one_block(const EnsureParams& p,
                                           unsigned long long* stamps = nullptr) {
  __shared__ int s_bad, s_lookups, s_hits, s_m, s_evictable, s_evictions;
  __shared__ unsigned long long s_min_key, s_max_key;
  __shared__ int s_hist[kRadixBins];
  __shared__ unsigned long long s_prefix;
  __shared__ int s_need;
  __shared__ int s_less_count;
  __shared__ int s_warp_eq[kWarps];
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const std::int64_t step = *p.step;
  const ResidencyView st = p.st;
  if (tid == 0) {
    s_bad = INT_MAX;
    s_lookups = s_hits = s_m = s_evictable = s_evictions = 0;
    s_min_key = ~0ull;
    s_max_key = 0;
    s_less_count = 0;
  }
  __syncthreads();
  // 1. range check, 2. hits and misses: in one round where the query allows
  if (p.n <= kMarkBatch * kEnsureThreads) {
    bool ok;
    if (p.n <= kEnsureThreads) {
      ok = check_and_mark_one_round<1>(p, st, step, s_bad, s_lookups, s_hits, s_m);
    } else if (p.n <= 4 * kEnsureThreads) {
      ok = check_and_mark_one_round<4>(p, st, step, s_bad, s_lookups, s_hits, s_m);
    } else {
      ok = check_and_mark_one_round<kMarkBatch>(p, st, step, s_bad, s_lookups, s_hits, s_m);
    }
    stamp_clock(stamps, kStampChecked);
    if (!ok) {
      if (tid == 0) finish_out_of_range(p, s_bad);
      return;
    }
  } else {
    record_first_bad_query(p, st, s_bad);
    __syncthreads();
    stamp_clock(stamps, kStampChecked);
    if (s_bad != INT_MAX) {
      if (tid == 0) finish_out_of_range(p, s_bad);
      return;
    }
    mark_hits_and_collect_misses(p, st, step, s_lookups, s_hits, s_m);
  }
  __syncthreads();
  stamp_clock(stamps, kStampMarked);
  const int m = s_m;
  // 3. ascending miss order: rank sort through the victims scratch (distinct keys).
  if (m > 1) {
    sort_misses_ascending(p, m);
    __syncthreads();
  }
  stamp_clock(stamps, kStampSorted);
  if (m > 0) {
    // 4a. evictable count and the range of their last_use, as keys last_use + 1 >= 0.
    int evictable = 0;
    unsigned long long kmin = ~0ull, kmax = 0;
    for (SlotId s = tid; s < st.num_slots; s += kEnsureThreads) {
      const std::int64_t u = st.last_use[s];
      if (u < step) {
        ++evictable;
        const unsigned long long k = static_cast<unsigned long long>(u - kFreeSlotStep);
        kmin = k < kmin ? k : kmin;
        kmax = k > kmax ? k : kmax;
      }
    }
    if (evictable) {
      atomicAdd(&s_evictable, evictable);
      atomicMin(&s_min_key, kmin);
      atomicMax(&s_max_key, kmax);
    }
    __syncthreads();
    if (s_evictable < m) {
      for (int i = tid; i < m; i += kEnsureThreads)
        st.slot_of_page[p.miss_pages[i]] = kNoSlot;
      if (tid == 0) {
        EnsureResult r;
        r.status = EnsureStatus::pool_too_small;
        r.lookups = s_lookups;
        r.hits = s_hits;
        r.misses = m;
        r.evictable = s_evictable;
        finish_failed(p, r);
      }
      return;
    }
    // 4b. radix select of the m-th smallest key - kmin, most significant digit first.
    const unsigned long long base = s_min_key;
    const unsigned long long range = s_max_key - base;
    int bits = 0;
    while (bits < 64 && (range >> bits) != 0)
      ++bits;
    const int passes = (bits + kRadixBits - 1) / kRadixBits;
    if (tid == 0) {
      s_prefix = 0;
      s_need = m;
    }
    __syncthreads();
    for (int pass = passes - 1; pass >= 0; --pass) {
      const int shift = pass * kRadixBits;
      for (int b = tid; b < kRadixBins; b += kEnsureThreads)
        s_hist[b] = 0;
      __syncthreads();
      const unsigned long long prefix = s_prefix;
      const int high = shift + kRadixBits;  // bits >= high must equal the prefix's
      for (SlotId s = tid; s < st.num_slots; s += kEnsureThreads) {
        const std::int64_t u = st.last_use[s];
        if (u >= step) continue;
        const unsigned long long k = static_cast<unsigned long long>(u - kFreeSlotStep) - base;
        if (high < 64 && (k >> high) != (prefix >> high)) continue;
        atomicAdd(&s_hist[(k >> shift) & (kRadixBins - 1)], 1);
      }
      __syncthreads();
      if (tid == 0) {
        int need = s_need;
        int d = 0;
        while (s_hist[d] < need) {
          need -= s_hist[d];
          ++d;
        }
        s_need = need;
        s_prefix = prefix | (static_cast<unsigned long long>(d) << shift);
      }
      __syncthreads();
    }
    const std::int64_t threshold =
        static_cast<std::int64_t>(s_prefix + base) + kFreeSlotStep;  // T as a last_use
    const int need_eq = s_need;  // slots with last_use == T to take, lowest index first
    // 4c. collect: slots with last_use < T anywhere (ranked later); the first need_eq slots
    // with last_use == T in slot order. Each warp owns a contiguous range of slots.
    const SlotId per_warp = (st.num_slots + kWarps - 1) / kWarps;
    const SlotId w_begin = static_cast<SlotId>(
        min(static_cast<long long>(warp) * per_warp, static_cast<long long>(st.num_slots)));
    const SlotId w_end = static_cast<SlotId>(
        min(static_cast<long long>(w_begin) + per_warp, static_cast<long long>(st.num_slots)));
    int eq_count = 0;
    for (SlotId s0 = w_begin; s0 < w_end; s0 += 32) {
      const SlotId s = s0 + lane;
      const bool eq = s < w_end && st.last_use[s] == threshold;
      eq_count += __popc(__ballot_sync(0xffffffffu, eq));
    }
    if (lane == 0) s_warp_eq[warp] = eq_count;
    __syncthreads();
    int eq_base = 0;
    for (int w = 0; w < warp; ++w)
      eq_base += s_warp_eq[w];
    const int n_less = m - need_eq;
    if (eq_base < need_eq) {
      for (SlotId s0 = w_begin; s0 < w_end; s0 += 32) {
        const SlotId s = s0 + lane;
        const bool eq = s < w_end && st.last_use[s] == threshold;
        const unsigned ballot = __ballot_sync(0xffffffffu, eq);
        const int r = eq_base + __popc(ballot & ((1u << lane) - 1u));
        if (eq && r < need_eq) p.victims[n_less + r] = s;
        eq_base += __popc(ballot);
        if (eq_base >= need_eq) break;
      }
    }
    for (SlotId s = tid; s < st.num_slots; s += kEnsureThreads) {
      if (st.last_use[s] < threshold) p.victims[atomicAdd(&s_less_count, 1)] = s;
    }
    __syncthreads();
    // 4d. order the victims with last_use < T by (last_use, slot); those == T already
    // follow in slot order. The ranks go through the copy list, unused until step 5.
    for (int i = tid; i < n_less; i += kEnsureThreads) {
      const SlotId v = p.victims[i];
      const std::int64_t uv = st.last_use[v];
      int rank = 0;
      for (int j = 0; j < n_less; ++j) {
        const SlotId o = p.victims[j];
        rank += lru_before(st.last_use[o], o, uv, v) ? 1 : 0;
      }
      p.copies[rank].slot = v;
    }
    __syncthreads();
    for (int i = tid; i < n_less; i += kEnsureThreads)
      p.victims[i] = p.copies[i].slot;
    __syncthreads();
  }
  stamp_clock(stamps, kStampVictims);
  // 5. install
  const int evictions = install_misses(p, st, step, m);
  if (evictions) atomicAdd(&s_evictions, evictions);
  __syncthreads();
  stamp_clock(stamps, kStampInstalled);
  if (tid == 0) {
    EnsureResult r;
    r.lookups = s_lookups;
    r.hits = s_hits;
    r.misses = m;
    r.evictions = s_evictions;
    finish_ok(p, r);
  }
}

}  // namespace kvtier::cuda::ensure_block
