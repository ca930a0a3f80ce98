#include "sim/functional_store.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"

namespace kvtier::sim {

FunctionalStore::FunctionalStore(const Geometry& g, KvDtype dtype, ResidencyUnit unit,
                                 PageId num_pages, SlotId num_slots)
    : layout_(PageLayout::make(g.qsa_layers(), g.page_size, g.kv_heads, g.head_dim,
                               dtype == KvDtype::fp8)),
      unit_(unit),
      num_pages_(num_pages),
      num_slots_(num_slots) {
  if (num_pages <= 0 || num_slots <= 0) {
    throw ConfigError("functional store: pages and slots must be positive");
  }
  const int banks = layout_.banks();
  host_.resize(banks);
  pool_.resize(banks);
  for (int b = 0; b < banks; ++b) {
    const std::int64_t pb = layout_.page_bytes(PageLayout::kind_of(b % layout_.banks_per_layer));
    host_[b].assign(static_cast<std::size_t>((std::int64_t{num_pages} + 1) * pb), std::byte{0});
    pool_[b].assign(static_cast<std::size_t>((std::int64_t{num_slots} + 1) * pb), std::byte{0});
  }
  const int nstates = unit == ResidencyUnit::layer_page ? layout_.layers : 1;
  for (int i = 0; i < nstates; ++i) {
    states_.emplace_back(num_pages, num_slots);
    victims_.emplace_back(num_slots);
  }
}

void FunctionalStore::check_bank(int layer, BankKind kind) const {
  if (layer < 0 || layer >= layout_.layers) {
    throw std::out_of_range("functional store: layer " + std::to_string(layer) + " outside 0.." +
                            std::to_string(layout_.layers - 1));
  }
  if (static_cast<int>(kind) >= layout_.banks_per_layer) {
    throw std::out_of_range("functional store: scale bank requested for a bf16 store");
  }
}

void FunctionalStore::store(int layer, BankKind kind, PageId page, int token,
                            std::span<const std::byte> bytes) {
  check_bank(layer, kind);
  if (page < 0 || page >= num_pages_ || token < 0 || token >= layout_.page_size) {
    throw std::out_of_range("functional store: store at page " + std::to_string(page) + " token " +
                            std::to_string(token) + " is outside the space");
  }
  const std::int64_t tb = layout_.token_bytes(kind);
  if (static_cast<std::int64_t>(bytes.size()) != tb) {
    throw std::invalid_argument("functional store: token bytes " + std::to_string(bytes.size()) +
                                ", expected " + std::to_string(tb));
  }
  const std::size_t b = bank_index(layer, kind);
  std::memcpy(host_[b].data() + layout_.offset(kind, page, token), bytes.data(), bytes.size());
  bytes_d2h_ += tb;
  const SlotId s = states_[state_index(layer)].slot_of(page);
  if (s >= 0)
    std::memcpy(pool_[b].data() + layout_.offset(kind, s, token), bytes.data(), bytes.size());
}

EnsureResult FunctionalStore::ensure(int layer, std::span<const PageId> query, std::int64_t step,
                                     std::vector<CopyOp>& copies) {
  if (layer < 0 || layer >= layout_.layers) {
    throw std::out_of_range("functional store: layer " + std::to_string(layer) + " out of range");
  }
  const std::size_t si = state_index(layer);
  const std::size_t n = query.size();
  miss_scratch_.resize(n);
  victim_scratch_.resize(n);
  copies.resize(n);
  const EnsureResult r = ensure_pages(
      states_[si].view(), query.data(), static_cast<int>(n), step, victims_[si],
      EnsureScratch{miss_scratch_.data(), victim_scratch_.data(), nullptr}, copies.data());
  if (r.status == EnsureStatus::page_out_of_range) {
    throw std::out_of_range("functional store: query entry " + std::to_string(r.bad_index) +
                            " is page " + std::to_string(query[r.bad_index]) + ", outside 0.." +
                            std::to_string(num_pages_ - 1));
  }
  if (r.status == EnsureStatus::pool_too_small) {
    throw CapacityError("functional store: " + std::to_string(r.misses) + " misses but " +
                        std::to_string(r.evictable) + " evictable slots of " +
                        std::to_string(num_slots_));
  }
  copies.resize(static_cast<std::size_t>(r.misses));
  // The unit decides which banks a copy moves: one layer's, or every layer's.
  const int first = unit_ == ResidencyUnit::layer_page ? layer : 0;
  const int last = unit_ == ResidencyUnit::layer_page ? layer + 1 : layout_.layers;
  for (const CopyOp& c : copies) {
    for (int l = first; l < last; ++l) {
      for (int k = 0; k < layout_.banks_per_layer; ++k) {
        const BankKind kind = PageLayout::kind_of(k);
        const std::size_t b = bank_index(l, kind);
        const std::int64_t pb = layout_.page_bytes(kind);
        std::memcpy(pool_[b].data() + layout_.offset(kind, c.slot, 0),
                    host_[b].data() + layout_.offset(kind, c.page, 0),
                    static_cast<std::size_t>(pb));
        bytes_h2d_ += pb;
      }
    }
  }
  return r;
}

void FunctionalStore::flush() {
  for (std::size_t i = 0; i < states_.size(); ++i)
    flush_pool(states_[i].view(), victims_[i]);
}

SlotId FunctionalStore::slot_for(int layer, PageId page) const {
  if (page < 0 || page >= num_pages_) return dummy_slot(num_slots_);
  const SlotId s = states_[state_index(layer)].slot_of(page);
  return s >= 0 ? s : dummy_slot(num_slots_);
}

std::span<const std::byte> FunctionalStore::read_through_table(int layer, BankKind kind,
                                                               PageId page) const {
  check_bank(layer, kind);
  const SlotId s = slot_for(layer, page);
  const std::size_t b = bank_index(layer, kind);
  return {pool_[b].data() + layout_.offset(kind, s, 0),
          static_cast<std::size_t>(layout_.page_bytes(kind))};
}

std::span<const std::byte> FunctionalStore::host_page(int layer, BankKind kind, PageId page) const {
  check_bank(layer, kind);
  if (page < 0 || page > num_pages_) {
    throw std::out_of_range("functional store: page " + std::to_string(page) + " outside the bank");
  }
  const std::size_t b = bank_index(layer, kind);
  return {host_[b].data() + layout_.offset(kind, page, 0),
          static_cast<std::size_t>(layout_.page_bytes(kind))};
}

}  // namespace kvtier::sim
