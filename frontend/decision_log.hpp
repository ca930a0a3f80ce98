#pragma once
// The decisions log (`kvtier sim --decisions`, `kvtier run --trace --verify --decisions`): one
// JSON line per page installed into a pool, in the order the core's ensure emitted them. Both
// backends write it here, so that two logs of the same trace and configuration compare byte
// for byte.
#include <cstdint>
#include <ostream>
#include <span>

#include "model/ensure.hpp"

namespace kvtier::frontend {

// Why a page was installed.
enum class InstallKind : std::uint8_t {
  demand,    // the layer-step's own selection
  prefetch,  // ahead of the next layer's demand (MirrorPolicy::prefetch)
};

// Writes one line per copy: {"forward","state","step","kind","page","slot","evicted"}.
// `state` is the pool's index (the QSA layer, or 0 when one pool serves every layer), `step`
// its stamp. Does nothing when `out` is null.
void log_installs(std::ostream* out, std::int64_t forward, int state, std::int64_t step,
                  InstallKind kind, std::span<const CopyOp> copies);

}  // namespace kvtier::frontend
