#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/kernels.hpp"
#include "model/cost_model.hpp"
#include "model/ensure.hpp"
#include "model/page_layout.hpp"
#include "model/placement.hpp"

namespace kvtier::cuda {

struct MirrorConfig {
  PageLayout layout;
  ResidencyUnit unit = ResidencyUnit::layer_page;
  PageId num_pages = 0;
  SlotId num_slots = 0;
  int max_query = 0;  // longest ensure query (scratch and copy-list size)
  EnsureForm form = EnsureForm::block;
  // The step before the attention (residency_step_async, block form) on this many blocks; 0:
  // one per SM. Beside another micro-batch's forward, a few blocks still keep the link busy
  // with the miss copy and leave that forward the other SMs.
  int step_blocks = 0;
  // Steps beside the attention that may run at once (residency_beside_async's lanes, up to
  // frontend::kMaxBesideLanes), each with its own scratch, copy list and ticket: the trace
  // replay runs consecutive layers' steps on two streams (frontend::beside_steps).
  int beside_lanes = 1;
};
inline constexpr int kMaxStepBlocks = 65535;

// One token's bytes for one layer, every bank kind of the layout (K, V[, K scale, V scale]).
struct TokenBytes {
  PageId page;
  std::int32_t token;
  std::vector<std::byte> bytes[4];
};

// What a MirrorEngine ensure may take from the caller instead of its own state: the step
// stamp from another device word (the replay and the runner keep every layer's stamp in
// device memory, uploaded with the forward, instead of setting *step() per layer), and running
// totals [3] of hits, misses and evictions that the ensure adds to itself (no extra launch).
struct EnsureHooks {
  const std::int64_t* step = nullptr;  // null: *step()
  long long* totals = nullptr;         // null: none
  StepStamps stamps{};                 // the one-launch step's phase times (benchmarks)
};

// The mirror placement on the GPU: a HostBank holding every page, a DevicePool of slots,
// and the residency state(s) in device memory (one per layer, or one for the all-layers
// unit). Decisions are the core's (ensure kernels); this class only launches and moves
// bytes. The *_async members enqueue on a stream and never synchronise (graph-capturable);
// the plain members are synchronous conveniences for tests and tools.
// The table a residency step translates after its ensure (logical pages -> slots; pages not
// resident and padding -> dummy), and the counter of non-resident real pages (null: the
// engine's Counters::missing).
struct TranslateTarget {
  const PageId* logical = nullptr;
  SlotId* physical = nullptr;
  int n = 0;  // 0: no translate
  SlotId dummy = kNoSlot;
  int* missing = nullptr;
};

// Where the mirror's attention reads the pages its ensure misses (the figures' label).
inline const char* mirror_reads_name(bool in_place) {
  return in_place ? "misses in place from the host bank, beside the ensure"
                  : "through the pool after the ensure and miss copy";
}
// The label of a run whose decode forwards may read in place (frontend::decode_reads_in_place
// picks them): the runner's and the trace replay's.
std::string mirror_reads_rule(bool may_read_in_place);

class MirrorEngine {
 public:
  explicit MirrorEngine(const MirrorConfig& c, const ProgressFn& progress = {});
  MirrorEngine(const MirrorEngine&) = delete;
  MirrorEngine& operator=(const MirrorEngine&) = delete;

  const MirrorConfig& config() const { return cfg_; }
  const PageLayout& layout() const { return cfg_.layout; }
  HostBank& host() { return host_; }
  DevicePool& pool() { return pool_; }
  int state_index(int layer) const { return cfg_.unit == ResidencyUnit::layer_page ? layer : 0; }
  ResidencyView device_view(int layer) const;

  // Device-side outputs of the last ensure on a lane's scratch (lane 0: every ensure but the
  // steps beside on another lane).
  const CopyOp* copies(int lane = 0) const { return lane_scratch(lane).copies.get(); }
  const int* copy_count(int lane = 0) const { return lane_scratch(lane).copy_count.get(); }
  const EnsureResult* result(int lane = 0) const { return lane_scratch(lane).result.get(); }
  // Counters that accumulate: ensure errors, store entries outside the space, translate
  // misses. Reset with reset_counters_async.
  struct Counters {
    int ensure_errors;
    int bad_stores;
    int missing;
  };
  Counters* counters() const { return counters_.get(); }
  std::int64_t* step() const { return step_.get(); }

  // The parameters ensure_async launches with (for callers that time ensure alone); `lane`: the
  // scratch of that lane of steps beside.
  EnsureParams ensure_params(int layer, const PageId* d_query, int n, const EnsureHooks& hooks = {},
                             int lane = 0) const;
  // ensure alone (the configured form).
  void ensure_only_async(int layer, const PageId* d_query, int n, cudaStream_t s,
                         const EnsureHooks& hooks = {});
  // ensure (the configured form) + the multi-bank copy of its misses.
  void ensure_async(int layer, const PageId* d_query, int n, cudaStream_t s,
                    const EnsureHooks& hooks = {});
  void translate_async(int layer, const PageId* d_logical, int n, SlotId* d_physical,
                       cudaStream_t s);
  // The pool tables of layers [first, first + layers) before their ensures, in one launch
  // (launch_locate): d_physical[l * n + i] is logical page d_logical[i] in layer first + l's
  // state, its slot when resident, else in_place_ref(page), read from the host bank;
  // *d_in_place (when not null) counts those. Several layers at once need the
  // per-layer unit: each table stays valid until its own layer's ensure, which changes no slot
  // of a page in its query.
  void locate_async(int first, int layers, const PageId* d_logical, int n, SlotId* d_physical,
                    int* d_in_place, cudaStream_t s);
  // One layer-step's residency: compaction `c` (c.out inside d_query, after the written pages),
  // ensure of d_query[0, n), the copy of its misses, then the translate `t`. The block form
  // runs it in one launch (launch_residency_step); the other forms as separate launches.
  void residency_step_async(int layer, const CompactParams& c, const PageId* d_query, int n,
                            const TranslateTarget& t, cudaStream_t s,
                            const EnsureHooks& hooks = {});
  // The same step without a translate, for a stream beside the attention (which reads through
  // locate_async's table), on kBesideBlocks blocks: enough to copy the misses of a prefill
  // chunk, few enough that the attention keeps its SMs while the leader compacts and ensures
  // (the block counts measured: bench/results/kernel-choices.md).
  // Steps on one lane run one at a time, in stream order; steps on different lanes (of
  // different states: different layers) may run at once, on different streams. `blocks`:
  // kBesideBlocks, or kBesideBlocksWide where the attend leaves two lanes of them their SMs
  // (frontend::beside_steps); each form has its own leader election per lane, so that a lane's
  // launches may change form between forwards. Throws std::invalid_argument for another count.
  static constexpr int kBesideBlocks = static_cast<int>(kStepBesideBlocks);
  static constexpr int kBesideBlocksWide = static_cast<int>(kStepBesideBlocksWide);
  void residency_beside_async(int layer, const CompactParams& c, const PageId* d_query, int n,
                              cudaStream_t s, const EnsureHooks& hooks = {}, int lane = 0,
                              int blocks = kBesideBlocks);
  // The prefetch policy's ensure (PrefetchNextLayer): d_query[0, n) ensured into `layer`'s state
  // at the step hooks.step gives (the issuing layer-step's prefetch stamp), and the copy of its
  // misses, in one launch on kBesideBlocks blocks, so that it runs beside the work on the main
  // stream. A prefetch that does not fit installs nothing and is not an error. The caller
  // orders it between the issuing layer's residency step and the next one of any layer (the
  // engine's scratch and copy list serve one ensure at a time); hooks.totals counts its hits,
  // misses and evictions apart from the demand ensures'.
  void prefetch_async(int layer, const PageId* d_query, int n, cudaStream_t s,
                      const EnsureHooks& hooks);
  // Write-through store of n tokens of `layer` (src[k]: [n, token_bytes(k)] device memory).
  void store_async(int layer, const PageId* d_pages, const std::int32_t* d_tokens,
                   const std::byte* const* src, int n, cudaStream_t s);
  void flush_async(cudaStream_t s);
  void reset_counters_async(cudaStream_t s);

  // Synchronous forms. ensure throws CapacityError (pool too small) or std::out_of_range
  // (page outside the space) like the functional store, with the state left as the core
  // leaves it.
  EnsureResult ensure(int layer, std::span<const PageId> query, std::int64_t step,
                      std::vector<CopyOp>& copies);
  void store(int layer, std::span<const TokenBytes> tokens);
  void flush();
  Counters read_counters();
  // The page as the attention kernel reads it through the block table (translated on the
  // device), and the host bank's copy.
  std::vector<std::byte> read_through_table(int layer, BankKind kind, PageId page);
  std::vector<std::byte> host_page(int layer, BankKind kind, PageId page);
  // Block table logical -> physical, translated on the device.
  std::vector<SlotId> translate(int layer, std::span<const PageId> logical);
  // A whole pool bank (num_slots + 1 slots), downloaded.
  std::vector<std::byte> download_pool_bank(int bank);
  // The residency state arrays, downloaded.
  void download_state(int layer, std::vector<SlotId>& slot_of_page,
                      std::vector<PageId>& page_of_slot, std::vector<std::int64_t>& last_use);

 private:
  int bank_of(int layer, BankKind kind) const {
    return layer * cfg_.layout.banks_per_layer + static_cast<int>(kind);
  }
  void check_layer(int layer) const;
  void check_query(int n) const;
  void check_step(int layer, const CompactParams& c, const PageId* d_query, int n) const;
  CopyParams copy_params(int layer, int lane = 0) const;
  void check_lane(int lane) const;
  void launch_ensure_form(const EnsureParams& ep, cudaStream_t s);  // the configured form
  TranslateParams translate_params(int layer, const TranslateTarget& t) const;

  MirrorConfig cfg_;
  HostBank host_;
  DevicePool pool_;
  struct State {
    DeviceArray<SlotId> slot_of_page;
    DeviceArray<PageId> page_of_slot;
    DeviceArray<std::int64_t> last_use;
  };
  std::vector<State> states_;
  // multi-block form: candidates, per-chunk counts and offsets, shared counters
  DeviceArray<SlotId> multi_candidates_;
  DeviceArray<int> multi_ints_;
  MultiBlockScratch multi_{};
  // An ensure's scratch and outputs; lane 0's serve every ensure but the steps beside on the
  // other lanes.
  struct Scratch {
    DeviceArray<PageId> miss_pages;
    DeviceArray<SlotId> victims;
    DeviceArray<CopyOp> copies;
    DeviceArray<int> copy_count;
    DeviceArray<EnsureResult> result;
  };
  std::vector<Scratch> scratch_;  // [beside_lanes]
  const Scratch& lane_scratch(int lane) const {
    check_lane(lane);
    return scratch_[static_cast<std::size_t>(lane)];
  }
  DeviceArray<Counters> counters_;
  DeviceArray<std::int64_t> step_;
  DeviceArray<StepTicket> ticket_;  // steps on one block per SM
  // steps beside: [lane][form], form 0 on kBesideBlocks blocks, 1 on kBesideBlocksWide (a
  // ticket's launch count assumes one grid size)
  DeviceArray<StepTicket> beside_tickets_;
  DeviceArray<StepTicket> prefetch_ticket_;  // prefetches (kBesideBlocks)
  DeviceArray<const SlotId*> slot_tables_;   // each layer's slot_of_page (locate)
  // staging for the synchronous forms
  DeviceArray<PageId> query_;
  DeviceArray<SlotId> one_slot_;
};

}  // namespace kvtier::cuda
