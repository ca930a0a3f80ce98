#include "tests/cuda/gpu_test_util.hpp"

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace kvtier::cuda::test {
namespace {
// Read by no one: its initialiser runs before main, before RapidCheck reads its settings.
// Fixed seed unless RC_PARAMS says otherwise; RapidCheck reads the variable lazily.
[[maybe_unused]] const int kSeedSet = [] { return setenv("RC_PARAMS", "seed=20261129", 0); }();
}  // namespace

std::string state_difference(MirrorEngine& a, MirrorEngine& b, int layer) {
  std::vector<SlotId> sa, sb;
  std::vector<PageId> pa, pb;
  std::vector<std::int64_t> la, lb;
  a.download_state(layer, sa, pa, la);
  b.download_state(layer, sb, pb, lb);
  if (sa != sb) return "slot of page, layer " + std::to_string(layer);
  if (pa != pb) return "page of slot, layer " + std::to_string(layer);
  if (la != lb) return "last use, layer " + std::to_string(layer);
  return "";
}

}  // namespace kvtier::cuda::test
