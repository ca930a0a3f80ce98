#pragma once
// Kernel parameter structs and launchers of the residency engine. Every launcher only
// enqueues work on `stream` (no synchronisation, no allocation, fixed grid shapes, counts
// read from device memory), so a whole layer-step can be captured in one CUDA graph.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "model/ensure.hpp"
#include "model/page_layout.hpp"
#include "model/residency_state.hpp"

namespace kvtier::cuda {

// Selection compaction: row r's chosen blocks [rows, n_blocks] (ascending, -1 padded) and
// position pos[r] become its distinct logical pages out[r * width ..] (kNoPage padded),
// exactly as compact_row does; pages past the width are added to *dropped, rows whose input
// is unsorted or outside their page table to *bad_rows.
struct CompactParams {
  const std::int32_t* blocks;     // [rows, n_blocks]
  const std::int64_t* pos;        // [rows]
  const PageId* tables;           // [rows, table_stride] each row's request page table
  const std::int64_t* table_len;  // [rows]
  PageId* out;                    // [rows, width]
  int* dropped;                   // += pages beyond the width
  int* bad_rows;                  // += rows with a status other than ok
  int rows;
  int n_blocks;
  int table_stride;
  int width;
  int compress_ratio;
  int page_size;
  // [rows] or null: a nonzero entry makes the row's blocks count as none, so that only its
  // causal tail is queried (a prefill row that bypasses the pool: FrontEnd::plan_rows)
  const std::uint8_t* tail_only = nullptr;
};
// One block of 256 threads per row (block scan); rows the data-parallel form cannot prove
// sorted and in range are redone by the core's compact_row in one thread.
void launch_compact(const CompactParams& p, cudaStream_t stream);
// Reference form: one thread per row running compact_row (tests compare the two).
void launch_compact_core(const CompactParams& p, cudaStream_t stream);

// One ensure on the device state `st`; step read from *step. On success copies[0..misses)
// holds the core's copy list and *copy_count == misses; otherwise *copy_count == 0, the
// state is as the core leaves it and *errors is incremented.
struct EnsureParams {
  ResidencyView st;
  const PageId* query;  // [n] write pages first, kNoPage padding
  int n;
  const std::int64_t* step;
  PageId* miss_pages;  // scratch [n]
  SlotId* victims;     // scratch [n]
  CopyOp* copies;      // [n]
  int* copy_count;
  EnsureResult* result;
  int* errors;        // nullable: += 1 per failed ensure (null: a failure is not an error)
  long long* totals;  // nullable: [3] += hits, misses, evictions of every ensure that succeeds
};
enum class EnsureForm : std::uint8_t {
  core_thread,  // ensure_pages<ScanVictims, AdmitAll> compiled for the device, one thread
  block,        // one block of 1024 threads; the same decisions (see residency_kernels.cu)
  multi_block,  // marking in one block, victims by per-block partial top-m over slot chunks
                // on many SMs, merged in one block (launch_ensure_multi)
};
// core_thread and block; multi_block needs its scratch (launch_ensure_multi).
void launch_ensure(const EnsureParams& p, EnsureForm form, cudaStream_t stream);

// Scratch of the multi-block form for one state of num_slots slots (device memory).
struct MultiBlockScratch {
  SlotId* candidates;    // [multi_block_chunks(num_slots) * kMultiChunk]
  int* chunk_counts;     // [chunks] candidates kept per chunk
  int* chunk_evictable;  // [chunks]
  int* chunk_offsets;    // [chunks + 1]
  int* shared;           // [4]: misses, status, lookups, hits (between the kernels)
};
inline constexpr int kMultiChunk = 4096;  // slots per block of the partial top-m
inline int multi_block_chunks(SlotId num_slots) {
  return num_slots <= 0
             ? 1
             : static_cast<int>((std::int64_t{num_slots} + kMultiChunk - 1) / kMultiChunk);
}
// Three launches, fixed grids (capturable): mark hits and collect misses (one block);
// each block sorts its chunk of slots by (last_use, slot) and keeps its m best evictable
// ones; one block merges the kept candidates (a stable sort of at most 4096; beyond that
// it falls back to the core's ScanVictims in one thread) and installs.
void launch_ensure_multi(const EnsureParams& p, const MultiBlockScratch& s, cudaStream_t stream);

// Multi-bank copy of every miss of one ensure: for copy i < *count, for every bank of the
// layers [first_layer, first_layer + layers), host bank page copies[i].page -> pool slot
// copies[i].slot. One launch, fixed grid.
struct CopyParams {
  const CopyOp* copies;
  const int* count;
  const std::byte* const* host;  // [banks] device-mapped host banks
  std::byte* const* pool;        // [banks]
  PageLayout layout;
  int first_layer;
  int layers;
};
void launch_copy(const CopyParams& p, cudaStream_t stream);

// Write-through store of n tokens of one layer: entry i writes its bytes for every bank of
// the layer to the host bank (when host != null) and to the pool slot (when pool != null):
// slot = slot_of_page[page] when resident (mirror), the page itself when slot_of_page is
// null (device placement). Entries with a page outside [0, num_pages) or a token outside
// the page are counted in *bad and write nothing. (page, token) pairs must be distinct.
struct StoreParams {
  const PageId* pages;         // [n]
  const std::int32_t* tokens;  // [n] token within the page
  const std::byte* src[4];     // per bank kind: [n, token_bytes(kind)]
  std::byte* host[4];          // this layer's host banks (device-mapped), or null
  std::byte* pool[4];          // this layer's pool banks, or null
  const SlotId* slot_of_page;  // the layer's residency state, or null
  int* bad;
  PageLayout layout;
  PageId num_pages;
  int n;
};
void launch_store(const StoreParams& p, cudaStream_t stream);

// Block table logical -> physical with the core's translate_pages, element-wise; the
// non-resident real pages are added to *missing.
struct TranslateParams {
  const PageId* logical;
  SlotId* physical;
  const SlotId* slot_of_page;
  int* missing;
  PageId num_pages;
  SlotId dummy;
  int n;
};
void launch_translate(const TranslateParams& p, cudaStream_t stream);
// The tables of several layers with the core's locate_pages, one launch: physical[l * n + i] for
// logical[i] in layer l's state; pages not resident resolve to in_place_ref(page) (read from the
// host bank in place), and *in_place (when not null) counts those.
struct LocateParams {
  const PageId* logical;              // [n]
  SlotId* physical;                   // [layers][n]
  const SlotId* const* slot_of_page;  // [layers]: each layer's state
  int* in_place;                      // nullable
  PageId num_pages;
  int n;
  int layers;
};
void launch_locate(const LocateParams& p, cudaStream_t stream);

// The residency of one layer-step in one launch: compaction of the rows' selections into the
// ensure query (which starts with the written pages), the one-block ensure, the copy of its
// misses and the translate of a block table, with the same results as launch_compact,
// launch_ensure (EnsureForm::block), launch_copy and launch_translate one after the other
// (tests/cuda/test_residency_step.cpp). The first block to start (a ticket, not blockIdx)
// compacts and ensures; every block then copies and translates once that block has published
// the copy list. Launches that share a StepTicket must not overlap (one stream) and must have
// the same grid.
struct StepTicket {
  unsigned long long taken;      // blocks started, over every launch
  unsigned long long published;  // launches whose copy list is out
};
// Where a residency step's time goes (benchmarks: `kvtier bench residency`'s phase table). The
// leader takes clock64() at each phase's end, so that phases shorter than the global timer's
// tick still show, and the global timer at its start and its publish, which converts cycles to
// ns; every block adds its end (atomicMax, so the buffer starts zeroed).
enum StepStamp : int {
  kStampStartNs,      // global timer, the leader's first instruction
  kStampStart,        // clock64 from here to kStampPublished
  kStampTicket,       // the leader's ticket is back
  kStampCompacted,    // every row compacted into the query
  kStampChecked,      // ensure's range check
  kStampMarked,       // hits marked, misses claimed
  kStampSorted,       // misses in ascending order
  kStampVictims,      // victims found and ordered
  kStampInstalled,    // misses installed, result written
  kStampPublished,    // the copy list released to the other blocks
  kStampPublishedNs,  // global timer at the release
  kStampEndNs,        // global timer, the last block's end
  kStepStamps
};
struct StepStamps {
  unsigned long long* at = nullptr;  // [launches][kStepStamps]; null: none (every real run)
  int launches = 0;                  // launch k of the ticket writes row k % launches
};
struct ResidencyStepParams {
  CompactParams compact;  // compact.out = ensure.query + the written pages
  EnsureParams ensure;
  CopyParams copy;            // copies and count: the ensure's
  TranslateParams translate;  // n == 0: no translate
  StepTicket* ticket;         // zeroed device memory
  int blocks;                 // grid; 0: one block per SM
  StepStamps stamps{};
};
void launch_residency_step(const ResidencyStepParams& p, cudaStream_t stream);

// Drops every slot of a state (the core's flush_pool, slot-parallel).
void launch_flush(ResidencyView st, cudaStream_t stream);

// Reads the K/V of selected tokens and folds them into an order-independent 64-bit
// checksum (*checksum += ...): the memory traffic of an attention kernel. Token t of row r
// is positions[r * max_tokens + t] (-1 padding); its page is tables[r * table_stride +
// pos / page_size]. Where the bytes come from:
//  - banks = host bank (host placement, zero-copy over PCIe), resolve = null: page = slot;
//  - banks = pool and slot_of_page = null (device placement): slot = logical page;
//  - banks = pool and slot_of_page != null (mirror): slot = slot_of_page[page], and a page
//    that is not resident reads the zero dummy slot and counts in *missing.
struct ReadParams {
  const std::int64_t* positions;  // [rows, max_tokens]
  const PageId* tables;           // [rows, table_stride]
  const std::int64_t* table_len;  // [rows]
  const std::byte* const* banks;  // [banks] of the whole layout
  const SlotId* slot_of_page;
  int* missing;
  unsigned long long* checksum;
  PageLayout layout;
  int layer;
  int rows;
  int max_tokens;
  int table_stride;
  PageId num_pages;
  SlotId dummy;  // dummy slot (pool) or dummy page (host bank)
};
void launch_read(const ReadParams& p, cudaStream_t stream);

// Mirror rows that bypass the pool (FrontEnd::plan_rows): in `layers` consecutive slot tables
// [layers][rows][stride] (located or translated from logical [rows][stride]), entries
// [0, entries[r]) of row r become in_place_ref(page): read from the host bank whatever the
// pool holds, so that no ensure beside can change what they read.
struct InPlaceRowsParams {
  SlotId* tables;
  const PageId* logical;
  const std::int32_t* entries;  // [rows]
  int rows;
  int stride;
  int layers;
};
void launch_read_rows_in_place(const InPlaceRowsParams& p, cudaStream_t stream);

// The checksum term of one 8-byte word (shared with CPU references in tests).
KVT_HD inline unsigned long long checksum_term(unsigned long long word, std::int64_t pos,
                                               std::int64_t word_index) {
  unsigned long long z = word ^ (static_cast<unsigned long long>(pos) * 0x9E3779B97F4A7C15ull) ^
                         (static_cast<unsigned long long>(word_index) * 0xC2B2AE3D27D4EB4Full);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace kvtier::cuda

namespace kvtier::cuda {
// *step = value, or *step += 1: lets a captured graph advance its own step counter.
void launch_set_step(std::int64_t* step, std::int64_t value, cudaStream_t stream);
void launch_advance_step(std::int64_t* step, cudaStream_t stream);
}  // namespace kvtier::cuda

namespace kvtier::cuda {
// The core's release_page for each of n distinct pages (a request ended), page-parallel.
void launch_release(ResidencyView st, const PageId* pages, int n, cudaStream_t stream);

// Deterministic pseudo-random K/V (and fp8 scale) bytes of n tokens of one layer: 32-bit
// word w of bank kind k of the token at position positions[i] is token_word(pos, layer, k,
// w); dst[k] is [n, token_bytes(k)]. Stands in for the model computing K/V.
KVT_HD inline std::uint32_t token_word(std::int64_t pos, int layer, int kind, std::int64_t w) {
  unsigned long long z = static_cast<unsigned long long>(pos) * 0x9E3779B97F4A7C15ull +
                         static_cast<unsigned long long>(layer * 4 + kind) * 0xD1B54A32D192ED03ull +
                         static_cast<unsigned long long>(w) * 0x8CB92BA72F3D8DD7ull;
  z = (z ^ (z >> 32)) * 0xD6E8FEB86659FD93ull;
  z = (z ^ (z >> 32)) * 0xD6E8FEB86659FD93ull;
  return static_cast<std::uint32_t>(z ^ (z >> 32));
}
struct FillParams {
  const std::int64_t* positions;  // [n]
  std::byte* dst[4];
  PageLayout layout;
  int layer;
  int n;
};
void launch_fill(const FillParams& p, cudaStream_t stream);
}  // namespace kvtier::cuda
