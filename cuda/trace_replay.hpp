#pragma once
// Trace replay on the GPU (`kvtier run --trace`): a selection trace replayed with real page
// data through one placement. Per forward and QSA layer: the K/V of the forward's new
// tokens is generated (deterministic, from position) and stored (write-through to the host
// bank for mirror), each row's selection is compacted on the device, the mirror runs
// ensure + the multi-bank miss copy + translate, and every selected token's K/V is read
// from where the placement keeps it and folded into a checksum (an attention kernel's
// memory traffic). Every residency decision is the core's, made exactly as the simulator
// makes it (sim/replay.cpp): page tables from the same FrontEnd, the same select width,
// the same step stamps, releases at request end.
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/kernels.hpp"
#include "model/kv_dtype.hpp"
#include "model/placement.hpp"
#include "sim/trace_source.hpp"

namespace kvtier::cuda {

struct ReplayConfig {
  Placement placement = Placement::mirror;
  KvDtype dtype = KvDtype::bf16;
  std::int64_t pool_pages = 0;  // mirror: slots per QSA layer
  EnsureForm form = EnsureForm::block;
  // Device placement only: also write every stored token to a host bank, as the mirror
  // does (isolates the cost of the write-through store on the same trace).
  bool write_through = false;
  // After every layer: compare the device's compacted query with the core's (FrontEnd),
  // and the device's copy list with the core's ensure (HeapVictims, as the simulator runs
  // it) on a CPU copy of the state; compute the expected checksum on the CPU. Synchronises
  // every layer: do not time with it.
  bool verify = false;
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
  double gpu_us = 0;  // CUDA events around the forward's work on the stream
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t evictions = 0;
  std::int64_t drops = 0;
  std::int64_t missing = 0;  // selected tokens read from a page that was not resident
  std::int64_t selected_tokens = 0;
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
};

struct ReplayResult {
  std::string placement;
  std::string dtype;
  std::int64_t pool_pages = 0;
  std::int64_t num_pages = 0;
  int layers = 0;
  std::vector<ReplayStep> steps;
  ReplayStep total;  // sums (forward = forwards replayed)
  unsigned long long checksum = 0;
  bool verified = false;
  unsigned long long expected_checksum = 0;  // with verify
  std::int64_t query_mismatches = 0;         // with verify: layer-steps
  std::int64_t decision_mismatches = 0;      // with verify: layer-steps
  std::string first_mismatch;
  std::int64_t device_bytes = 0;  // allocated for banks and pool
  std::int64_t host_bytes = 0;
};

// Replays `input` on device 0. Throws ConfigError / CapacityError like the simulator for
// configurations that cannot run, std::runtime_error when an ensure fails on the device.
ReplayResult replay_trace(const sim::TraceInput& input, const ReplayConfig& cfg);

// The checksum term sum of one token as launch_read folds it (for CPU references).
unsigned long long token_checksum(const PageLayout& layout, int layer, std::int64_t pos);

}  // namespace kvtier::cuda
