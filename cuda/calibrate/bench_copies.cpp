// Launches and copies: launch_eager, launch_graph, h2d_copy, d2h_copy, and the multi-bank miss
// copy (zero_copy_read) over misses and page sizes.
#include <algorithm>
#include <cstring>

#include "cuda/calibrate/bench.hpp"
#include "cuda/engine.hpp"
#include "cuda/kernels.hpp"

namespace kvtier::calibrate {
namespace {

// Pinned host memory (cudaHostAlloc), freed on every path out.
class PinnedHost {
 public:
  explicit PinnedHost(std::size_t bytes) {
    KVT_CUDA_CHECK(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault));
    std::memset(p_, 1, bytes);  // every page touched before it is timed
  }
  ~PinnedHost() { (void)cudaFreeHost(p_); }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  std::byte* get() const { return static_cast<std::byte*>(p_); }

 private:
  void* p_ = nullptr;
};

// The smallest real kernel of the backend (one thread: ++*step), `n` times on s.
void advance_steps(std::int64_t* step, int n, cudaStream_t s) {
  for (int i = 0; i < n; ++i)
    cuda::launch_advance_step(step, s);
}

void launches(Bench& b, const Emit& emit) {
  const cuda::DeviceArray<std::int64_t> step(1);
  Series eager = file_series("launch_eager", "launch_advance_step (<<<1, 1>>>) back to back",
                             "events around the eager launches from an idle GPU");
  for (const int n : b.grid.launch_kernels) {
    if (stop_sweep(b, eager)) break;
    const double us = b.timer.eager_us([&](cudaStream_t s) { advance_steps(step.get(), n, s); });
    eager.points.push_back({static_cast<double>(n), us});
  }
  emit(std::move(eager));
  Series graph = file_series("launch_graph", "launch_advance_step as the nodes of one graph",
                             "events around one graph launch, the GPU kept busy while it is "
                             "launched");
  for (const int n : b.grid.launch_kernels) {
    if (stop_sweep(b, graph)) break;
    const double us =
        b.timer.graph_us(1, [&](int, cudaStream_t s) { advance_steps(step.get(), n, s); });
    graph.points.push_back({static_cast<double>(n), us});
  }
  emit(std::move(graph));
}

void bulk_copies(Bench& b, const Emit& emit, bool h2d) {
  const CalibrationGrid& g = b.grid;
  const auto max_bytes = static_cast<std::size_t>(g.copy_max_bytes);
  const PinnedHost host(max_bytes);
  const cuda::DeviceArray<std::byte> dev(max_bytes);
  KVT_CUDA_CHECK(cudaMemset(dev.get(), 1, max_bytes));
  settle();
  Series s = file_series(h2d ? "h2d_copy" : "d2h_copy",
                         std::string("cudaMemcpyAsync ") +
                             (h2d ? "pinned host -> device" : "device -> pinned host") +
                             ", consecutive pieces",
                         "events around the transfers, enqueued back to back from an idle GPU");
  for (const std::int64_t piece : g.copy_pieces) {
    for (const int transfers : g.copy_transfers) {
      const std::int64_t bytes = piece * transfers;
      if (bytes > g.copy_max_bytes) continue;
      if (stop_sweep(b, s)) break;
      const auto n = static_cast<std::size_t>(piece);
      const double us = b.timer.eager_us([&](cudaStream_t st) {
        for (int t = 0; t < transfers; ++t) {
          const std::size_t off = static_cast<std::size_t>(t) * n;
          if (h2d) {
            KVT_CUDA_CHECK(
                cudaMemcpyAsync(dev.get() + off, host.get() + off, n, cudaMemcpyHostToDevice, st));
          } else {
            KVT_CUDA_CHECK(
                cudaMemcpyAsync(host.get() + off, dev.get() + off, n, cudaMemcpyDeviceToHost, st));
          }
        }
      });
      s.points.push_back({static_cast<double>(bytes), static_cast<double>(transfers), us});
    }
  }
  emit(std::move(s));
}

// The mirror's miss copy (launch_copy with a MirrorEngine's banks): `misses` pages of the host
// bank -> pool slots, every bank of the unit's layers, as ensure leaves its copy list (pages
// ascending). Each call of a timed graph copies other pages.
void miss_copies(Bench& b, const Emit& emit, const PageLayout& layout, ResidencyUnit unit,
                 int bank_pages, const std::vector<int>& misses, const std::string& sweep) {
  const int max_misses = *std::max_element(misses.begin(), misses.end());
  cuda::MirrorEngine e({layout, unit, bank_pages, max_misses, max_misses, cuda::EnsureForm::block});
  b.filler.fill(e.host(), b.stream());
  b.filler.fill(e.pool(), b.stream());
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  const int layers = unit == ResidencyUnit::all_layers_page ? layout.layers : 1;
  const int variants = b.grid.max_calls;
  Series s = file_series("zero_copy_read", sweep,
                         "graph of calls copying other pages each, after a pad; per call");
  for (const int m : misses) {
    if (stop_sweep(b, s)) break;
    std::vector<CopyOp> ops;
    for (int v = 0; v < variants; ++v) {
      const std::vector<std::int32_t> pages = sample_sorted(b.rng, bank_pages, m);
      for (int i = 0; i < m; ++i)
        ops.push_back({pages[static_cast<std::size_t>(i)], i, kNoPage});
    }
    const auto d_ops = to_device(ops);
    const auto d_count = to_device(std::vector<int>{m});
    const double us = b.kernel_us(
        [&](int call, cudaStream_t st) {
          cuda::launch_copy(
              {d_ops.get() + std::int64_t{call} * m, d_count.get(), e.host().device_bank_table(),
               e.pool().device_bank_table(), layout, 0, layers},
              st);
        },
        {}, variants);
    s.points.push_back(
        {static_cast<double>(std::int64_t{m} * layers * layout.layer_page_bytes()), us});
  }
  emit(std::move(s));
}

}  // namespace

void run_launch_and_copies(Bench& b, const Emit& emit) {
  launches(b, emit);
  bulk_copies(b, emit, true);
  bulk_copies(b, emit, false);
  const CalibrationGrid& g = b.grid;
  miss_copies(b, emit, qsa_layer_layout(false), ResidencyUnit::layer_page, g.layer_copy_bank_pages,
              g.layer_misses, "miss copy (launch_copy), bf16 layer pages of 128 KiB");
  miss_copies(b, emit, qsa_layer_layout(true), ResidencyUnit::layer_page, g.layer_copy_bank_pages,
              g.layer_misses, "miss copy (launch_copy), fp8 layer pages of 65 KiB");
  miss_copies(b, emit, qsa_layer_layout(false, 12), ResidencyUnit::all_layers_page,
              g.all_layers_copy_bank_pages, g.all_layers_misses,
              "miss copy (launch_copy), bf16 all-layers pages of 1.5 MiB (12 layers)");
}

}  // namespace kvtier::calibrate
