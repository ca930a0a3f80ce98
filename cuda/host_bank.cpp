#include "cuda/host_bank.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "cuda/cuda_check.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/memory_budget.hpp"

namespace kvtier::cuda {
namespace {

// Banks are prepared in pieces of this size, several at a time: a piece is faulted in and then
// pinned by one thread, so that both the page faults and the pinning run on every core.
constexpr std::int64_t kPiece = std::int64_t{1} << 30;
constexpr int kMaxThreads = 16;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and the piece is written
#endif

std::string gib(std::int64_t bytes) {
  return std::to_string(bytes) + " bytes (" + gib_text(bytes) + ")";
}

// Faults [p, p + bytes) in: the kernel's own population where it has it (the pages come
// zeroed), else a write of zeros.
void touch(std::byte* p, std::int64_t bytes) {
  if (madvise(p, static_cast<std::size_t>(bytes), MADV_POPULATE_WRITE) == 0) return;
  std::memset(p, 0, static_cast<std::size_t>(bytes));
}

// Whether a kernel may use a registered host pointer as it is (the device address equals the
// host address): then a bank can be registered piece by piece and still be one range for
// kernels.
bool host_pointer_is_device_pointer() {
  int dev = 0, yes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&yes, cudaDevAttrCanUseHostPointerForRegisteredMem, dev) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return yes != 0;
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

std::int64_t HostBank::bytes_for(const PageLayout& layout, PageId num_pages) {
  std::int64_t total = 0;
  for (int b = 0; b < layout.banks(); ++b)
    total += (std::int64_t{num_pages} + 1) *
             layout.page_bytes(PageLayout::kind_of(b % layout.banks_per_layer));
  return total;
}

HostBank::HostBank(const PageLayout& layout, PageId num_pages, const ProgressFn& progress)
    : layout_(layout), num_pages_(num_pages) {
  if (num_pages <= 0) throw ConfigError("host bank: the page count must be positive");
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t total = bytes_for(layout, num_pages);
  const std::int64_t avail = available_host_bytes();
  if (avail >= 0 && total > avail)
    throw CapacityError("host bank: needs " + gib(total) +
                        " of pinned host memory, the system has " + gib(avail) +
                        " available (MemAvailable)");
  const int nb = layout.banks();
  banks_.resize(static_cast<std::size_t>(nb));
  try {
    const bool by_piece = host_pointer_is_device_pointer();
    timing_.by_piece = by_piece;
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
      // 2 MiB pages where the kernel allows: fewer pages to fault, pin and map for the GPU.
      (void)madvise(p, static_cast<std::size_t>(bank.bytes), MADV_HUGEPAGE);
      const std::int64_t piece = by_piece ? kPiece : bank.bytes;
      for (std::int64_t off = 0; off < bank.bytes; off += piece)
        pieces_.push_back({bank.host + off, std::min(piece, bank.bytes - off), false});
    }
    pin_pieces(total, progress);
    for (Bank& bank : banks_) {
      void* d = nullptr;
      KVT_CUDA_CHECK(cudaHostGetDevicePointer(&d, bank.host, 0));
      if (by_piece && d != bank.host)
        throw CapacityError("host bank: the device maps a registered bank at another address");
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
  timing_.ready_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Every piece faulted in and registered as mapped, by several threads taking pieces in turn;
// progress is reported from this thread, once per piece done (so a bank of n pieces reports
// at least n times, however fast). The first registration that fails is thrown once all
// threads have stopped.
void HostBank::pin_pieces(std::int64_t total, const ProgressFn& progress) {
  int dev = 0;
  KVT_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<std::size_t> next{0};
  std::mutex mu;  // guards what follows, up to the condition variable
  std::size_t finished = 0;
  std::vector<std::int64_t> finished_bytes;  // bytes of the pieces in the order they finished
  finished_bytes.reserve(pieces_.size());
  bool failed = false;
  std::string error;
  std::condition_variable changed;
  const unsigned nthreads =
      std::clamp<unsigned>(std::min<unsigned>(std::thread::hardware_concurrency(), kMaxThreads), 1u,
                           static_cast<unsigned>(std::max<std::size_t>(pieces_.size(), 1)));
  std::vector<std::thread> workers;
  std::vector<double> touch_s(nthreads), pin_s(nthreads);
  using Clock = std::chrono::steady_clock;
  for (unsigned t = 0; t < nthreads; ++t) {
    workers.emplace_back([&, t] {
      (void)cudaSetDevice(dev);
      for (std::size_t i = next++; i < pieces_.size(); i = next++) {
        {
          const std::lock_guard<std::mutex> lock(mu);
          if (failed) return;
        }
        Piece& pc = pieces_[i];
        const auto t0 = Clock::now();
        touch(pc.host, pc.bytes);
        const auto t1 = Clock::now();
        const cudaError_t e = cudaHostRegister(pc.host, static_cast<std::size_t>(pc.bytes),
                                               cudaHostRegisterMapped | cudaHostRegisterPortable);
        touch_s[t] += std::chrono::duration<double>(t1 - t0).count();
        pin_s[t] += std::chrono::duration<double>(Clock::now() - t1).count();
        const std::lock_guard<std::mutex> lock(mu);
        if (e != cudaSuccess) {
          (void)cudaGetLastError();
          if (!failed)
            error = std::string("host bank: cannot pin ") + gib(pc.bytes) + " (" +
                    cudaGetErrorString(e) + "); the whole bank asks " + gib(total) +
                    ", the system has " + gib(available_host_bytes()) + " available";
          failed = true;
          changed.notify_one();
          return;
        }
        pc.registered = true;
        finished_bytes.push_back(pc.bytes);
        ++finished;
        changed.notify_one();
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    std::size_t reported = 0;
    std::int64_t done = 0;
    while (reported < pieces_.size()) {
      changed.wait(lock, [&] { return failed || finished > reported; });
      if (failed) break;
      for (; reported < finished; ++reported) {
        done += finished_bytes[reported];
        if (progress) {
          lock.unlock();  // the callback may draw; the workers go on meanwhile
          progress(static_cast<std::uint64_t>(done), static_cast<std::uint64_t>(total));
          lock.lock();
        }
      }
    }
  }
  for (auto& w : workers)
    w.join();
  timing_.threads = static_cast<int>(nthreads);
  timing_.pieces = static_cast<std::int64_t>(pieces_.size());
  for (unsigned t = 0; t < nthreads; ++t) {
    timing_.touch_thread_s += touch_s[t];
    timing_.pin_thread_s += pin_s[t];
  }
  if (failed) throw CapacityError(error);
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
  for (Piece& pc : pieces_)
    if (pc.registered) cudaHostUnregister(pc.host);
  pieces_.clear();
  for (Bank& b : banks_) {
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
