#include "frontend/forward_schedule.hpp"

#include <algorithm>

#include "model/attend_grid.hpp"

namespace kvtier::frontend {
namespace {

using enum LayerOp;
constexpr Lane M = Lane::main;

constexpr ScheduledOp kReplayPlain[] = {{store, M}, {attend, M}};
constexpr ScheduledOp kReplayCopyFirst[] = {{residency, M}, {store, M}, {attend, M}};
constexpr ScheduledOp kReplayInPlace[] = {{store, M}, {residency, Lane::beside}, {attend, M}};
constexpr ScheduledOp kModelPlain[] = {
    {non_qsa, M}, {index_topk, M}, {store, M}, {attend, M}, {output_projection, M}};
constexpr ScheduledOp kModelCopyFirst[] = {{non_qsa, M}, {index_topk, M}, {residency, M},
                                           {store, M},   {attend, M},     {output_projection, M}};
constexpr ScheduledOp kReplayPrefetch[] = {
    {residency, M}, {prefetch, Lane::beside}, {store, M}, {attend, M}};
constexpr ScheduledOp kModelPrefetch[] = {
    {non_qsa, M}, {index_topk, M}, {residency, M},        {prefetch, Lane::beside},
    {store, M},   {attend, M},     {output_projection, M}};
constexpr ScheduledOp kModelInPlace[] = {{non_qsa, M}, {index_topk, M},
                                         {store, M},   {residency, Lane::beside},
                                         {attend, M},  {output_projection, M}};

}  // namespace

std::string_view to_string(LayerOp op) {
  switch (op) {
    case non_qsa:
      return "non-QSA layers";
    case index_topk:
      return "projections, index, top-k";
    case output_projection:
      return "gate, output projection";
    case residency:
      return "residency step";
    case store:
      return "store";
    case attend:
      return "attend";
    case prefetch:
      return "prefetch next layer";
  }
  return "?";
}

bool decode_reads_in_place(const LastForward& last) {
  return last.decode && last.misses <= kInPlaceMissesPerRowLayer * last.row_layers;
}

bool locates_first(const ScheduleShape& s) {
  return s.placement == Placement::mirror && s.mirror_in_place;
}

std::span<const ScheduledOp> layer_schedule(const ScheduleShape& s) {
  const bool model = s.kind == ForwardKind::model;
  if (s.placement != Placement::mirror) {
    return model ? std::span<const ScheduledOp>(kModelPlain) : kReplayPlain;
  }
  if (s.mirror_in_place) {
    return model ? std::span<const ScheduledOp>(kModelInPlace) : kReplayInPlace;
  }
  if (s.prefetch) return model ? std::span<const ScheduledOp>(kModelPrefetch) : kReplayPrefetch;
  return model ? std::span<const ScheduledOp>(kModelCopyFirst) : kReplayCopyFirst;
}

BesideJoin beside_join(const ScheduleShape& s) {
  return s.kind == ForwardKind::model ? BesideJoin{index_topk, 1} : BesideJoin{store, 2};
}

namespace {
bool steps_may_share(const ScheduleShape& s) {
  return s.placement == Placement::mirror && s.mirror_in_place &&
         s.kind == ForwardKind::trace_replay && s.state_per_layer;
}
}  // namespace

BesideSteps beside_steps(const ScheduleShape& s, std::int64_t attend_ctas, int sms) {
  if (!steps_may_share(s)) return {};
  for (const std::int64_t blocks : {kStepBesideBlocksWide, kStepBesideBlocks}) {
    const int held = kMaxBesideLanes * static_cast<int>(blocks);
    if (sms > held && attend_ctas <= attend_wave_ctas(sms - held))
      return {kMaxBesideLanes, static_cast<int>(blocks)};
  }
  return {};
}

std::int64_t widest_row_tokens(const traces::Forward& f, int compress_ratio) {
  std::int64_t widest = 0;
  for (std::size_t k = 0; k + 1 < f.offsets.size(); ++k)
    widest = std::max(widest, f.offsets[k + 1] - f.offsets[k]);
  return (widest + 1) * compress_ratio;
}

BesideSteps beside_steps(const ScheduleShape& s, const traces::Forward& f, const Geometry& g,
                         int sms) {
  if (!steps_may_share(s)) return {};  // before the scan of the forward's selections
  const auto widest = static_cast<int>(widest_row_tokens(f, g.compress_ratio));
  return beside_steps(s, attend_ctas(static_cast<int>(f.rows.size()), g.kv_heads, widest, sms),
                      sms);
}

}  // namespace kvtier::frontend
