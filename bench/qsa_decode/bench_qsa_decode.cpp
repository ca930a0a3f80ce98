// Decode-sized QSA indexer figures: index scoring and top-k (512) for 1 row x {32k, 262k}
// blocks and 16 rows x 32k blocks (16 requests, and one request), by the kernels the entry
// points pick for these shapes (the decode index kernel; the top-k in clusters of CTAs, with and
// without a workspace). Each figure: the median of CUDA-event timings of single eager calls after
// warm-up, and the per-call time of a CUDA graph of 20 calls (no launch gaps). The index reads
// rotate over several slab copies (> 150 MB together), so the slab comes from HBM as in a decode
// step over 12 layers; top-k reads the logits the index wrote (L2-warm, as in the runner).
// Random bf16 data (never zeros). Prints a table; never fails on speed. `quick`: the first shape.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/qsa/graph_timing.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "tests/qsa/qsa_gpu_runner.hpp"

namespace {

using kvtier::qsa::testing::Buf;
namespace q = kvtier::qsa;

// The HBM ceiling the targets count against (a device-to-device copy reads and writes
// 4.2 TB/s on the H200: bench/results/h200-residency-2026-11-29.md).
constexpr double kHbmGBs = 4300.0;

// Median microseconds of one eager call (f(i) for i = 0, 1, ...), and of one call inside a
// graph of `per_graph` calls.
struct Times {
  double eager_us, graph_us;
};

Times time_calls(const std::function<void(int, cudaStream_t)>& f, int reps = 50,
                 int per_graph = 20) {
  cudaStream_t s;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  KVT_CUDA_CHECK(cudaEventCreate(&a));
  KVT_CUDA_CHECK(cudaEventCreate(&b));
  int call = 0;
  for (int i = 0; i < 5; ++i)
    f(call++, s);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    KVT_CUDA_CHECK(cudaEventRecord(a, s));
    f(call++, s);
    KVT_CUDA_CHECK(cudaEventRecord(b, s));
    KVT_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  std::sort(t.begin(), t.end());
  Times out{t[t.size() / 2], 0.0};
  // the graph's calls continue the call count (f rotates its inputs by it)
  out.graph_us = kvtier::qsa::bench::graph_us_per_call(
      [&](int i, cudaStream_t gs) { f(call + i, gs); }, per_graph, 11);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  return out;
}

// Random bf16 data, never zero.
std::uint16_t hashed_bf16(std::uint64_t i, std::uint64_t seed) {
  return kvtier::qsa::testing::hashed_bf16(i, seed, 1e-3f);
}

struct Config {
  int rows, requests;
  std::int64_t blocks;
};

void run(const Config& c) {
  const int k = 512;
  const std::int64_t slab_stride = c.blocks, logit_stride = c.blocks;
  const std::size_t slab_elems = static_cast<std::size_t>(c.requests * slab_stride) * 128;
  const std::size_t slab_bytes = slab_elems * 2;
  const int sets = static_cast<int>(std::max<std::size_t>(2, (160u << 20) / slab_bytes + 1));
  std::vector<std::uint16_t> host(slab_elems);
  for (std::size_t i = 0; i < host.size(); ++i)
    host[i] = hashed_bf16(i, 11);
  Buf<std::uint16_t> slab(slab_elems * static_cast<std::size_t>(sets));
  for (int i = 0; i < sets; ++i)
    KVT_CUDA_CHECK(
        cudaMemcpy(slab.get() + slab_elems * i, host.data(), slab_bytes, cudaMemcpyHostToDevice));
  std::vector<std::uint16_t> iqh(static_cast<std::size_t>(c.rows) * 4 * 128);
  for (std::size_t i = 0; i < iqh.size(); ++i)
    iqh[i] = hashed_bf16(i, 12);
  Buf<std::uint16_t> iq(iqh.size());
  iq.upload(iqh);
  // Rows: request r * requests / rows; each request's rows end at position 4 * blocks - 1.
  std::vector<std::int32_t> req(c.rows), pos(c.rows);
  const int per_req = c.rows / c.requests;
  for (int r = 0; r < c.rows; ++r) {
    req[r] = r / per_req;
    pos[r] = static_cast<std::int32_t>(4 * c.blocks - 1 - (per_req - 1 - r % per_req));
  }
  Buf<std::int32_t> dreq(req.size()), dpos(pos.size());
  dreq.upload(req);
  dpos.upload(pos);
  const q::Rows rows{dreq.get(), dpos.get(), c.rows};
  Buf<float> logits(static_cast<std::size_t>(c.rows * logit_stride));
  Buf<std::int32_t> out(static_cast<std::size_t>(c.rows) * k),
      work(static_cast<std::size_t>(q::topk_workspace_bytes(c.rows, c.blocks) / 4 + 1));

  const std::string shape = std::to_string(c.rows) + " row" + (c.rows > 1 ? "s" : "") + " (" +
                            std::to_string(c.requests) + " req) x " + std::to_string(c.blocks);
  const double read_mb = static_cast<double>(slab_bytes) / 1e6;
  {
    const Times t = time_calls([&](int i, cudaStream_t s) {
      q::index_scores(iq.get(), 4, rows, slab.get() + slab_elems * (i % sets), slab_stride,
                      logits.get(), logit_stride, c.blocks, s);
    });
    std::printf("%-30s %-26s %9.2f %9.2f %8.0f %5.0f%%\n", shape.c_str(), "index", t.eager_us,
                t.graph_us, read_mb * 1e3 / t.graph_us,
                100.0 * read_mb * 1e3 / t.graph_us / kHbmGBs);
  }
  // Logits of the last call (realistic: relu sums, many exact zeros) stay for the top-k.
  for (const bool with_work : {true, false}) {
    const Times t = time_calls([&](int, cudaStream_t s) {
      if (with_work)
        q::topk(logits.get(), logit_stride, nullptr, rows, 4, k, out.get(), work.get(), c.blocks,
                s);
      else
        q::topk(logits.get(), logit_stride, nullptr, rows, 4, k, out.get(), s);
    });
    std::printf("%-30s %-26s %9.2f %9.2f\n", shape.c_str(),
                with_work ? "topk (workspace)" : "topk (no workspace)", t.eager_us, t.graph_us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!kvtier::qsa::testing::have_device()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  KVT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; slab read over graph time vs %.0f GB/s\n", prop.name,
              prop.multiProcessorCount, kHbmGBs);
  std::printf("%-30s %-26s %9s %9s %8s %6s\n", "shape (rows x blocks)", "path", "eager_us",
              "graph_us", "GB/s", "HBM");
  std::vector<Config> configs = {{1, 1, 32768}, {1, 1, 262144}, {16, 16, 32768}, {16, 1, 32768}};
  if (argc > 1 && std::string(argv[1]) == "quick") configs.resize(1);
  for (const Config& c : configs)
    run(c);
  return 0;
}
