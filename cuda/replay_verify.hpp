#pragma once
// The trace replay's CPU references (--verify): the core's ensure per mirror layer, run as
// the simulator runs it and compared with the device's query and copies; and the checksum
// each (layer, forward) read must give, from what every slot holds.
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "cuda/engine.hpp"
#include "cuda/replay_stage.hpp"
#include "cuda/trace_replay.hpp"
#include "frontend/front_end.hpp"
#include "model/page_layout.hpp"
#include "model/residency_state.hpp"
#include "model/victims_heap.hpp"

namespace kvtier::cuda {

// "copy i: gpu ..., core ..." at the first difference of two copy lists.
std::string describe_copies(const std::vector<CopyOp>& gpu, const std::vector<CopyOp>& core);

class MirrorVerifier {
 public:
  MirrorVerifier(int layers, PageId pages, SlotId slots);
  // a request ended: the core releases its pages in every layer
  void release(std::span<const PageId> freed);
  // After layer `layer`'s compaction and ensure of forward `forward` finished on the device
  // (the stream synchronised): the core's query and copies against the device's, counted in
  // res; the device's copies as decision lines when `decisions` is set.
  void check_layer(frontend::FrontEnd& fe, const traces::Forward& f, int layer, int width,
                   std::int64_t forward, std::int64_t step, const PageId* d_query, int qlen,
                   const MirrorEngine& engine, ReplayResult& res, std::ostream* decisions);
  // After the prefetch that layer `layer`'s layer-step `layer_step_index` issued into layer
  // layer + 1's pool finished on the device: the core's PrefetchNextLayer on the query
  // check_layer last built, against the device's copies; decision lines as check_layer's.
  void check_prefetch(int layer, std::int64_t forward, std::int64_t layer_step_index,
                      const MirrorEngine& engine, ReplayResult& res, std::ostream* decisions);

 private:
  // The device's last copy list, into gpu_copies_; counts a mismatch against cpu_copies_.
  void compare_copies(const MirrorEngine& engine, const std::string& where, ReplayResult& res);
  struct LayerState {  // the core's residency of one layer's pool
    ResidencyState state;
    HeapVictims victims;
    LayerState(PageId pages, SlotId slots) : state(pages, slots), victims(slots) {}
  };
  std::vector<LayerState> pools_;
  std::vector<CopyOp> gpu_copies_, cpu_copies_;
  std::vector<PageId> cpu_miss_, gpu_query_;
  std::vector<PageId> last_query_;  // the core's query of the last layer checked
  std::vector<SlotId> cpu_victims_;
};

// What each (page, token) slot of the bank holds: the position last stored there, -1 while
// never written (zeros). Every layer stores the same positions, so one map serves them all.
// A shared prefix can be read before its owner's prefill wrote it (requests admitted
// together): those slots read zeros, or what a request that freed the page left.
class SlotContents {
 public:
  SlotContents(PageId pages, int page_size);
  void record_stores(const StagedForward& sf);
  // The checksum launch_read folds over layer `layer`'s reads of the staged forward.
  unsigned long long expected(const PageLayout& layout, int layer, const StagedForward& sf) const;

 private:
  std::size_t page_size_;
  std::vector<std::int64_t> content_;
};

}  // namespace kvtier::cuda
