#include "cuda/host_bank.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "cuda/cuda_check.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"

namespace kvtier::cuda {
namespace {

constexpr std::int64_t kChunk = std::int64_t{64} << 20;  // zeroing granule
constexpr std::int64_t kParallelAbove = std::int64_t{256} << 20;

std::string gib(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld bytes (%.2f GiB)", static_cast<long long>(bytes),
                static_cast<double>(bytes) / double(1 << 30));
  return buf;
}

// Zeroes [p, p + bytes) with several threads, calling progress from this thread.
void zero_parallel(std::byte* p, std::int64_t bytes, std::int64_t done_before, std::int64_t total,
                   const ProgressFn& progress) {
  if (bytes < kParallelAbove) {
    std::memset(p, 0, static_cast<std::size_t>(bytes));
    if (progress) progress(static_cast<std::uint64_t>(done_before + bytes), total);
    return;
  }
  const std::int64_t chunks = (bytes + kChunk - 1) / kChunk;
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  const unsigned nthreads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < nthreads; ++t) {
    workers.emplace_back([&] {
      for (std::int64_t c = next++; c < chunks; c = next++) {
        const std::int64_t off = c * kChunk;
        const std::int64_t len = std::min(kChunk, bytes - off);
        std::memset(p + off, 0, static_cast<std::size_t>(len));
        done += len;
      }
    });
  }
  while (done.load() < bytes) {
    if (progress) progress(static_cast<std::uint64_t>(done_before + done.load()), total);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& w : workers)
    w.join();
  if (progress) progress(static_cast<std::uint64_t>(done_before + bytes), total);
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::int64_t HostBank::available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return static_cast<std::int64_t>(kb) * 1024;
  }
  return -1;
}

HostBank::HostBank(const PageLayout& layout, PageId num_pages, const ProgressFn& progress)
    : layout_(layout), num_pages_(num_pages) {
  if (num_pages <= 0) throw ConfigError("host bank: the page count must be positive");
  const int nb = layout.banks();
  std::int64_t total = 0;
  for (int b = 0; b < nb; ++b)
    total += (std::int64_t{num_pages} + 1) *
             layout.page_bytes(PageLayout::kind_of(b % layout.banks_per_layer));
  banks_.resize(static_cast<std::size_t>(nb));
  std::int64_t done = 0;
  try {
    for (int b = 0; b < nb; ++b) {
      Bank& bank = banks_[static_cast<std::size_t>(b)];
      bank.bytes = (std::int64_t{num_pages} + 1) *
                   layout.page_bytes(PageLayout::kind_of(b % layout.banks_per_layer));
      void* p = mmap(nullptr, static_cast<std::size_t>(bank.bytes), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        throw CapacityError("host bank: cannot map bank " + std::to_string(b) + " of " +
                            gib(bank.bytes) + "; the whole bank asks " + gib(total) +
                            ", the system has " + gib(available_host_bytes()) + " available");
      }
      bank.host = static_cast<std::byte*>(p);
      // 2 MiB pages where the kernel allows: fewer pages to pin and to map for the GPU.
      (void)madvise(p, static_cast<std::size_t>(bank.bytes), MADV_HUGEPAGE);
      zero_parallel(bank.host, bank.bytes, done, total, progress);
      done += bank.bytes;
      const cudaError_t e = cudaHostRegister(bank.host, static_cast<std::size_t>(bank.bytes),
                                             cudaHostRegisterMapped | cudaHostRegisterPortable);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw CapacityError("host bank: cannot pin bank " + std::to_string(b) + " of " +
                            gib(bank.bytes) + " (" + cudaGetErrorString(e) +
                            "); the whole bank asks " + gib(total) + ", the system has " +
                            gib(available_host_bytes()) + " available");
      }
      bank.registered = true;
      void* d = nullptr;
      KVT_CUDA_CHECK(cudaHostGetDevicePointer(&d, bank.host, 0));
      bank.device = static_cast<std::byte*>(d);
    }
    std::vector<std::byte*> table(banks_.size());
    for (std::size_t b = 0; b < banks_.size(); ++b)
      table[b] = banks_[b].device;
    KVT_CUDA_CHECK(cudaMalloc(&table_, table.size() * sizeof(std::byte*)));
    KVT_CUDA_CHECK(cudaMemcpy(table_, table.data(), table.size() * sizeof(std::byte*),
                              cudaMemcpyHostToDevice));
  } catch (...) {
    release();
    throw;
  }
}

std::int64_t HostBank::total_bytes() const {
  std::int64_t t = 0;
  for (const Bank& b : banks_)
    t += b.bytes;
  return t;
}

void HostBank::release() noexcept {
  if (table_ != nullptr) cudaFree(table_);
  table_ = nullptr;
  for (Bank& b : banks_) {
    if (b.registered) cudaHostUnregister(b.host);
    if (b.host != nullptr) munmap(b.host, static_cast<std::size_t>(b.bytes));
    b = Bank{};
  }
}

HostBank::~HostBank() {
  release();
}

DevicePool::DevicePool(const PageLayout& layout, SlotId num_slots)
    : layout_(layout), num_slots_(num_slots) {
  if (num_slots <= 0) throw ConfigError("device pool: the slot count must be positive");
  const int nb = layout.banks();
  std::int64_t total = 0;
  for (int b = 0; b < nb; ++b)
    total += (std::int64_t{num_slots} + 1) *
             layout.page_bytes(PageLayout::kind_of(b % layout.banks_per_layer));
  banks_.assign(static_cast<std::size_t>(nb), nullptr);
  try {
    for (int b = 0; b < nb; ++b) {
      const std::int64_t bytes = bank_bytes(b);
      void* p = nullptr;
      const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(bytes));
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        std::size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        throw CapacityError("device pool: cannot allocate bank " + std::to_string(b) + " of " +
                            gib(bytes) + " (" + cudaGetErrorString(e) + "); the pool asks " +
                            gib(total) + ", the device has " +
                            gib(static_cast<std::int64_t>(free_b)) + " free");
      }
      banks_[static_cast<std::size_t>(b)] = static_cast<std::byte*>(p);
      KVT_CUDA_CHECK(cudaMemset(p, 0, static_cast<std::size_t>(bytes)));
    }
    KVT_CUDA_CHECK(cudaMalloc(&table_, banks_.size() * sizeof(std::byte*)));
    KVT_CUDA_CHECK(cudaMemcpy(table_, banks_.data(), banks_.size() * sizeof(std::byte*),
                              cudaMemcpyHostToDevice));
  } catch (...) {
    release();
    throw;
  }
}

std::int64_t DevicePool::bank_bytes(int b) const {
  return (std::int64_t{num_slots_} + 1) *
         layout_.page_bytes(PageLayout::kind_of(b % layout_.banks_per_layer));
}

std::int64_t DevicePool::total_bytes() const {
  std::int64_t t = 0;
  for (int b = 0; b < banks(); ++b)
    t += bank_bytes(b);
  return t;
}

void DevicePool::release() noexcept {
  if (table_ != nullptr) cudaFree(table_);
  table_ = nullptr;
  for (std::byte*& p : banks_) {
    if (p != nullptr) cudaFree(p);
    p = nullptr;
  }
}

DevicePool::~DevicePool() {
  release();
}

}  // namespace kvtier::cuda
