#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/config_error.hpp"
#include "sim/event_queue.hpp"
#include "sim/timeline.hpp"

namespace kvtier::sim {
namespace {

TEST(EventQueue, RunsInTimeOrderAndFifoAtEqualTimes) {
  EventQueue q;
  std::string order;
  q.schedule(20, [&] { order += 'c'; });
  q.schedule(10, [&] { order += 'a'; });
  q.schedule(10, [&] { order += 'b'; });
  q.schedule(20, [&] { order += 'd'; });
  q.run();
  EXPECT_EQ(order, "abcd");
  EXPECT_EQ(q.now(), 20);
}

TEST(EventQueue, CancelledEventsDoNotRunAndStaleIdsAreRefused) {
  EventQueue q;
  std::string order;
  const EventId a = q.schedule(5, [&] { order += 'a'; });
  q.schedule(6, [&] { order += 'b'; });
  EXPECT_TRUE(q.cancel(a));
  EXPECT_FALSE(q.cancel(a));
  EXPECT_EQ(q.pending(), 1u);
  // The cancelled slot is reused only after its heap entry is gone; the old id stays dead.
  q.run();
  const EventId c = q.schedule(7, [&] { order += 'c'; });
  EXPECT_FALSE(q.cancel(a));
  q.run();
  EXPECT_EQ(order, "bc");
  EXPECT_FALSE(q.cancel(c));
}

TEST(EventQueue, EventsScheduledFromCallbacksKeepOrder) {
  EventQueue q;
  std::vector<int> seen;
  q.schedule(1, [&] {
    seen.push_back(1);
    q.schedule_in(0, [&] { seen.push_back(3); });
  });
  q.schedule(1, [&] { seen.push_back(2); });
  q.run();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
}

TEST(EventQueue, RefusesThePast) {
  EventQueue q;
  q.schedule(10, [] {});
  q.run();
  EXPECT_THROW(q.schedule(9, [] {}), std::logic_error);
}

// PCIe is full duplex: an H2D copy and a D2H store overlap; two H2D copies queue.
TEST(Timeline, ResourcesQueueFifoAndDirectionsOverlap) {
  Timeline t(true);
  const OpId k = t.add(Resource::compute, 10, {}, "k");
  const OpId a = t.add(Resource::h2d, 100, {k}, "a");
  const OpId b = t.add(Resource::d2h, 50, {k}, "b");
  const OpId c = t.add(Resource::h2d, 30, {k}, "c");
  const OpId d = t.add(Resource::compute, 5, {a, b}, "d");
  EXPECT_EQ(t.run_until(d), 115);
  EXPECT_EQ(t.end_of(a), 110);
  EXPECT_EQ(t.end_of(b), 60);
  EXPECT_EQ(t.end_of(c), 140);  // waits for a on the same link
  EXPECT_EQ(t.drain(), 140);
  EXPECT_EQ(t.busy_ns(Resource::h2d), 130);
  EXPECT_EQ(t.busy_ns(Resource::compute), 15);
  ASSERT_EQ(t.records().size(), 5u);
}

TEST(Timeline, LaterOpsStartAtTheTimeTheyAreAdded) {
  Timeline t;
  const OpId a = t.add(Resource::compute, 10, {}, "a");
  t.add(Resource::d2h, 100, {a}, "store");
  EXPECT_EQ(t.run_until(a), 10);
  const OpId b = t.add(Resource::d2h, 5, {}, "store 2");  // queues behind the first store
  const OpId c = t.add(Resource::compute, 7, {}, "c");
  EXPECT_EQ(t.run_until(c), 17);
  EXPECT_EQ(t.run_until(b), 115);
}

// Two chains on one resource (micro-batches' groups): when an op ends and readies its successor
// on the same resource while another op waits there, the resource still runs one op at a time
// (it once started both, the waiting op and the successor, at the same instant).
TEST(Timeline, AResourceRunsOneOpWhenASuccessorAndAWaitingOpAreReady) {
  Timeline t(true);
  const OpId a = t.add(Resource::compute, 10, {}, "a");
  const OpId c = t.add(Resource::compute, 5, {}, "c");   // another chain, waiting behind a
  const OpId b = t.add(Resource::compute, 5, {a}, "b");  // a's successor
  EXPECT_EQ(t.drain(), 20);
  EXPECT_EQ(t.end_of(c), 15);  // ready first, first in line
  EXPECT_EQ(t.end_of(b), 20);
  EXPECT_EQ(t.busy_ns(Resource::compute), 20);
  std::vector<OpRecord> r = t.records();
  std::sort(r.begin(), r.end(),
            [](const OpRecord& x, const OpRecord& y) { return x.start < y.start; });
  for (std::size_t i = 1; i < r.size(); ++i)
    EXPECT_GE(r[i].start, r[i - 1].end) << r[i].name;
}

// A clock past 2^63 ns is refused, not wrapped: each op below the cost model's 2^62 ns cap,
// two of them one after another on a resource pass it.
TEST(Timeline, ATimePastTheClocksRangeIsRefused) {
  Timeline t(false);
  constexpr TimeNs kHalf = std::int64_t{1} << 62;
  t.add(Resource::compute, kHalf, {}, "a");
  t.add(Resource::compute, kHalf, {}, "b");
  EXPECT_THROW(t.drain(), ConfigError);
  Timeline ok(false);
  ok.add(Resource::compute, kHalf, {}, "a");
  ok.add(Resource::h2d, kHalf, {}, "b");  // side by side: the clock reaches 2^62 only
  EXPECT_EQ(ok.drain(), kHalf);
}

}  // namespace
}  // namespace kvtier::sim
