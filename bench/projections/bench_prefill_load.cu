// The runner's prefill projections under the load a prefill puts on the card, against the same
// calls timed alone. The calibration times cuBLAS's wide projections (projection_wide) as one
// call after an idle pad, and inside the runner's prefill the same calls take 1.5 - 1.7 x that
// (validation/results/h200-2026-12-03-model-forward-2.md). A prefill runs for seconds, each
// layer an HBM-bound attend of milliseconds and then the tensor-core GEMMs, so this benchmark
// asks whether the card slows under that load and by how much, and whether the data matter:
//   alone       each call after 200 ms idle (the calibration's case)
//   b2b         the calls back to back for S seconds
//   prefill     per layer an HBM-bound stand-in for the attend (device-to-device copies of
//               ~15 ms, as the 8 x 16k prefill's attend per layer) and then the calls, for S s
// each with random bf16 weights and inputs, and b2b once more with zero inputs. After every
// call a one-warp probe reads the SM clock against the global timer (MHz), so a slower call
// can be told apart from a slower clock. Prints a table per 0.5 s window; never fails on speed.
// Usage: bench_prefill_load [seconds per phase, default 3] [rows, default 16384]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/runner/gemm.hpp"
#include "model/geometry.hpp"

namespace {

using kvtier::cuda::DeviceArray;
namespace rn = kvtier::runner;

constexpr int kLayers = 12;  // the reference geometry's QSA layers: the weights rotate over them

// Spins about 100k SM cycles and writes the SM clock in MHz, measured against the global timer.
__global__ void clock_probe(float* mhz) {
  if (threadIdx.x != 0) return;
  std::uint64_t t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  long long c1 = c0;
  while (c1 - c0 < 100000)
    c1 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  *mhz = static_cast<float>(static_cast<double>(c1 - c0) * 1e3 / static_cast<double>(t1 - t0));
}

// Random bf16 of magnitude 2^-7 .. 1, either sign, written on the device.
__global__ void fill_bf16(std::uint16_t* v, std::int64_t n, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    std::uint32_t r = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    r ^= r >> 15;
    r *= 2246822519u;
    r ^= r >> 13;
    v[i] = static_cast<std::uint16_t>((r & 0x8000u) | ((120u + (r >> 7) % 7u) << 7) | (r & 0x7fu));
  }
}

void fill(DeviceArray<std::uint16_t>& a, std::uint32_t seed) {
  fill_bf16<<<1024, 256>>>(a.get(), static_cast<std::int64_t>(a.size()), seed);
  KVT_CUDA_CHECK(cudaGetLastError());
}

struct Sample {
  double t_s;  // since the phase began
  double us;   // the call, CUDA events
  float mhz;   // the probe after it
  bool group;  // the grouped six (else the output projection)
};

struct Load {
  const kvtier::Geometry g;
  const int rows;
  const int H = g.hidden_size, qd = g.q_heads * g.head_dim, kvd = g.kv_heads * g.head_dim;
  const int iqd = g.index_q_heads * g.index_head_dim, ikd = g.index_head_dim;
  std::vector<int> widths{qd, kvd, kvd, iqd, ikd, qd};  // q, k, v, index q, index k, gate
  int cols = 0;
  std::vector<DeviceArray<std::uint16_t>> group_w, out_w;  // [layer]
  DeviceArray<std::uint16_t> x, attn, y;
  DeviceArray<float> residual, mhz;
  DeviceArray<char> hbm_a, hbm_b;
  cudaStream_t s = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  rn::Gemm gemm;

  explicit Load(int r) : rows(r) {
    for (const int w : widths)
      cols += w;
    for (int l = 0; l < kLayers; ++l) {
      group_w.emplace_back(static_cast<std::size_t>(cols) * H);
      out_w.emplace_back(static_cast<std::size_t>(H) * qd);
      fill(group_w.back(), 11u + static_cast<std::uint32_t>(l));
      fill(out_w.back(), 101u + static_cast<std::uint32_t>(l));
    }
    x = DeviceArray<std::uint16_t>(static_cast<std::size_t>(rows) * H);
    attn = DeviceArray<std::uint16_t>(static_cast<std::size_t>(rows) * qd);
    y = DeviceArray<std::uint16_t>(static_cast<std::size_t>(rows) * cols);
    residual = DeviceArray<float>(static_cast<std::size_t>(rows) * H);
    mhz = DeviceArray<float>(1);
    hbm_a = DeviceArray<char>(std::size_t{2} << 30);
    hbm_b = DeviceArray<char>(std::size_t{2} << 30);
    random_inputs(true);
    KVT_CUDA_CHECK(cudaMemset(residual.get(), 0, residual.bytes()));
    KVT_CUDA_CHECK(cudaMemset(hbm_a.get(), 1, hbm_a.bytes()));
    KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    KVT_CUDA_CHECK(cudaEventCreate(&e0));
    KVT_CUDA_CHECK(cudaEventCreate(&e1));
    gemm.set_stream(s);
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~Load() {
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
  }
  Load(const Load&) = delete;
  Load& operator=(const Load&) = delete;

  void random_inputs(bool random) {
    if (random) {
      fill(x, 7u);
      fill(attn, 8u);
    } else {
      KVT_CUDA_CHECK(cudaMemset(x.get(), 0, x.bytes()));
      KVT_CUDA_CHECK(cudaMemset(attn.get(), 0, attn.bytes()));
    }
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
  }

  // One call of layer l, timed, then the probe; waits for both.
  Sample call(int l, bool group, double t_s) {
    KVT_CUDA_CHECK(cudaEventRecord(e0, s));
    if (group) {
      std::vector<rn::ProjectionOutput> outs;
      std::int64_t row = 0, col = 0;
      for (const int w : widths) {
        outs.push_back({group_w[static_cast<std::size_t>(l)].get() + row * H, w, y.get() + col});
        row += w;
        col += std::int64_t{rows} * w;
      }
      gemm.bf16_out_group(x.get(), rows, H, outs);
    } else {
      gemm.f32_out(attn.get(), out_w[static_cast<std::size_t>(l)].get(), rows, qd, H,
                   residual.get(), true);
    }
    KVT_CUDA_CHECK(cudaEventRecord(e1, s));
    clock_probe<<<1, 32, 0, s>>>(mhz.get());
    KVT_CUDA_CHECK(cudaGetLastError());
    float ms = 0, f = 0;
    KVT_CUDA_CHECK(cudaMemcpyAsync(&f, mhz.get(), sizeof f, cudaMemcpyDeviceToHost, s));
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return {t_s, ms * 1e3, f, group};
  }

  // The attend's stand-in: device-to-device copies reading and writing ~`ms` of HBM time.
  void hbm(double ms) {
    const int copies = std::max(1, static_cast<int>(ms / 1.2));  // 2 GiB each way, ~1.2 ms
    for (int i = 0; i < copies; ++i)
      KVT_CUDA_CHECK(
          cudaMemcpyAsync(hbm_b.get(), hbm_a.get(), hbm_a.bytes(), cudaMemcpyDeviceToDevice, s));
  }
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void print(const char* phase, const std::vector<Sample>& samples, double window_s) {
  std::printf("\n%s\n%-10s %8s %12s %12s %10s %10s\n", phase, "window s", "calls", "group us",
              "output us", "MHz med", "MHz min");
  double end = 0;
  for (const Sample& x : samples)
    end = std::max(end, x.t_s);
  for (double w0 = 0; w0 <= end; w0 += window_s) {
    std::vector<double> gu, ou, mhz;
    for (const Sample& x : samples) {
      if (x.t_s < w0 || x.t_s >= w0 + window_s) continue;
      (x.group ? gu : ou).push_back(x.us);
      mhz.push_back(x.mhz);
    }
    if (mhz.empty()) continue;
    std::printf("%4.1f-%-5.1f %8zu %12.1f %12.1f %10.0f %10.0f\n", w0, w0 + window_s,
                gu.size() + ou.size(), median(gu), median(ou), median(mhz),
                *std::min_element(mhz.begin(), mhz.end()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const int rows = argc > 2 ? std::atoi(argv[2]) : 16384;
  if (!(seconds > 0) || rows <= 64) {
    std::fprintf(stderr, "usage: bench_prefill_load [seconds > 0] [rows > 64]\n");
    return 2;
  }
  try {
    cudaDeviceProp prop{};
    KVT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf(
        "%s, %d rows, %.1f s a phase; the grouped six (2,560 -> 13,952) and the output "
        "projection (6,144 -> 2,560, fp32 +=) through runner::Gemm (cuBLAS)\n",
        prop.name, rows, seconds);
    Load load(rows);
    for (int l = 0; l < 2; ++l) {  // module loading, heuristics
      load.call(l, true, 0);
      load.call(l, false, 0);
    }
    std::vector<Sample> alone;
    const auto t_alone = std::chrono::steady_clock::now();
    for (int i = 0; i < 6; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      alone.push_back(load.call(i % kLayers, i % 2 == 0, since(t_alone)));
    }
    print("alone: each call after 200 ms idle", alone, 10.0);
    for (const bool random : {true, false}) {
      load.random_inputs(random);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::vector<Sample> b2b;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; since(t0) < seconds; ++i)
        b2b.push_back(load.call((i / 2) % kLayers, i % 2 == 0, since(t0)));
      print(random ? "b2b: the calls back to back, random inputs"
                   : "b2b: the calls back to back, zero inputs (weights random)",
            b2b, 0.5);
    }
    load.random_inputs(true);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::vector<Sample> prefill;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; since(t0) < seconds; ++i) {
      load.hbm(15.0);
      prefill.push_back(load.call(i % kLayers, true, since(t0)));
      prefill.push_back(load.call(i % kLayers, false, since(t0)));
    }
    print("prefill: per layer ~15 ms of HBM copies, then the calls", prefill, 0.5);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_prefill_load: %s\n", e.what());
    return 1;
  }
  return 0;
}
