// A prefill staged through device windows, as the runner's attend_staged runs it (host
// placement, and mirror rows that bypass the pool) around each window's attend:
//   staging      the gather of a window's pages from the host bank into the window
//                (runner::gather_pages: a kernel reading mapped host memory), per byte
//   window_fold  the window's page table and token list for its request's rows, then the fold of
//                the window's pass into the rows' accumulator (window_table, window_tokens,
//                qsa::fold), per row
//   fold_reset   the accumulator's reset before a layer's windows (qsa::fold_reset), per row
// The attends themselves are the attention series'. Each call of a timed graph gathers other
// random pages (bf16 layer pages of 128 KiB); the folds read and write fp32 rows of the reference
// geometry's 24 query heads.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/runner/tier_ops.hpp"
#include "model/geometry.hpp"

namespace kvtier::calibrate {
namespace {

constexpr const char* kTiming = "graph of calls, after a pad; per call";

void staging(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const PageLayout l = qsa_layer_layout(false);
  const int window = *std::max_element(g.staging_pages.begin(), g.staging_pages.end());
  const cuda::HostBank host(l, g.staging_bank_pages);
  const cuda::DevicePool win(l, window);
  b.filler.fill(host, b.stream());
  runner::BankPair bp;
  bp.banks = l.banks_per_layer;
  for (int k = 0; k < bp.banks; ++k) {
    bp.src[k] = host.device(k);
    bp.dst[k] = win.bank(k);
    bp.page_bytes[k] = l.page_bytes(PageLayout::kind_of(k));
  }
  const int variants = std::max(1, std::min(b.grid.max_calls, 8));
  Series s = file_series("staging",
                         "the runner's window gather (gather_pages): random bf16 layer pages "
                         "(128 KiB) of a host bank read in place into a device window",
                         kTiming);
  for (const int n : g.staging_pages) {
    if (stop_sweep(b, s)) break;
    std::vector<std::int32_t> pages;
    for (int v = 0; v < variants; ++v) {
      const std::vector<std::int32_t> p = sample_sorted(b.rng, g.staging_bank_pages, n);
      pages.insert(pages.end(), p.begin(), p.end());
    }
    const auto d_pages = to_device(pages);
    const double us = b.kernel_us(
        [&](int call, cudaStream_t st) {
          runner::gather_pages(bp, d_pages.get() + std::int64_t{call % variants} * n, n, st);
        },
        {}, variants);
    s.points.push_back({static_cast<double>(std::int64_t{n} * l.layer_page_bytes()), us});
  }
  emit(std::move(s));
}

void window_ops(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const Geometry geo;
  const int heads = geo.q_heads, width = geo.select_width_tokens();
  const int rows_max = *std::max_element(g.window_rows.begin(), g.window_rows.end());
  const auto rows_sz = static_cast<std::size_t>(rows_max);
  constexpr std::int64_t kStride = 2048;  // table entries a request: a 128k-token context
  // One request's rows, each selecting `width` tokens of the context.
  std::vector<std::int32_t> sel(rows_sz * static_cast<std::size_t>(width));
  for (std::size_t i = 0; i < sel.size(); ++i)
    sel[i] = static_cast<std::int32_t>((i * 61) % (kStride * geo.page_size));
  const auto d_sel = to_device(sel);
  const auto d_req = to_device(std::vector<std::int32_t>(rows_sz, 0));
  cuda::DeviceArray<std::int32_t> table(static_cast<std::size_t>(kStride)), sel_w(sel.size());
  const std::size_t acc = rows_sz * static_cast<std::size_t>(heads);
  cuda::DeviceArray<float> o(acc * 256), lse(acc), o_w(acc * 256), lse_w(acc);
  b.filler.fill(o_w.get(), o_w.bytes(), Pattern::scales, b.stream());
  b.filler.fill(lse_w.get(), lse_w.bytes(), Pattern::scales, b.stream());
  qsa::fold_reset(o.get(), lse.get(), rows_max, heads, b.stream());
  settle();
  Series fold = file_series("window_fold",
                            "one staging window's page table, token list (width 2,051) and fold "
                            "(24 heads, fp32) for a request's rows",
                            kTiming);
  Series reset =
      file_series("fold_reset", "the accumulator's reset (24 heads, fp32) for the rows", kTiming);
  for (const int rows : g.window_rows) {
    if (stop_sweep(b, fold)) break;
    const double fold_us = b.kernel_us([&](int call, cudaStream_t st) {
      const std::int64_t p0 = (call % 2) * (kStride / 2);
      runner::window_table(1, kStride, 0, p0, p0 + kStride / 2, table.get(), st);
      runner::window_tokens(d_sel.get(), width, d_req.get(), rows, 0, p0 * geo.page_size,
                            (p0 + kStride / 2) * geo.page_size, sel_w.get(), st);
      qsa::fold(o.get(), lse.get(), o_w.get(), lse_w.get(), rows, heads, st);
    });
    fold.points.push_back({static_cast<double>(rows), fold_us});
    const double reset_us = b.kernel_us(
        [&](int, cudaStream_t st) { qsa::fold_reset(o.get(), lse.get(), rows, heads, st); });
    reset.points.push_back({static_cast<double>(rows), reset_us});
  }
  reset.truncated = fold.truncated;
  emit(std::move(fold));
  emit(std::move(reset));
}

}  // namespace

void run_staging(Bench& b, const Emit& emit) {
  staging(b, emit);
  window_ops(b, emit);
}

}  // namespace kvtier::calibrate
