#pragma once
// Where the model runner keeps the K/V pages of every QSA layer, per placement
// (docs/runner.md, Placements): device = a pool indexed by logical page; host = the pinned,
// device-mapped host bank read in place; mirror = the host bank as backing store plus a pool
// of slots managed by the residency core (cuda::MirrorEngine). Host and mirror also own the device
// staging window that prefill reads the host bank through. This class only hands out bank pointers
// in the QSA kernels' form; every residency decision stays in the core.
#include <cstdint>
#include <memory>

#include "cuda/engine.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "model/geometry.hpp"
#include "model/kv_dtype.hpp"
#include "model/placement.hpp"

namespace kvtier::runner {

struct PagedKvConfig {
  Placement placement = Placement::device;
  KvDtype dtype = KvDtype::bf16;
  PageId num_pages = 0;           // logical pages (the page space of every request)
  SlotId pool_slots = 0;          // mirror: slots per QSA layer
  int max_query = 1;              // mirror: longest ensure query
  int step_blocks = 0;            // mirror: blocks of the step before the attention (0: all SMs)
  std::int64_t window_pages = 0;  // host / mirror: pages of the prefill staging window
};

class PagedKv {
 public:
  PagedKv(const Geometry& g, const PagedKvConfig& c, const cuda::ProgressFn& progress = {});
  PagedKv(const PagedKv&) = delete;
  PagedKv& operator=(const PagedKv&) = delete;

  const PagedKvConfig& config() const { return c_; }
  const PageLayout& layout() const { return layout_; }
  Placement placement() const { return c_.placement; }

  // Logical pages in device memory (device placement) or the host bank (host, mirror); the
  // table is the request's logical page table.
  qsa::KvBanks logical_banks(int layer) const;
  std::int32_t logical_dummy() const { return c_.num_pages; }
  // Mirror: the pool of slots (read through the translated table).
  qsa::KvBanks pool_banks(int layer) const;
  std::int32_t pool_dummy() const { return c_.pool_slots; }
  cuda::MirrorEngine& mirror() { return *mirror_; }
  // Host / mirror: the staging window and a copy of pages into it.
  qsa::KvBanks window_banks() const;
  std::int64_t window_pages() const { return c_.window_pages; }
  // Window page i <- logical page pages[i] of `layer` (host bank), for i < n (<= window).
  void stage(int layer, const std::int32_t* pages, std::int64_t n, cudaStream_t s) const;

  std::int64_t device_bytes() const;
  std::int64_t host_bytes() const;
  double host_bank_s() const;  // the host bank's HostBank::ready_s (0 on placement device)

 private:
  PagedKvConfig c_;
  PageLayout layout_;
  std::unique_ptr<cuda::DevicePool> device_;  // device placement
  std::unique_ptr<cuda::HostBank> host_;      // host placement
  std::unique_ptr<cuda::MirrorEngine> mirror_;
  std::unique_ptr<cuda::DevicePool> window_;  // one layer's banks, window_pages pages
  std::vector<std::byte*> logical_;           // per bank: device pool or mapped host bank
  std::vector<std::byte*> pool_;              // mirror pool
};

}  // namespace kvtier::runner
