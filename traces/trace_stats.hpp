#pragma once
#include <boost/json.hpp>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "traces/trace_record.hpp"

namespace kvtier::traces {

// What `kvtier trace info` reports. Selection figures are over decode rows; "sparse" means
// the row's visible blocks exceed block_topk (otherwise every block is selected).
struct TraceSummary {
  std::uint64_t records = 0, requests = 0, forwards = 0;
  std::uint64_t prefill_rows = 0, decode_rows = 0, prefill_tokens = 0;
  std::uint64_t ids = 0, decode_ids = 0;
  int layers = 0;
  std::int64_t context_min = 0, context_max = 0;  // per request: last position + 1
  double context_mean = 0;
  // Distinct pages each (request, layer) touched, summed and averaged over (request, layer).
  std::uint64_t distinct_pages = 0;
  double distinct_pages_per_request_layer = 0;
  // [layer] mean |S_t & S_t-1| / |S_t| over decode rows following a decode row.
  std::vector<double> step_overlap;
  double step_overlap_mean = 0;
  // Mean |S_l & S_l+1| / |S_l| over decode rows and adjacent QSA layers.
  double adjacent_layer_overlap = 0;
  // [block b < 16] share of sparse decode selections holding block b; and of those holding
  // the newest complete block.
  std::vector<double> sink_share;
  double newest_share = 0;
  // Mean distinct blocks a (request, layer) selects over a window of W decode steps, over
  // working_set_windows[i] whole windows: with none (no request decoded W steps) the mean is
  // not defined (0 here, null in JSON, "n/a" in kvtier trace info).
  std::vector<int> windows;
  std::vector<double> working_set_blocks;
  std::vector<std::uint64_t> working_set_windows;
  // LRU cache per (request, layer) of lru_capacity[i] blocks (lru_multiple[i] x block_topk),
  // cold at the request's first decode row: share of decode-row block selections that hit.
  std::vector<int> lru_multiple;
  std::vector<std::int64_t> lru_capacity;
  std::vector<double> lru_hit;
  std::uint64_t lru_lookups = 0;  // decode-row block selections looked up; 0: lru_hit undefined

  boost::json::object to_json() const;
};

// Accumulates a TraceSummary one record at a time. Memory: per open request and layer, its
// previous selection, a page bitmap, the window stamps and the LRU lists (linear in the
// request's context in blocks); released at the request's end.
class TraceStats {
 public:
  explicit TraceStats(const TraceHeader& h, std::vector<int> lru_multiples = {2, 4, 8},
                      std::vector<int> windows = {8, 64, 512});
  ~TraceStats();
  void add(const Record& r);
  TraceSummary summary() const;

 private:
  struct RequestStats;
  void close_request(RequestId id);

  Geometry g_;
  std::vector<int> lru_multiples_, windows_;
  std::unordered_map<RequestId, std::unique_ptr<RequestStats>> open_;
  TraceSummary s_;
  std::uint64_t ctx_sum_ = 0, ctx_n_ = 0, request_layers_ = 0;
  std::vector<double> overlap_sum_;
  std::vector<std::uint64_t> overlap_n_;
  double adj_sum_ = 0;
  std::uint64_t adj_n_ = 0;
  std::vector<std::uint64_t> sink_hits_;
  std::uint64_t newest_hits_ = 0, sparse_n_ = 0;
  std::vector<double> ws_sum_;
  std::vector<std::uint64_t> ws_n_;
  std::vector<std::uint64_t> lru_hits_;
  std::uint64_t lru_n_ = 0;
};

}  // namespace kvtier::traces
