#pragma once
// Trace replay on the GPU (`kvtier run --trace`): a selection trace replayed with real page
// data through one placement. Per forward and QSA layer: the K/V of the forward's new
// tokens is generated (deterministic, from position and layer) and stored where the
// placement keeps pages (write-through to the host bank for mirror), each row's selection is
// compacted on the device, the mirror runs ensure + the multi-bank miss copy + translate, and
// the row's selected tokens are read from where the placement keeps them, in one of two read
// modes (ReadMode):
//  - attend: the real QSA attention kernel (qsa::attend, cuda/qsa/qsa_kernels.hpp) with a
//    deterministic query per row, over the row's selected tokens through the row's page table
//    (logical pages for device and host, translated to pool slots for mirror); the K/V are
//    finite bf16 values stored with qsa::store_kv (bf16, or fp8 codes + scales). The outputs
//    are folded into a 64-bit digest: device, host and mirror give the same digest for the
//    same trace whenever neither drops pages (the same kernel reads the same bytes).
//  - checksum: every selected token's bytes (pseudo-random words, launch_fill) are read with
//    launch_read and folded into a checksum that verify recomputes on the CPU (an attention
//    kernel's memory traffic without its arithmetic; any geometry).
// Every residency decision is the core's, made exactly as the simulator makes it
// (sim/replay.cpp): page tables from the same FrontEnd, the same select width, the same step
// stamps, releases at request end.
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/kernels.hpp"
#include "cuda/step_phases.hpp"
#include "model/kv_dtype.hpp"
#include "model/mirror_policy.hpp"
#include "model/placement.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::cuda {

// How the replay reads each row's selected tokens (see the top of this file).
enum class ReadMode : std::uint8_t {
  attend,    // the QSA attention kernel; needs head_dim 256 and GQA group 12 (compiled sizes)
  checksum,  // read-and-checksum of pseudo-random bytes (what verify checks on the CPU)
};
std::string_view to_string(ReadMode m);
// "attend" or "checksum"; throws ConfigError naming `what` otherwise.
ReadMode parse_read_mode(std::string_view text, std::string_view what);

struct ReplayConfig {
  Placement placement = Placement::mirror;
  // The library's default stays the checksum mode (what existing callers and their CPU
  // references expect); `kvtier run --trace` defaults to attend (checksum with --verify).
  ReadMode read = ReadMode::checksum;
  KvDtype dtype = KvDtype::bf16;
  std::int64_t pool_pages = 0;  // mirror: slots per QSA layer
  EnsureForm form = EnsureForm::block;
  // Mirror: lru, or prefetch (PrefetchNextLayer: each layer's query ensured into the next
  // layer's pool beside the main stream; the step first, as with copy_first). hybrid is
  // refused by name (the simulator runs every policy).
  MirrorPolicy policy = MirrorPolicy::lru;
  // Device placement only: also write every stored token to a host bank, as the mirror
  // does (isolates the cost of the write-through store on the same trace).
  bool write_through = false;
  // After every layer: compare the device's compacted query with the core's (FrontEnd),
  // and the device's copy list with the core's ensure (HeapVictims, as the simulator runs
  // it) on a CPU copy of the state (mirror); in checksum mode also compute the expected
  // checksum on the CPU. Synchronises every layer: do not time with it.
  bool verify = false;
  // Mirror, attend, bf16: run the ensure and the miss copy before the attention, which then
  // reads every page from the pool (the default reads the misses from the host bank in place
  // while the ensure and copy run beside it; the same bytes, the same decisions).
  bool copy_first = false;
  // Mirror, in place: record where the residency steps beside the attention spend their time
  // (StepPhases, ReplayResult::step_phases), the last 65,536 of them.
  bool step_phases = false;
  // With verify: one JSON line per install, in the simulator's --decisions format.
  std::ostream* decisions = nullptr;
  std::int64_t max_forwards = -1;  // stop after this many forwards (-1: all)
  std::function<void(std::int64_t done, std::int64_t total)> on_forward;
};

struct ReplayStep {
  std::int64_t forward = 0;
  int rows = 0;
  int width = 0;  // select width (pages per row)
  std::int64_t tokens = 0;
  std::int64_t decode_tokens = 0;
  // GPU time of the forward (CUDA events). checksum: from before the first layer's K/V fill
  // to after the last read. attend: the QSA layers back to back, each from its store (mirror:
  // its table lookup or compaction) to the end of its attention, the mirror's last residency
  // step included; without --verify the layers run as one CUDA graph. The generation of every
  // layer's K/V and queries (standing in for the model's projections, done first), the
  // device/host compaction (only counts drops there) and the output digest are not timed.
  double gpu_us = 0;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t evictions = 0;
  std::int64_t prefetched = 0;  // prefetch policy: pages its ensures copied ahead
  std::int64_t drops = 0;
  // checksum: selected tokens read from a page that was not resident; attend (mirror):
  // selected pages not resident after the ensure (read as the zero dummy slot).
  std::int64_t missing = 0;
  std::int64_t selected_tokens = 0;
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  // Mirror: the attention read this forward's misses in place beside the residency step
  // (frontend::decode_reads_in_place picked it); false: the step ran first.
  bool reads_in_place = false;
  // Mirror, in place: the lanes its residency steps beside took and each step's blocks
  // (frontend::beside_steps); 0 where no step ran beside.
  int beside_lanes = 0;
  int beside_blocks = 0;
};

struct ReplayResult {
  std::string placement;
  std::string dtype;
  std::string read;           // "attend" or "checksum"
  std::string attend_kernel;  // attend: which qsa::attend kernel ran (see attend_kernel_name)
  std::string mirror_reads;   // mirror: where the attention reads the pages it missed
  int q_heads = 0;            // attend: query heads per row
  std::int64_t pool_pages = 0;
  std::int64_t num_pages = 0;
  int layers = 0;
  std::vector<ReplayStep> steps;
  ReplayStep total;  // sums (forward = forwards replayed)
  // checksum: the sum over every read word; attend: the digest of every attention output
  // (the fp32 bits of o [layer][row][q_head][256] of every forward, folded on the device).
  unsigned long long checksum = 0;
  bool verified = false;
  unsigned long long expected_checksum = 0;  // with verify, checksum mode
  std::int64_t query_mismatches = 0;         // with verify: layer-steps
  std::int64_t decision_mismatches = 0;      // with verify: layer-steps
  std::string first_mismatch;
  std::int64_t checksum_mismatches = 0;  // with verify, checksum mode: layer-forwards
  std::string first_checksum_mismatch;
  std::int64_t device_bytes = 0;  // allocated for banks and pool
  std::int64_t host_bytes = 0;
  StepPhases step_phases;  // with cfg.step_phases: the steps beside the attention
};

// Replays `input` on device 0. Throws ConfigError / CapacityError like the simulator for
// configurations that cannot run, std::runtime_error when an ensure fails on the device.
ReplayResult replay_trace(const traces::TraceInput& input, const ReplayConfig& cfg);

// The attention kernel qsa::attend runs for these banks ("mma_async", "mma_load", "simt"),
// with what it does in words.
std::string attend_kernel_name(bool fp8, bool host_banks);

// The checksum term sum of one token as launch_read folds it (for CPU references): the bytes
// stored for position `content` (negative: never written, zero bytes), read at position `pos`
// (the read keys every term by the reader's position).
unsigned long long token_checksum(const PageLayout& layout, int layer, std::int64_t content,
                                  std::int64_t pos);
inline unsigned long long token_checksum(const PageLayout& layout, int layer, std::int64_t pos) {
  return token_checksum(layout, layer, pos, pos);
}

}  // namespace kvtier::cuda
