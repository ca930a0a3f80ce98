#pragma once
#include <cstdint>
#include <string_view>

#include "model/admission.hpp"
#include "model/ensure.hpp"
#include "model/placement.hpp"
#include "model/step_stamp.hpp"

namespace kvtier {

// How a mirror pool is filled. Every backend that replays a trace either runs the policy
// through the rules below or refuses it by name; none re-decides what they decide.
enum class MirrorPolicy : std::uint8_t {
  lru,       // every miss is copied into the pool (AdmitAll: the write-through mirror)
  hybrid,    // a miss is read in place; only pages that come back are copied (AdmitOnReuse)
  prefetch,  // lru, plus PrefetchNextLayer
};
std::string_view to_string(MirrorPolicy p);
// "lru", "hybrid" or "prefetch"; throws ConfigError otherwise.
MirrorPolicy parse_mirror_policy(std::string_view text);

// "prefetch": while layer l attends, the pages layer l selected are ensured into layer l+1's
// pool, so that their copies overlap the work between the two layers (adjacent layers' indexers
// select overlapping pages). It needs a pool per layer (with one pool for all layers the
// pages are already there) and a next layer. The prefetch ensure takes the layer-step's
// prefetch stamp, between layer l's and layer l+1's demand stamps, so layer l+1's own ensure
// sees the prefetched pages as hits and can still evict them. A prefetch that does not fit is
// skipped: it is a hint, never a reason to fail a step.
struct PrefetchNextLayer {
  struct Config {};

  static constexpr bool applies(ResidencyUnit unit, int layer, int layers) {
    return unit == ResidencyUnit::layer_page && layer + 1 < layers;
  }

  // Ensures `query` (layer l's compacted query, `n` entries) into the next layer's state.
  // The copies are valid only when the result's status is ok.
  template <class Victims>
  static EnsureResult prefetch(ResidencyView next_layer, const PageId* query, int n,
                               std::int64_t layer_step_index, Victims& victims,
                               const EnsureScratch& scratch, CopyOp* copies) {
    return ensure_pages(next_layer, query, n, prefetch_stamp(layer_step_index), victims, scratch,
                        copies);
  }
};

}  // namespace kvtier
