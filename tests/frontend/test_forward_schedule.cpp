// The forward's schedule as both backends launch it (frontend/forward_schedule): the rule that
// picks where a mirror decode forward of the model reads the pages its step misses.
#include <gtest/gtest.h>

#include "frontend/forward_schedule.hpp"

namespace kvtier::frontend {
namespace {

TEST(ForwardSchedule, DecodeReadsInPlaceOnlyAfterASteadyDecodeForward) {
  // nothing before (a fill, or the first forward): the pool is cold
  EXPECT_FALSE(decode_reads_in_place(LastForward{}));
  // a prefill forward before, however few its misses
  EXPECT_FALSE(decode_reads_in_place(LastForward{false, 0, 96}));
  // a decode forward of 8 rows x 12 layers: up to 8 misses per row and layer
  EXPECT_TRUE(decode_reads_in_place(LastForward{true, 0, 96}));
  EXPECT_TRUE(decode_reads_in_place(LastForward{true, 8 * 96, 96}));
  EXPECT_FALSE(decode_reads_in_place(LastForward{true, 8 * 96 + 1, 96}));
  // the cold step of 8 x 16k: every selected page missed
  EXPECT_FALSE(decode_reads_in_place(LastForward{true, 24576, 96}));
}

TEST(ForwardSchedule, PrefetchRunsBesideAfterTheStep) {
  const ScheduleShape shape{Placement::mirror, ForwardKind::model, false, true};
  const auto ops = layer_schedule(shape);
  ASSERT_EQ(ops.size(), 7u);
  EXPECT_EQ(ops[2].op, LayerOp::residency);
  EXPECT_EQ(ops[2].lane, Lane::main);
  EXPECT_EQ(ops[3].op, LayerOp::prefetch);
  EXPECT_EQ(ops[3].lane, Lane::beside);
  EXPECT_FALSE(locates_first(shape));
  EXPECT_EQ(to_string(LayerOp::prefetch), "prefetch next layer");
}

}  // namespace
}  // namespace kvtier::frontend
