#pragma once
// The ops of a forward as the CUDA backend launches them, described once. The GPU trace
// replay (cuda/trace_replay.cpp) launches by walking this list and the simulator
// (sim/replay.cpp) prices the same list, so the simulator's timeline names the backend's
// kernels, in the backend's order, on the backend's streams, and the two cannot drift apart.
#include <cstdint>
#include <span>
#include <string_view>

#include "model/cost_model.hpp"
#include "model/geometry.hpp"
#include "model/placement.hpp"
#include "traces/trace_record.hpp"

namespace kvtier::frontend {

// One op of a QSA layer-step (a kernel, or a fixed group of kernels launched together).
enum class LayerOp : std::uint8_t {
  non_qsa,     // model forward: the layers without KV pages before this QSA layer
  index_topk,  // model forward: RMSNorm, the six input projections, RoPE + compress, index
               // scoring, top-k, expand
  residency,   // mirror: compaction + ensure + miss copy (+ translate), one launch
  store,       // the new tokens' K/V into the pool or bank (written through for mirror, host)
  attend,      // the attention over the rows' selections (+ the split merge)
  prefetch,    // mirror, prefetch policy: the layer's query ensured into the next layer's pool
               // and its misses copied, one launch beside (not after the last layer)
  output_projection,  // model forward: the sigmoid gate and the output projection into the
                      // residual stream
};
std::string_view to_string(LayerOp op);

// The stream an op runs on: the forward's own, or the stream beside it where the mirror's
// residency step runs while the attention reads the pages it missed in place.
enum class Lane : std::uint8_t { main, beside };

struct ScheduledOp {
  LayerOp op;
  Lane lane;
};

// Which forward: the model's (kvtier run --weights: the indexer picks the selection) or the
// trace replay's (kvtier run --trace: the selection comes from the trace, and the replay's
// timed span is the layers' store .. attend).
enum class ForwardKind : std::uint8_t { model, trace_replay };

struct ScheduleShape {
  Placement placement = Placement::device;
  ForwardKind kind = ForwardKind::trace_replay;
  // Mirror: the attention reads the pages it missed from the host bank in place while the
  // residency step runs beside it (the default for bf16); false: the step first, then the
  // attention reads every page from the pool (--copy-first, --verify, fp8).
  bool mirror_in_place = true;
  // Mirror, the step first, per-layer pools: MirrorPolicy::prefetch's ensure of each layer's
  // query into the next layer's pool runs beside the main stream from the end of the layer's
  // residency step; the next layer's residency step waits for it (the ensures of one state
  // run in stamp order, and the store must not write a page its copy is still filling).
  bool prefetch = false;
  // Mirror: one residency state per layer (ResidencyUnit::layer_page), so that steps of
  // different layers touch different states; false: one state for every layer.
  bool state_per_layer = true;
};

// What the forward before this one did, for the rule below.
struct LastForward {
  bool decode = false;          // every row was a decode row
  std::int64_t misses = 0;      // demand misses of its residency steps, all layers
  std::int64_t row_layers = 0;  // its rows x QSA layers
};

// The model forward (kvtier run --weights), mirror, bf16, lru: a decode forward reads the pages
// its residency step misses in place beside the step when the forward before it was a decode
// forward that missed at most kInPlaceMissesPerRowLayer pages per row and layer. Otherwise (the
// first decode forward after a prefill or a fill, whose pool is cold, or one after many misses)
// the step runs first: read in place, a missed page crosses the link twice, for the attention
// and for the step's copy on its few blocks, and the next layer waits for that copy. Measured
// on the H200 (2026-12-02), in place against step first: a cold step of 8 x 16k (256 misses per
// row and layer) 99 against 70 ms, its steady steps (~0) 2.00 against 2.13 ms; the trace
// replay of r8-16k-128k at 8,255 slots (~7) 2.21 against 2.29 ms per decode forward, at 3,293
// slots (~78) 22.6 against 20.1 ms. The threshold is a round value between 7 and 78.
inline constexpr std::int64_t kInPlaceMissesPerRowLayer = 8;
bool decode_reads_in_place(const LastForward& last);

// Mirror in place: one launch before the forward's first layer locates every layer's table
// (resident pages to slots, the others in place from the host bank).
bool locates_first(const ScheduleShape& s);

// The ops of every QSA layer-step, in launch order.
std::span<const ScheduledOp> layer_schedule(const ScheduleShape& s);

// When a layer's residency runs beside, the main stream waits for it before the op
// `waits_before` of the layer `layers_later` layers on (the next layer's store .. is launched
// only after that wait); the forward ends once the last residency is done. The trace replay
// joins layer l's residency after layer l + 1's attention (before layer l + 2's store); the
// model forward joins it before layer l + 1's top-k, which rewrites the selection it reads.
struct BesideJoin {
  LayerOp waits_before;
  int layers_later;
};
BesideJoin beside_join(const ScheduleShape& s);

// The streams beside the forward's own that the residency steps beside take in turn: layer
// l's step runs on lane l % lanes, after the step before it on that lane. The trace replay joins
// a step two layers on, so with a state per layer, layer l + 1's step need not wait for layer
// l's, and a second lane lets consecutive layers' steps run at once, when the attend beside
// them leaves the SMs the second lane's step holds: its CTAs (`attend_ctas`, the forward's
// widest row, model/attend_grid.hpp) fit one wave of the multiprocessors that two steps leave
// (kStepBesideBlocks each, a whole SM a block). Measured on the H200 (2026-12-04,
// bench/results/beside-lanes-h200-2026-12-04.md), two lanes against one: single-32k-decode1000
// (1 row, 130 CTAs, a miss every step) 254.6 against 391.2 us per decode forward,
// prefill-shared-prefix (3 rows, 132 CTAs) 216.3 against 221.3, concurrent8-16k-128k (8 rows,
// 256 CTAs: a second wave beside two lanes) 298.1 against 291.3. The model forward joins each
// step before the next layer's top-k, and one state for every layer serialises the steps: one
// lane.
// Forwards without steps beside (not the mirror's in-place ones) take one lane.
// Where two lanes of kStepBesideBlocksWide blocks each also leave the attend one wave, each step
// takes that many: the copy of a step's misses beside the attention is bound by the loads its
// blocks have in flight (one row, ~5 misses a step: 25.8 us on 4 blocks, 17.7 on 8; 16 or 32
// blocks copy no faster and the launch gap grows; single-32k-decode1000 266.5 -> 253.8 us,
// bench/results/mirror-gap-probes-h200-2026-12-04.md). The simulator prices the step the same
// either way (its calibrated copy rate is the one the wide steps come near).
struct BesideSteps {
  int lanes = 1;
  int blocks = static_cast<int>(kStepBesideBlocks);  // each step's, a whole SM a block
  friend bool operator==(const BesideSteps&, const BesideSteps&) = default;
};
BesideSteps beside_steps(const ScheduleShape& s, std::int64_t attend_ctas, int sms);
inline constexpr int kMaxBesideLanes = 2;

// The tokens the widest row of a trace forward reads at most in one layer: its largest
// selection's blocks and a causal tail (the rule above prices the attend's CTAs by it, the
// same on both backends).
std::int64_t widest_row_tokens(const traces::Forward& f, int compress_ratio);

// The rule above for trace forward `f` on `sms` multiprocessors: its attend's CTAs at its widest
// row, counted only where the forward runs steps beside. Both backends call this one.
BesideSteps beside_steps(const ScheduleShape& s, const traces::Forward& f, const Geometry& g,
                         int sms);

}  // namespace kvtier::frontend
