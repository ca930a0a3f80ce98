#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "sim/event_queue.hpp"

namespace kvtier::sim {

// The resources an operation can occupy. Each runs one operation at a time, in the order
// operations became ready (FIFO). PCIe is full duplex: H2D and D2H are separate resources.
// `beside` and `beside_second` are the streams beside the forward's where the mirror's
// residency steps run on a few SMs while the attention runs (frontend::Lane::beside; the
// second lane when frontend::beside_steps gives two).
// The prefetch copy stream is a chain of dependencies on the H2D link (its copies share the
// link's bandwidth with demand copies and in-place reads).
enum class Resource : std::uint8_t { compute, h2d, d2h, beside, beside_second };
inline constexpr int kResources = 5;
const char* resource_name(Resource r);
constexpr bool is_beside(Resource r) {
  return r == Resource::beside || r == Resource::beside_second;
}
// Lane k of the steps beside (frontend::beside_steps).
constexpr Resource beside_lane(int k) {
  return k == 0 ? Resource::beside : Resource::beside_second;
}

using OpId = std::int32_t;
inline constexpr OpId kNoOp = -1;

struct OpRecord {
  const char* name;  // static string
  Resource resource;
  std::int32_t layer;  // QSA layer index or -1
  std::int64_t forward;
  TimeNs start;
  TimeNs end;
};

// Operations as a dependency graph, run over one event queue. An op whose dependencies are
// done when it is added is ready at now(). run_until(op) advances time until that op ends,
// leaving later events pending: a mirror store may still drain while the next forward's ops
// are added. drain() runs everything left.
class Timeline {
 public:
  explicit Timeline(bool record = false) : record_(record) {}

  // An operation of `duration` ns on `r` that may start when every op in `deps` is done.
  OpId add(Resource r, TimeNs duration, std::span<const OpId> deps, const char* name,
           int layer = -1);
  OpId add(Resource r, TimeNs duration, std::initializer_list<OpId> deps, const char* name,
           int layer = -1) {
    return add(r, duration, std::span<const OpId>(deps.begin(), deps.size()), name, layer);
  }
  // Advances until `op` is done; returns its end time.
  TimeNs run_until(OpId op);
  TimeNs drain();
  void set_forward(std::int64_t forward) { forward_ = forward; }
  TimeNs end_of(OpId op) const { return ops_[op].end; }
  TimeNs busy_ns(Resource r) const { return busy_[static_cast<int>(r)]; }
  TimeNs now() const { return q_.now(); }
  const std::vector<OpRecord>& records() const { return records_; }

 private:
  struct Op {
    Resource resource;
    TimeNs duration;
    const char* name;
    std::int32_t layer;
    int waiting;  // unfinished deps
    std::vector<OpId> successors;
    TimeNs start = 0;
    TimeNs end = 0;
    bool done = false;
  };
  void ready(OpId op);
  void start_next(int r);
  void compact();

  EventQueue q_;
  std::vector<Op> ops_;
  std::array<std::deque<OpId>, kResources> queue_{};
  std::array<bool, kResources> running_{};
  std::array<TimeNs, kResources> busy_{};
  std::int64_t forward_ = 0;
  bool record_;
  std::vector<OpRecord> records_;
};

}  // namespace kvtier::sim
