#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/page_layout.hpp"
#include "model/page_space.hpp"

namespace kvtier::cuda {

// How a host bank was made ready: wall seconds, and the seconds the preparing threads spent
// faulting pages in and pinning them, summed over the threads.
struct HostBankTiming {
  double ready_s = 0;
  double touch_thread_s = 0;
  double pin_thread_s = 0;
  int threads = 0;
  std::int64_t pieces = 0;
  bool by_piece = false;  // registered piece by piece (else bank by bank)
};

// Called while a large allocation is under way: bytes prepared so far and in total.
using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

// The logical page space in pinned, device-mapped host memory: one bank per (QSA layer,
// K|V) and, for fp8, one per (QSA layer, K|V scale), bank b of layer l at l *
// banks_per_layer + b (PageLayout). Each bank holds num_pages + 1 pages at exactly
// (num_pages + 1) * page_bytes bytes (no power-of-two rounding); the last page is the zero
// dummy page. Memory is mapped anonymously (2 MiB pages where the kernel gives them), then
// prepared in 1 GiB pieces by several threads, each faulting its piece in and registering it
// with CUDA as mapped; where the device uses registered host pointers as they are (UVA on
// x86-64), a bank is registered piece by piece and stays one range for kernels, else bank by
// bank. Registering touched memory is several times faster than cudaHostAlloc for banks of
// tens of GiB (H200 host: 8 GiB took 3.4 s through cudaHostAlloc, 0.27 s to register once
// allocated and touched). Throws CapacityError before mapping anything when the bank is larger
// than the memory the system has available, and saying how many bytes were asked and how
// many are available when it cannot map or pin.
class HostBank {
 public:
  HostBank(const PageLayout& layout, PageId num_pages, const ProgressFn& progress = {});
  ~HostBank();
  HostBank(const HostBank&) = delete;
  HostBank& operator=(const HostBank&) = delete;

  const PageLayout& layout() const { return layout_; }
  PageId num_pages() const { return num_pages_; }
  int banks() const { return static_cast<int>(banks_.size()); }
  // Host address of bank b (readable by the CPU after the stream that wrote it is synced).
  std::byte* host(int b) const { return banks_[b].host; }
  // The same memory as seen from kernels (zero-copy over PCIe).
  std::byte* device(int b) const { return banks_[b].device; }
  std::int64_t bank_bytes(int b) const { return banks_[b].bytes; }
  std::int64_t total_bytes() const;
  // Device array [banks] of the device-mapped bank addresses, for kernels.
  std::byte* const* device_bank_table() const { return table_; }

  // Seconds from the constructor's start until the bank was ready (mapped, touched, pinned).
  double ready_s() const { return timing_.ready_s; }
  const HostBankTiming& timing() const { return timing_; }

  // Bytes the system reports as available (MemAvailable), or -1 when unknown.
  static std::int64_t available_host_bytes();
  // The bytes a bank of `num_pages` pages (+1 dummy per bank) of `layout` takes.
  static std::int64_t bytes_for(const PageLayout& layout, PageId num_pages);

 private:
  struct Bank {
    std::byte* host = nullptr;
    std::byte* device = nullptr;
    std::int64_t bytes = 0;
  };
  struct Piece {  // a range of one bank, registered on its own
    std::byte* host = nullptr;
    std::int64_t bytes = 0;
    bool registered = false;
  };
  void pin_pieces(std::int64_t total, const ProgressFn& progress);
  void release() noexcept;

  PageLayout layout_;
  PageId num_pages_;
  std::vector<Bank> banks_;
  std::vector<Piece> pieces_;
  std::byte** table_ = nullptr;  // device memory
  HostBankTiming timing_;
};

// The device pool: num_slots + 1 page-sized slots per bank with the host bank's per-page
// layout; the last slot is the zero dummy slot. Throws CapacityError with the bytes asked
// and the device memory free when cudaMalloc fails.
class DevicePool {
 public:
  DevicePool(const PageLayout& layout, SlotId num_slots);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  const PageLayout& layout() const { return layout_; }
  SlotId num_slots() const { return num_slots_; }
  int banks() const { return static_cast<int>(banks_.size()); }
  std::byte* bank(int b) const { return banks_[b]; }
  std::int64_t bank_bytes(int b) const;
  std::int64_t total_bytes() const;
  std::byte* const* device_bank_table() const { return table_; }

 private:
  void release() noexcept;
  PageLayout layout_;
  SlotId num_slots_;
  std::vector<std::byte*> banks_;
  std::byte** table_ = nullptr;
};

// Number of CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();

}  // namespace kvtier::cuda
