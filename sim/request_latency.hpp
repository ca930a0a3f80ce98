#pragma once
// Per-request latency and link share of a simulated trace (docs/planner.md, "Latency
// figures"). The replay driver reports what happened (a request began, a forward ran from
// `start` to `end` with these rows, these pages crossed the link); this file turns it into
// each request's TTFT, TPOT percentiles and share of the host -> device bytes.
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/page_space.hpp"
#include "sim/event_queue.hpp"
#include "traces/trace_record.hpp"

namespace kvtier::sim {

// Order statistics of a set of values (ns), by nearest rank: pXX is the smallest value with at
// least XX % of the values at or below it, so every figure is one that was observed.
struct Percentiles {
  std::int64_t count = 0;  // 0: no values, every figure 0
  double p50 = 0, p95 = 0, p99 = 0, max = 0, mean = 0;
};
// Sorts `values` in place.
Percentiles percentiles(std::span<double> values);
// The nearest-rank p-th percentile (0 < p <= 100) of ascending `sorted` (not empty).
double nearest_rank(std::span<const double> sorted, double p);

struct RequestTimes {
  RequestId id = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t prefill_tokens = 0;  // tokens its prefill rows computed in the trace
  std::int64_t decode_tokens = 0;   // its decode rows (one token each)
  // There is no arrival process: a request arrives when its RequestBegin is read, i.e. at the
  // end of the forward before it (0 for those that begin the trace).
  TimeNs arrival_ns = 0;
  std::int64_t first_forward = -1;  // the first forward with a row of it; -1: none
  TimeNs first_forward_start_ns = -1;
  // Its first token: the end of the forward whose prefill row reaches the end of its prompt
  // (position + count >= prompt_tokens), or else of its first decode row; -1: none in the trace.
  TimeNs first_token_ns = -1;
  TimeNs last_token_ns = -1;  // the end of the last forward that gave it a token
  // Its token gaps: each decode token's time since the request's previous token (the first
  // decode token's since its first token). A decode row waits for its whole forward, so in a
  // forward that also runs prefill rows the gap is that whole forward's span.
  Percentiles tpot_ns;
  double h2d_bytes = 0;  // host -> device bytes charged to it (RequestLatency::charge_*)

  bool has_first_token() const { return first_token_ns >= 0; }
  TimeNs ttft_ns() const { return first_token_ns - arrival_ns; }
};

// Across requests.
struct LatencySummary {
  std::int64_t requests = 0;
  std::int64_t without_first_token = 0;  // their prefill does not finish within the trace
  Percentiles ttft_ns;                   // over the requests with a first token
  // Over every decode token of every request (its gap to its request's previous token, as in
  // RequestTimes::tpot_ns): the decode inter-token latency, each token counted once.
  Percentiles tpot_ns;
  double h2d_bytes = 0;               // every byte charged (equals SimResult::h2d_bytes)
  double unattributed_h2d_bytes = 0;  // a page in no request's table (none expected)
  Percentiles link_share;             // over requests: its h2d_bytes / all h2d_bytes, 0..1
};

// Accumulates the replay's events. The link's bytes are charged where the simulator knows
// who caused them: per page (a miss copy, a prefetch copy, a page missed or bypassed and read
// in place) to the request whose page table holds the page (a shared prefix page: the request
// that shares it out), and per row (host placement: the row's in-place reads and staged
// windows) to the row's request.
class RequestLatency {
 public:
  explicit RequestLatency(PageId num_pages) : owner_(static_cast<std::size_t>(num_pages), -1) {}

  // `shared` (the prefix pages it shares; may be empty) stay charged to the request that
  // holds them, `b.shared_with`.
  void begin(const traces::RequestBegin& b, TimeNs now, std::span<const PageId> shared);
  // Before a forward's link bytes are charged: its rows' requests.
  void start_forward(std::span<const traces::ForwardRow> rows);
  // `table` is the page table of row `row`'s request after the forward grew it: its pages not
  // yet seen (past the shared prefix) are the request's from now on.
  void own_table(int row, std::span<const PageId> table);
  void charge_page(PageId page, double bytes);
  void charge_row(int row, double bytes) { requests_[row_index_[row]].h2d_bytes += bytes; }
  // The forward `index` ran from `start` to `end`: first tokens and token gaps.
  void end_forward(std::span<const traces::ForwardRow> rows, std::int64_t index, TimeNs start,
                   TimeNs end);
  // Every request in the order it began, and the figures across them.
  std::vector<RequestTimes> finish(LatencySummary& summary);

 private:
  std::vector<RequestTimes> requests_;
  std::vector<std::vector<double>> gaps_;  // [requests] token gaps, ns
  std::unordered_map<RequestId, int> index_;
  std::vector<std::int32_t> owner_;  // [pages] index of the request holding it, -1: none
  std::vector<std::size_t> owned_;   // [requests] leading pages of its table already owned
  std::vector<int> row_index_;       // [rows of the forward] request index
  double unattributed_ = 0;
};

// {"count", "p50", "p95", "p99", "max", "mean"}, each figure x `scale` (ns -> us: 1e-3); the
// figures are null when there is no value.
boost::json::object percentiles_json(const Percentiles& p, double scale);
// {"requests", "without_first_token", "ttft_us", "tpot_us", "link_share", "h2d_bytes",
// "unattributed_h2d_bytes"}: what `kvtier sim --json` prints as "latency".
boost::json::object latency_json(const LatencySummary& s);
// One object per request (`kvtier sim --json`'s "per_request"): its tokens, arrival, first
// forward, first token, TTFT, last token (us; null when it has none), TPOT percentiles (us),
// H2D bytes and link share (of `all_h2d_bytes`).
boost::json::array requests_json(const std::vector<RequestTimes>& requests, double all_h2d_bytes);

}  // namespace kvtier::sim
