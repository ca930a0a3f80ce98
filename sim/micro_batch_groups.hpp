#pragma once
// Micro-batches in the simulator (SimConfig::micro_batches): the requests split into K groups
// as `kvtier run --micro-batches K` splits them, each group with pools of its own and its rows
// of a forward apart from the others'.
//
// The runner is given every request up front and splits them into contiguous ranges whose sizes
// differ by one at most. A trace's requests arrive over time, so here a request joins the group
// with the fewest open requests when it begins (the lowest index on a tie): requests that begin
// together spread over the groups in turn, as evenly as the runner's ranges, and a request that
// begins later fills the group its predecessors' ends left short.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "model/page_space.hpp"
#include "traces/trace_record.hpp"

namespace kvtier::sim {

// The most micro-batches a simulation takes (the runner's session runs at most 64 requests).
inline constexpr int kMaxSimMicroBatches = 64;

class MicroBatchGroups {
 public:
  // Throws ConfigError for a count outside 1..kMaxSimMicroBatches.
  explicit MicroBatchGroups(int groups);

  int groups() const { return static_cast<int>(open_.size()); }
  // Places a request that begins; returns its group. Throws std::logic_error if it is open.
  int begin(RequestId r);
  // Takes an ending request out; returns the group it was in. Throws std::logic_error if it is
  // not open.
  int end(RequestId r);
  // The group of an open request; throws std::logic_error for one that is not open.
  int group_of(RequestId r) const;
  int open(int group) const { return open_[static_cast<std::size_t>(group)]; }

  // `f`'s rows of each group as forwards of their own (`out[k]`, the rows in `f`'s order, each
  // with its selections of every layer); a group with no row of `f` gets a forward without rows.
  void split(const traces::Forward& f, std::vector<traces::Forward>& out) const;

 private:
  std::vector<int> open_;  // [groups] open requests
  std::unordered_map<RequestId, int> group_;
};

}  // namespace kvtier::sim
