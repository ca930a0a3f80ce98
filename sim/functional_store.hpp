#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/ensure.hpp"
#include "model/geometry.hpp"
#include "model/kv_dtype.hpp"
#include "model/page_layout.hpp"
#include "model/placement.hpp"
#include "model/residency_state.hpp"
#include "model/victims_heap.hpp"

namespace kvtier::sim {

// The mirror placement with real bytes, on the CPU: a host bank holding every logical page
// (plus the zero dummy page) and a pool of slots (plus the zero dummy slot), for every bank
// of every layer in the PageLayout. Residency decisions come from the core's ensure_pages;
// this class only moves bytes. It is the reference the CUDA backend is proven against:
// driven with the same operations, both must make the same copy lists and hold the same
// bytes.
class FunctionalStore {
 public:
  FunctionalStore(const Geometry& g, KvDtype dtype, ResidencyUnit unit, PageId num_pages,
                  SlotId num_slots);

  const PageLayout& layout() const { return layout_; }
  ResidencyUnit unit() const { return unit_; }
  PageId num_pages() const { return num_pages_; }
  SlotId num_slots() const { return num_slots_; }

  // Write-through store of one token's bytes for one bank of one layer: the host bank
  // always, and the pool slot too when the page is resident. `bytes` is token_bytes(kind)
  // long (codes, or the fp32 scales as raw bytes: never re-quantised).
  void store(int layer, BankKind kind, PageId page, int token, std::span<const std::byte> bytes);

  // One ensure of `query` (write pages first, kNoPage padding) for `layer` at `step`; with
  // the all-layers unit the layer argument selects nothing and one state serves every
  // layer. Performs the host -> slot copies of every bank the unit covers. Returns the
  // core's result; `copies` receives its copy list. Throws CapacityError when the pool is
  // too small for the query and std::out_of_range for a page id outside the space.
  EnsureResult ensure(int layer, std::span<const PageId> query, std::int64_t step,
                      std::vector<CopyOp>& copies);

  // Drops every slot (of every state); the host bank keeps all bytes.
  void flush();

  // Physical slot of `page` for `layer`'s block table (the dummy slot if not resident).
  SlotId slot_for(int layer, PageId page) const;
  // One bank page as the attention kernel would read it through the block table: the
  // slot's bytes, or the zero dummy slot's when the page is not resident.
  std::span<const std::byte> read_through_table(int layer, BankKind kind, PageId page) const;
  // The host bank's copy of the page (the bytes last stored).
  std::span<const std::byte> host_page(int layer, BankKind kind, PageId page) const;
  const ResidencyState& state(int layer) const { return states_[state_index(layer)]; }

  std::int64_t bytes_host_to_device() const { return bytes_h2d_; }
  std::int64_t bytes_device_to_host() const { return bytes_d2h_; }

 private:
  std::size_t state_index(int layer) const {
    return unit_ == ResidencyUnit::layer_page ? static_cast<std::size_t>(layer) : 0;
  }
  std::size_t bank_index(int layer, BankKind kind) const {
    return static_cast<std::size_t>(layer) * layout_.banks_per_layer +
           static_cast<std::size_t>(kind);
  }
  void check_bank(int layer, BankKind kind) const;

  PageLayout layout_;
  ResidencyUnit unit_;
  PageId num_pages_;
  SlotId num_slots_;
  std::vector<std::vector<std::byte>> host_;  // [bank] (num_pages + 1) pages
  std::vector<std::vector<std::byte>> pool_;  // [bank] (num_slots + 1) slots
  std::vector<ResidencyState> states_;        // [layers] or [1]
  std::vector<HeapVictims> victims_;
  std::vector<PageId> miss_scratch_;
  std::vector<SlotId> victim_scratch_;
  std::int64_t bytes_h2d_ = 0;
  std::int64_t bytes_d2h_ = 0;
};

}  // namespace kvtier::sim
