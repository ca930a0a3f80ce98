#include "sim/timeline.hpp"

#include <limits>
#include <stdexcept>

#include "model/config_error.hpp"

namespace kvtier::sim {

const char* resource_name(Resource r) {
  switch (r) {
    case Resource::compute:
      return "gpu compute";
    case Resource::h2d:
      return "pcie h2d";
    case Resource::d2h:
      return "pcie d2h";
    case Resource::beside:
      return "gpu beside";
    case Resource::beside_second:
      return "gpu beside (second lane)";
  }
  return "?";
}

void Timeline::compact() {
  // Once nothing is pending, every op is done and no id is referenced any more.
  if (q_.pending() == 0) ops_.clear();
}

OpId Timeline::add(Resource r, TimeNs duration, std::span<const OpId> deps, const char* name,
                   int layer) {
  if (duration < 0) throw std::logic_error("negative op duration");
  const auto id = static_cast<OpId>(ops_.size());
  Op op{r, duration, name, layer, 0, {}};
  for (OpId d : deps) {
    if (d == kNoOp) continue;
    if (d < 0 || d >= id) throw std::logic_error("op depends on an op not yet added");
    if (!ops_[d].done) {
      ++op.waiting;
      ops_[d].successors.push_back(id);
    }
  }
  ops_.push_back(std::move(op));
  if (ops_[id].waiting == 0) ready(id);
  return id;
}

void Timeline::ready(OpId id) {
  const int r = static_cast<int>(ops_[id].resource);
  queue_[r].push_back(id);
  if (!running_[r]) start_next(r);
}

void Timeline::start_next(int r) {
  // An op that ends readies its successors before its resource takes the next op: one of them
  // on the same resource has started it already.
  if (running_[r] || queue_[r].empty()) return;
  const OpId id = queue_[r].front();
  queue_[r].pop_front();
  running_[r] = true;
  Op& op = ops_[id];
  op.start = q_.now();
  // Every op is priced below 2^62 ns (CostModel), but a trace of many such ops could still run
  // the clock past what it holds: refused, not wrapped.
  if (op.duration > std::numeric_limits<TimeNs>::max() - op.start)
    throw ConfigError(
        "simulator: the simulated time passes 2^63 ns (292 years); the profile's "
        "rates and fixed costs are far from any GPU's");
  op.end = op.start + op.duration;
  busy_[r] += op.duration;
  q_.schedule(op.end, [this, id, r] {
    Op& o = ops_[id];
    o.done = true;
    running_[r] = false;
    if (record_ && o.duration > 0) {
      records_.push_back({o.name, o.resource, o.layer, forward_, o.start, o.end});
    }
    // Copy: ready() may grow ops_ no further (only add() does), but keep it simple.
    const std::vector<OpId> succ = o.successors;
    for (OpId s : succ) {
      if (--ops_[s].waiting == 0) ready(s);
    }
    start_next(r);
  });
}

TimeNs Timeline::run_until(OpId op) {
  while (!ops_[op].done) {
    if (!q_.step()) throw std::logic_error("timeline: op never became ready (dependency cycle)");
  }
  const TimeNs end = ops_[op].end;
  compact();
  return end;
}

TimeNs Timeline::drain() {
  q_.run();
  compact();
  return q_.now();
}

}  // namespace kvtier::sim
