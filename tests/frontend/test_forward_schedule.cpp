// The forward's schedule as both backends launch it (frontend/forward_schedule): the rule that
// picks where a mirror decode forward of the model reads the pages its step misses, and the
// lanes its steps beside take.
#include <gtest/gtest.h>

#include "frontend/forward_schedule.hpp"
#include "model/attend_grid.hpp"

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

// Two lanes where the attend's one wave leaves the SMs of two steps beside, of 8 blocks each
// where it leaves them 16 SMs, else of 4: on 132 SMs, 2 x (132 - 16) = 232 CTAs and
// 2 x (132 - 8) = 248.
TEST(ForwardSchedule, StepsBesideTakeTwoLanesWhereTheAttendLeavesTheirSms) {
  const ScheduleShape replay{Placement::mirror, ForwardKind::trace_replay};
  const BesideSteps one_lane{1, 4}, wide{2, 8}, narrow{2, 4};
  EXPECT_EQ(BesideSteps{}, one_lane);
  // one decode row of 2,052 tokens, 2 KV heads: 65 splits, 130 CTAs
  EXPECT_EQ(attend_ctas(1, 2, 2052, 132), 130);
  EXPECT_EQ(beside_steps(replay, 130, 132), wide);
  EXPECT_EQ(beside_steps(replay, 232, 132), wide);
  EXPECT_EQ(beside_steps(replay, 233, 132), narrow);
  EXPECT_EQ(beside_steps(replay, 248, 132), narrow);
  // eight rows: 16 splits, 256 CTAs, a second wave beside two steps
  EXPECT_EQ(attend_ctas(8, 2, 2052, 132), 256);
  EXPECT_EQ(beside_steps(replay, 249, 132), one_lane);
  EXPECT_EQ(beside_steps(replay, 256, 132), one_lane);
  // too few SMs to leave any; just enough for two narrow steps
  EXPECT_EQ(beside_steps(replay, 1, 8), one_lane);
  EXPECT_EQ(beside_steps(replay, 2, 9), narrow);
  EXPECT_EQ(beside_steps(replay, 2, 17), wide);
  // the model forward joins each step before the next layer's top-k; one state for every layer
  // serialises the steps
  EXPECT_EQ(beside_steps(ScheduleShape{Placement::mirror, ForwardKind::model}, 1, 132), one_lane);
  ScheduleShape one_state = replay;
  one_state.state_per_layer = false;
  EXPECT_EQ(beside_steps(one_state, 1, 132), one_lane);
  // no steps beside: the step first, or not the mirror
  ScheduleShape step_first = replay;
  step_first.mirror_in_place = false;
  EXPECT_EQ(beside_steps(step_first, 1, 132), one_lane);
  EXPECT_EQ(beside_steps(ScheduleShape{Placement::device, ForwardKind::trace_replay}, 1, 132),
            one_lane);
  // from a forward record: one row of 512 blocks (2,052 tokens) against eight
  Geometry g;
  g.compress_ratio = 4;
  traces::Forward one;
  one.rows.resize(1);
  one.layers = 1;
  one.offsets = {0, 512};
  one.ids.resize(512);
  EXPECT_EQ(beside_steps(replay, one, g, 132), wide);
  traces::Forward eight = one;
  eight.rows.resize(8);
  eight.offsets = {0, 512, 1024, 1536, 2048, 2560, 3072, 3584, 4096};
  eight.ids.resize(4096);
  EXPECT_EQ(beside_steps(replay, eight, g, 132), one_lane);
}

TEST(ForwardSchedule, WidestRowTokensAreTheLargestSelectionAndATail) {
  traces::Forward f;
  f.rows.resize(2);
  f.layers = 2;
  // selections of 3, 0, 5 and 2 blocks (layer-major)
  f.offsets = {0, 3, 3, 8, 10};
  f.ids.resize(10);
  EXPECT_EQ(widest_row_tokens(f, 4), (5 + 1) * 4);
  EXPECT_EQ(widest_row_tokens(traces::Forward{}, 4), 4);
}

}  // namespace
}  // namespace kvtier::frontend
