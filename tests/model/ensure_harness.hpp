#pragma once
// Runs the core's ensure over std::vectors for tests: scratch sized to the query, copy list
// trimmed to the misses.
#include <vector>

#include "model/ensure.hpp"

namespace kvtier::testing {

struct EnsureOutcome {
  EnsureResult result;
  std::vector<CopyOp> copies;
  std::vector<PageId> bypassed;
};

template <class Victims, class Admission = AdmitAll>
EnsureOutcome run_ensure(ResidencyState& st, Victims& victims, const std::vector<PageId>& query,
                         std::int64_t step, Admission admission = Admission{}) {
  const std::size_t n = query.size();
  std::vector<PageId> miss(n), bypass(n);
  std::vector<SlotId> vic(n);
  EnsureOutcome out;
  out.copies.resize(n);
  out.result = ensure_pages(st.view(), query.data(), static_cast<int>(n), step, victims,
                            EnsureScratch{miss.data(), vic.data(), bypass.data()},
                            out.copies.data(), admission);
  out.copies.resize(out.result.status == EnsureStatus::ok ? out.result.misses : 0);
  out.bypassed.assign(bypass.begin(), bypass.begin() + out.result.bypassed);
  return out;
}

// The invariants that must hold after every call: slot_of_page and page_of_slot inverse,
// no slot holding two pages, free slots stamped free.
inline ::testing::AssertionResult state_is_consistent(const ResidencyState& st) {
  for (PageId p = 0; p < st.num_pages(); ++p) {
    const SlotId s = st.slot_of(p);
    if (s == kNoSlot) continue;
    if (s < 0 || s >= st.num_slots()) {
      return ::testing::AssertionFailure() << "page " << p << " maps to bad slot " << s;
    }
    if (st.page_in(s) != p) {
      return ::testing::AssertionFailure()
             << "page " << p << " -> slot " << s << " -> page " << st.page_in(s);
    }
  }
  for (SlotId s = 0; s < st.num_slots(); ++s) {
    const PageId p = st.page_in(s);
    if (p == kNoPage) {
      if (st.last_use(s) != kFreeSlotStep) {
        return ::testing::AssertionFailure() << "free slot " << s << " has a step stamp";
      }
      continue;
    }
    if (p < 0 || p >= st.num_pages() || st.slot_of(p) != s) {
      return ::testing::AssertionFailure()
             << "slot " << s << " holds page " << p << " which does not map back";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvtier::testing
