#include "sim/request_latency.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace kvtier::sim {

double nearest_rank(std::span<const double> sorted, double p) {
  const auto n = static_cast<double>(sorted.size());
  // rank = ceil(p / 100 x n), 1-based; the small epsilon keeps p x n that is an integer in
  // exact arithmetic (95 % of 20 = 19) from rounding up to the next rank.
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * n - 1e-9));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

Percentiles percentiles(std::span<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  p.count = static_cast<std::int64_t>(values.size());
  p.p50 = nearest_rank(values, 50);
  p.p95 = nearest_rank(values, 95);
  p.p99 = nearest_rank(values, 99);
  p.max = values.back();
  p.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(p.count);
  return p;
}

void RequestLatency::begin(const traces::RequestBegin& b, TimeNs now,
                           std::span<const PageId> shared) {
  const int index = static_cast<int>(requests_.size());
  if (!index_.emplace(b.id, index).second) {
    // scan_trace refuses such a trace before any replay; this is the replay's own guard.
    throw std::logic_error("request latency: request " + std::to_string(b.id) + " began twice");
  }
  RequestTimes t;
  t.id = b.id;
  t.prompt_tokens = b.prompt_tokens;
  t.arrival_ns = now;
  requests_.push_back(t);
  gaps_.emplace_back();
  owned_.push_back(shared.size());
  // The prefix pages may not be written yet (the holder's prefill can run later): until they
  // are, their bytes are the holder's too.
  const auto holder = index_.find(b.shared_with);
  if (holder != index_.end()) {
    for (PageId page : shared)
      owner_[static_cast<std::size_t>(page)] = holder->second;
  }
}

void RequestLatency::start_forward(std::span<const traces::ForwardRow> rows) {
  row_index_.resize(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    row_index_[r] = index_.at(rows[r].request);
}

void RequestLatency::own_table(int row, std::span<const PageId> table) {
  const int index = row_index_[static_cast<std::size_t>(row)];
  std::size_t& owned = owned_[static_cast<std::size_t>(index)];
  for (; owned < table.size(); ++owned)
    owner_[static_cast<std::size_t>(table[owned])] = index;
}

void RequestLatency::charge_page(PageId page, double bytes) {
  const std::int32_t o = owner_[static_cast<std::size_t>(page)];
  if (o >= 0) {
    requests_[static_cast<std::size_t>(o)].h2d_bytes += bytes;
  } else {
    unattributed_ += bytes;
  }
}

void RequestLatency::end_forward(std::span<const traces::ForwardRow> rows, std::int64_t index,
                                 TimeNs start, TimeNs end) {
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const traces::ForwardRow& row = rows[r];
    const auto i = static_cast<std::size_t>(row_index_[r]);
    RequestTimes& t = requests_[i];
    if (t.first_forward < 0) {
      t.first_forward = index;
      t.first_forward_start_ns = start;
    }
    if (row.kind == traces::RowKind::prefill) {
      t.prefill_tokens += row.count;
      if (!t.has_first_token() && row.position + row.count >= t.prompt_tokens) {
        t.first_token_ns = end;
        t.last_token_ns = end;
      }
      continue;
    }
    t.decode_tokens += row.count;
    if (!t.has_first_token()) {
      t.first_token_ns = end;  // no prefill row finished its prompt: this token is its first
    } else {
      gaps_[i].push_back(static_cast<double>(end - t.last_token_ns));
    }
    t.last_token_ns = end;
  }
}

std::vector<RequestTimes> RequestLatency::finish(LatencySummary& s) {
  s = {};
  s.requests = static_cast<std::int64_t>(requests_.size());
  std::vector<double> ttft, all_gaps, shares;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    RequestTimes& t = requests_[i];
    if (t.has_first_token()) {
      ttft.push_back(static_cast<double>(t.ttft_ns()));
    } else {
      ++s.without_first_token;
    }
    all_gaps.insert(all_gaps.end(), gaps_[i].begin(), gaps_[i].end());
    t.tpot_ns = percentiles(gaps_[i]);
    s.h2d_bytes += t.h2d_bytes;
  }
  s.unattributed_h2d_bytes = unattributed_;
  s.h2d_bytes += unattributed_;
  for (const RequestTimes& t : requests_)
    shares.push_back(s.h2d_bytes > 0 ? t.h2d_bytes / s.h2d_bytes : 0.0);
  s.ttft_ns = percentiles(ttft);
  s.tpot_ns = percentiles(all_gaps);
  s.link_share = percentiles(shares);
  gaps_.clear();
  return std::move(requests_);
}

namespace json = boost::json;

json::object percentiles_json(const Percentiles& p, double scale) {
  auto v = [&](double x) { return p.count > 0 ? json::value(x * scale) : json::value(nullptr); };
  return {{"count", p.count}, {"p50", v(p.p50)}, {"p95", v(p.p95)},
          {"p99", v(p.p99)},  {"max", v(p.max)}, {"mean", v(p.mean)}};
}

json::object latency_json(const LatencySummary& s) {
  return {{"requests", s.requests},
          {"without_first_token", s.without_first_token},
          {"ttft_us", percentiles_json(s.ttft_ns, 1e-3)},
          {"tpot_us", percentiles_json(s.tpot_ns, 1e-3)},
          {"link_share", percentiles_json(s.link_share, 1)},
          {"h2d_bytes", s.h2d_bytes},
          {"unattributed_h2d_bytes", s.unattributed_h2d_bytes}};
}

json::array requests_json(const std::vector<RequestTimes>& requests, double all_h2d_bytes) {
  json::array out;
  auto us = [](TimeNs t) {
    return t >= 0 ? json::value(static_cast<double>(t) / 1e3) : json::value(nullptr);
  };
  for (const RequestTimes& t : requests) {
    out.push_back(json::object{
        {"request", t.id},
        {"prompt_tokens", t.prompt_tokens},
        {"prefill_tokens", t.prefill_tokens},
        {"decode_tokens", t.decode_tokens},
        {"arrival_us", us(t.arrival_ns)},
        {"first_forward", t.first_forward >= 0 ? json::value(t.first_forward) : nullptr},
        {"first_token_us", us(t.first_token_ns)},
        {"ttft_us", t.has_first_token() ? us(t.ttft_ns()) : nullptr},
        {"last_token_us", us(t.last_token_ns)},
        {"tpot_us", percentiles_json(t.tpot_ns, 1e-3)},
        {"h2d_bytes", t.h2d_bytes},
        {"link_share", all_h2d_bytes > 0 ? t.h2d_bytes / all_h2d_bytes : 0.0}});
  }
  return out;
}

}  // namespace kvtier::sim
