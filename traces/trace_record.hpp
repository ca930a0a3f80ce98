#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "model/geometry.hpp"
#include "model/page_space.hpp"

namespace kvtier::traces {

inline constexpr std::uint32_t kTraceFormatVersion = 1;

// What every trace starts with: the geometry its selections refer to and where it came from.
struct TraceHeader {
  std::uint32_t version = kTraceFormatVersion;
  Geometry geometry;     // QSA layers, page size, compress ratio, budget, KV heads, head dim
  std::string producer;  // e.g. "kvtier trace gen --preset sparse-trained --seed 7 ..."
  std::string created;   // ISO 8601 UTC
  bool operator==(const TraceHeader&) const = default;
};

struct RequestBegin {
  RequestId id = 0;
  std::int64_t prompt_tokens = 0;
  // Prefix cache: the first shared_pages pages are those of request shared_with (0 pages:
  // nothing shared).
  RequestId shared_with = 0;
  std::int64_t shared_pages = 0;
  bool operator==(const RequestBegin&) const = default;
};

struct RequestEnd {
  RequestId id = 0;
  bool operator==(const RequestEnd&) const = default;
};

enum class RowKind : std::uint8_t { prefill, decode };

// One row of a forward: `count` consecutive tokens of one request starting at `position`
// (a decode row has count 1; a prefill chunk is one row whose selection is the union of its
// tokens' selections, which is what residency must cover for it).
struct ForwardRow {
  RequestId request = 0;
  std::int64_t position = 0;
  std::int32_t count = 1;
  RowKind kind = RowKind::decode;
  bool operator==(const ForwardRow&) const = default;
};

// One batch forward: its rows, and for every QSA layer (index into qsa_layer_ids) and row
// the selected block ids, ascending, distinct. Stored flat: selection(l, r) is
// ids[offsets[l * rows + r] .. offsets[l * rows + r + 1]).
struct Forward {
  std::vector<ForwardRow> rows;
  int layers = 0;
  std::vector<std::int64_t> offsets;  // [layers * rows + 1]
  std::vector<std::int32_t> ids;

  std::span<const std::int32_t> selection(int layer, int row) const {
    const std::size_t k = static_cast<std::size_t>(layer) * rows.size() + row;
    return {ids.data() + offsets[k], static_cast<std::size_t>(offsets[k + 1] - offsets[k])};
  }
  bool operator==(const Forward&) const = default;
};

using Record = std::variant<RequestBegin, RequestEnd, Forward>;

}  // namespace kvtier::traces
