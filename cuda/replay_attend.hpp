#pragma once
// The trace replay's attend mode (`kvtier run --trace`, --read attend): per layer of a forward,
// the new tokens' K/V are stored where the placement keeps pages and the real QSA attention
// (qsa::attend) runs over the trace's selections. K/V and queries come from fixed pattern tables
// on the device (a stand-in for the model's projections, outside the timed span); every output
// row goes into a 64-bit digest. The residency (compaction, ensure, miss copy) stays in
// trace_replay.cpp: this part only reads through the table the placement gives it.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/engine.hpp"
#include "cuda/kernels.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/replay_stage.hpp"
#include "model/geometry.hpp"
#include "model/page_layout.hpp"
#include "model/page_space.hpp"
#include "model/placement.hpp"

namespace kvtier::cuda {

// Throws ConfigError unless the attention kernel is compiled for g (head_dim 256, GQA group 12,
// at most 16 KV heads); the message points to --read checksum.
void check_attend_geometry(const Geometry& g);

// Where a layer's K/V live and how the rows' page tables reach them.
struct AttendPlacement {
  Placement placement = Placement::device;
  std::byte* const* pool_banks = nullptr;  // device and mirror: the pool's banks
  std::byte* const* host_banks = nullptr;  // host, mirror, write-through: device-mapped banks
  bool write_through = false;              // device: stores also go to the host bank
  PageId num_pages = 0;
  SlotId slots = 0;  // mirror: pool slots
  // mirror: the table was located before the ensure (MirrorEngine::locate_async), and pages
  // not resident are read from the host bank in place while the ensure and copy run beside
  bool in_place = false;
  // mirror: the forward has rows that bypass the pool, whose tables read the host bank in
  // place (launch_read_rows_in_place), whatever the residency order
  bool bypass_rows = false;
};

class AttendReplay {
 public:
  AttendReplay(const Geometry& g, const PageLayout& layout, cudaStream_t s);
  AttendReplay(const AttendReplay&) = delete;
  AttendReplay& operator=(const AttendReplay&) = delete;

  // Lays out forward sf on the device: token lists, rows, the generation gathers, buffers and
  // the split count. `d_tables` (the rows' logical page tables, [rows][sf.stride]) must hold
  // the same forward when layers run.
  void stage(const StagedForward& sf, cudaStream_t s);
  // Generates every layer's K/V of the new tokens and the rows' queries (before the forward's
  // timed layers).
  void generate(cudaStream_t s);
  // Mirror: where the residency step translates the rows' tables `d_tables` to for `layer`
  // (slot per resident page, -1 otherwise: never written, read as the zero dummy slot).
  TranslateTarget pool_table_target(const PageId* d_tables, int layer);
  // Mirror: layer `layer`'s pool table ([layers][rows][stride], consecutive layers), which
  // MirrorEngine::locate_async fills for every layer at once in the in-place mode.
  SlotId* pool_tables(int layer) const;
  int pool_table_entries() const { return rows_ * stride_; }
  // Stores the new K/V of layer `layer` through the placement.
  void store(int layer, const AttendPlacement& at, const PageId* d_tables, cudaStream_t s);
  // Runs the layer's attention over the rows' token lists.
  void attend(int layer, const AttendPlacement& at, const PageId* d_tables, cudaStream_t s);
  // Folds every output row of the forward into the digest.
  void digest(cudaStream_t s);
  // The digest over every forward so far (synchronous).
  unsigned long long checksum() const;

 private:
  qsa::KvBanks layer_banks(int layer, const AttendPlacement& at) const;
  qsa::PageTable read_table(int layer, const AttendPlacement& at, const PageId* d_tables) const;

  Geometry g_;
  PageLayout layout_;
  int layers_;
  std::int64_t q_row_, kv_row_;  // elements of a query row, of one token's K (or V) row
  PageLayout kv_gather_, q_gather_, digest_layout_;
  int rows_ = 0, n_store_ = 0, max_tokens_ = 1, stride_ = 1, splits_ = 1;
  DeviceArray<std::uint16_t> d_pat_k_, d_pat_v_, d_pat_q0_, d_pat_q1_;
  DeviceArray<std::byte*> d_gen_ptrs_;  // kv src[2], kv dst[2], q src[2], q dst[2]
  DeviceArray<CopyOp> d_gen_kv_, d_gen_q_;
  DeviceArray<int> d_ints_;  // [0] K/V rows, [1] query rows, [2] scratch counter, [3] digest
  DeviceArray<std::int32_t> d_store_req_, d_store_pos32_, d_row_req_, d_rowpos32_, d_tokens32_;
  DeviceArray<SlotId> d_slot_tables_;
  DeviceArray<std::uint16_t> d_stage_k_, d_stage_v_, d_q_;
  DeviceArray<float> d_work_, d_o_;
  DeviceArray<std::int64_t> d_digest_pos_, d_digest_len_;
  DeviceArray<PageId> d_digest_table_;
  DeviceArray<std::byte*> d_digest_banks_;
  DeviceArray<unsigned long long> d_checksum_;
  // host staging, reused
  std::vector<std::int32_t> store_pos32_, row_req_, rowpos32_, tokens32_;
  std::vector<CopyOp> gen_kv_, gen_q_;
  std::vector<std::int64_t> digest_pos_;
  std::vector<PageId> digest_table_;
};

}  // namespace kvtier::cuda
