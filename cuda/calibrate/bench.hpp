#pragma once
// What the calibration's groups of benchmarks share (internal to cuda/calibrate): the timer, the
// fills that give every bank and buffer finite random values, and the run's context.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/calibrate/calibrate.hpp"
#include "cuda/calibrate/sweep.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/kv_banks.hpp"
#include "cuda/stream_handles.hpp"
#include "model/page_layout.hpp"

namespace kvtier::calibrate {

// Enqueues call number `call` of a timed graph (or of an eager run) on s.
using Call = std::function<void(int call, cudaStream_t s)>;
using Enqueue = std::function<void(cudaStream_t s)>;

// Times work on its own stream with CUDA events; every figure is the median of `repeats` timings
// after untimed warm-ups.
class Timer {
 public:
  explicit Timer(int repeats);
  cudaStream_t stream() const { return stream_; }

  // body enqueued between the events from an idle GPU: launch and submission costs are in the
  // time (back-to-back eager launches, cudaMemcpyAsync calls). `cold`: the pad runs and is waited
  // for before each timing, so that the L2 cache holds nothing of the previous one.
  double eager_us(const Enqueue& body, bool cold = false);
  // One replay of a graph of call(0), ..., call(calls - 1), divided by calls. Before each replay:
  // `before` (outside the time), then the pad. Calls should read different data (the L2 cache
  // is cold at the start of each replay, as after a layer's other work).
  // `after` (optional) ends the calls inside the time, once (e.g. joins a stream they forked).
  double graph_us(int calls, const Call& call, const Enqueue& before = {},
                  const Enqueue& after = {});
  // The kernel series' timing (docs/validation.md: without launch overhead where it can be
  // excluded): a probe of one call after the pad, then graph_us with calls_per_graph(probe,
  // target_us, max_calls) calls.
  double kernel_us(int max_calls, double target_us, const Call& call, const Enqueue& before = {},
                   const Enqueue& after = {});
  // Calls in the graph of the last graph_us / kernel_us.
  int last_calls() const { return last_calls_; }

 private:
  // A memset of 512 MiB: keeps the GPU busy while the host enqueues what is timed after it, and
  // evicts the L2 cache (50 MiB on an H200).
  void pad(cudaStream_t s);
  double elapsed_us();  // from a_ to b_, waiting for b_

  int repeats_;
  int last_calls_ = 0;
  cuda::Stream stream_;
  cuda::Event a_, b_;
  cuda::DeviceArray<std::byte> pad_;
};

// Captures calls of `call` on s into an executable graph; ends the capture when a call throws.
cuda::GraphExec capture_graph(cudaStream_t s, int calls, const Call& call,
                              const Enqueue& after = {});

// Finite random values for banks and buffers: a 4 MiB block of each pattern, copied over the
// destination (device memory, or pinned host memory through its host address).
enum class Pattern {
  bf16,       // bf16 values uniform in [-1, 1]
  fp8_codes,  // e4m3 codes, never NaN
  scales,     // fp32 in [0.005, 0.02]
};
class Filler {
 public:
  explicit Filler(cudaStream_t s);
  void fill(void* dst, std::size_t bytes, Pattern p, cudaStream_t s) const;
  // Every bank of a device pool or a host bank (codes as the layout's dtype, scales as scales),
  // after the zeroing their constructors enqueued.
  void fill(const cuda::DevicePool& pool, cudaStream_t s) const;
  void fill(const cuda::HostBank& bank, cudaStream_t s) const;

 private:
  static Pattern bank_pattern(const PageLayout& l, int bank);
  cuda::DeviceArray<std::byte> bf16_, fp8_, scales_;
};

// Waits for everything enqueued on any stream: setup on the legacy stream (cudaMemcpy from
// pageable memory may return before its DMA lands; the pools' and banks' zeroing) does not order
// with the timer's non-blocking stream, so setup ends here before anything is timed.
inline void settle() {
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
}
// Copies v into a new device array (setup only: settled).
template <class T>
cuda::DeviceArray<T> to_device(const std::vector<T>& v) {
  cuda::DeviceArray<T> d(std::max<std::size_t>(v.size(), 1));
  if (!v.empty())
    KVT_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  settle();
  return d;
}
// Bytes of one token of one layer, every bank (K and V codes, fp8 scales).
inline std::int64_t layer_token_bytes(const PageLayout& l) {
  return l.layer_page_bytes() / l.page_size;
}
// The reference geometry's attention heads: 24 query heads over 2 KV heads of 256.
inline constexpr int kQHeads = 24;
inline constexpr int kKvHeads = 2;
// The layout of one QSA layer of the reference geometry (pages of 64 tokens, 2 KV heads of 256).
inline PageLayout qsa_layer_layout(bool fp8, int layers = 1) {
  return PageLayout::make(layers, 64, kKvHeads, 256, fp8);
}
// Layer 0's banks of a device pool, or of a host bank read in place, as the attention takes them.
inline qsa::KvBanks layer_banks(const cuda::DevicePool& pool) {
  std::vector<std::byte*> a;
  for (int i = 0; i < pool.banks(); ++i)
    a.push_back(pool.bank(i));
  return cuda::layer_kv_banks(pool.layout(), 0, a.data(), false);
}
inline qsa::KvBanks layer_banks(const cuda::HostBank& bank) {
  std::vector<std::byte*> a;
  for (int i = 0; i < bank.banks(); ++i)
    a.push_back(bank.device(i));
  return cuda::layer_kv_banks(bank.layout(), 0, a.data(), true);
}

// Sends each finished sweep to the run (which stamps its seconds and reports progress).
using Emit = std::function<void(Series)>;

// The run's context, shared by the groups.
struct Bench {
  const CalibrationOptions& opt;
  const CalibrationGrid& grid;
  Timer& timer;
  const Filler& filler;
  std::mt19937_64 rng;
  std::chrono::steady_clock::time_point deadline;  // of the group running

  bool out_of_time() const { return std::chrono::steady_clock::now() > deadline; }
  cudaStream_t stream() const { return timer.stream(); }
  // Timer::kernel_us with the grid's target and at most min(grid.max_calls, max_calls) calls.
  double kernel_us(const Call& call, const Enqueue& before = {}, int max_calls = 1 << 30,
                   const Enqueue& after = {}) {
    return timer.kernel_us(std::min(grid.max_calls, max_calls), grid.target_us, call, before,
                           after);
  }
};

// A sweep of `term` (its inputs from docs/validation.md's table), written to the points file.
Series file_series(const std::string& term, const std::string& sweep, const std::string& timing);
// A sweep reported only, with its own input names.
Series extra_series(const std::string& name, std::vector<std::string> inputs,
                    const std::string& sweep, const std::string& timing);
// Stops a sweep at the group's deadline: true (and the series marked truncated) when out of time.
bool stop_sweep(const Bench& b, Series& s);

// The groups, one file each.
void run_launch_and_copies(Bench& b, const Emit& emit);  // bench_copies.cpp
void run_attention(Bench& b, const Emit& emit);          // bench_attention.cpp
void run_attention_waves(Bench& b, const Emit& emit);    // bench_attention_waves.cpp
void run_staging(Bench& b, const Emit& emit);            // bench_staging.cpp
void run_selection(Bench& b, const Emit& emit);          // bench_selection.cpp
void run_residency(Bench& b, const Emit& emit);          // bench_residency.cpp
void run_projections(Bench& b, const Emit& emit);        // bench_projections.cpp
void run_layer_ops(Bench& b, const Emit& emit);          // bench_projections.cpp
void run_decode_layer(Bench& b, const Emit& emit);       // bench_layer.cpp

}  // namespace kvtier::calibrate
