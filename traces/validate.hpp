#pragma once
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "traces/trace_record.hpp"

namespace kvtier::traces {

// Checks that a record stream is consistent with its geometry. Readers and writers both run
// it, so no invalid trace is ever written and none is ever handed to a simulator:
//  - a request is begun once before any row or end refers to it, and ended at most once;
//  - a forward has one selection per QSA layer and row (offsets well formed), at most one
//    row per request, count >= 1, count == 1 for decode rows, position >= 0;
//  - no request reaches past the geometry's largest context (max_context with YaRN, at most
//    kMaxContextTokens): prompt_tokens, shared_pages * page_size and position + count stay
//    within it, so no consumer's position arithmetic overflows and no per-block table that a
//    consumer sizes by the context can outgrow what the model itself could hold;
//  - each selection is strictly ascending and within the row's visible blocks:
//    0 <= id < (position + count) / compress_ratio; a decode row selects at most block_topk.
// Memory: the set of open requests.
class TraceValidator {
 public:
  explicit TraceValidator(const Geometry& g);
  // How much of a forward's id order the caller already guarantees. ids_ascending: every
  // selection is strictly ascending (the binary reader builds it so and rejects a duplicate
  // while it merges), so per selection only its bounds are checked (first id >= 0, last id
  // within the context, count), not every id.
  enum class IdOrder { unchecked, ids_ascending };
  // Returns an empty string when the record is valid, else what is wrong with it.
  std::string check(const Record& r, IdOrder order = IdOrder::unchecked);

 private:
  std::string check_forward(const Forward& f, IdOrder order);
  std::string beyond_context(const std::string& what) const;
  int layers_;
  int ratio_;
  int page_size_;
  std::int64_t max_context_;
  int topk_;
  std::unordered_set<RequestId> open_;
  std::vector<RequestId> seen_;  // scratch: the rows' requests
};

}  // namespace kvtier::traces
