// The runner's projections (runner::Gemm, the calls qsa_layer makes on the reference geometry:
// the six that read the normed hidden state as one grouped call, and the output projection with
// its fp32 accumulate into the residual stream) over rows: up to kNarrowProjectionRows its own
// GEMMs (projection), past them cuBLAS (projection_wide); and the layer's small kernels around
// them (RMSNorm, RoPE of q and k, index queries, compress, expand, sigmoid gate: layer_ops),
// one request per row. The weights rotate over copies larger than the L2 cache, so that each
// call reads them from HBM, as a decode step's layers do.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/runner/gemm.hpp"
#include "cuda/runner/ops.hpp"
#include "model/cost_model.hpp"
#include "model/geometry.hpp"

namespace kvtier::calibrate {
namespace {

constexpr std::int64_t kRotateBytes = std::int64_t{128} << 20;  // > 2 x the H200's 50 MB L2
constexpr int kWarmups = 2;  // cuBLAS loads a kernel's module on its first call (ms)

int copies_for(std::int64_t bytes) {
  return static_cast<int>(std::max<std::int64_t>(1, (kRotateBytes + bytes - 1) / bytes));
}

// The weights of the grouped six (one buffer a copy, sliced as the runner's matrices) and of
// the output projection, each in enough copies to leave the L2 cache behind.
struct ProjectionWeights {
  std::vector<cuda::DeviceArray<std::uint16_t>> group, out;
  std::vector<std::vector<runner::ProjectionOutput>> group_outputs;  // [copy] the six
};

}  // namespace

void run_projections(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const Geometry geo;  // the reference geometry, as the runner's weights gen makes it
  const int H = geo.hidden_size, qd = geo.q_heads * geo.head_dim, kvd = geo.kv_heads * geo.head_dim,
            iqd = geo.index_q_heads * geo.index_head_dim, ikd = geo.index_head_dim;
  const int widths[] = {qd, kvd, kvd, iqd, ikd, qd};  // q, k, v, index q, index k, gate
  int group_cols = 0;
  for (const int w : widths)
    group_cols += w;
  const std::int64_t group_bytes = geo.input_projection_bytes();
  const std::int64_t out_bytes = geo.output_projection_bytes();
  int rows_max = 1;
  for (const int r : g.projection_rows)
    rows_max = std::max(rows_max, r);
  for (const int r : g.projection_wide_rows)
    rows_max = std::max(rows_max, r);
  const auto rows_sz = static_cast<std::size_t>(rows_max);

  cuda::DeviceArray<std::uint16_t> x(rows_sz * static_cast<std::size_t>(std::max(H, qd))),
      y(rows_sz * static_cast<std::size_t>(group_cols));
  cuda::DeviceArray<float> residual(rows_sz * static_cast<std::size_t>(H));
  ProjectionWeights w;
  for (int c = 0; c < copies_for(group_bytes); ++c) {
    w.group.emplace_back(static_cast<std::size_t>(group_bytes / 2));
    b.filler.fill(w.group.back().get(), w.group.back().bytes(), Pattern::bf16, b.stream());
    std::vector<runner::ProjectionOutput> outs;
    std::int64_t row = 0, col = 0;
    for (const int width : widths) {
      outs.push_back({w.group.back().get() + row * H, width, y.get() + col});
      row += width;
      col += std::int64_t{rows_max} * width;  // each output its own [rows][width] block
    }
    w.group_outputs.push_back(std::move(outs));
  }
  for (int c = 0; c < copies_for(out_bytes); ++c) {
    w.out.emplace_back(static_cast<std::size_t>(out_bytes / 2));
    b.filler.fill(w.out.back().get(), w.out.back().bytes(), Pattern::bf16, b.stream());
  }
  b.filler.fill(x.get(), x.bytes(), Pattern::bf16, b.stream());
  b.filler.fill(residual.get(), residual.bytes(), Pattern::scales, b.stream());
  settle();
  runner::Gemm gemm;
  gemm.set_stream(b.stream());
  const auto group_call = [&](int rows) {
    return [&, rows](int call, cudaStream_t) {
      gemm.bf16_out_group(x.get(), rows, H, w.group_outputs[call % w.group_outputs.size()]);
    };
  };
  const auto out_call = [&](int rows) {
    return [&, rows](int call, cudaStream_t) {
      gemm.f32_out(x.get(), w.out[call % w.out.size()].get(), rows, qd, H, residual.get(), true);
    };
  };
  const auto warm = [&](const Call& call) {
    for (int i = 0; i < kWarmups; ++i)
      call(i, b.stream());
    KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  };
  const std::string timing =
      "graph of calls rotating over weight copies of >= 128 MiB (HBM, not L2), after two eager "
      "calls; median of the replays";
  // Both calls at each row count, a point each: the term's inputs from (weight bytes, rows).
  const auto sweep = [&](Series s, const std::vector<int>& row_counts, bool flops) {
    for (const int rows : row_counts) {
      if (stop_sweep(b, s)) break;
      for (const bool group : {true, false}) {
        const Call call = group ? Call(group_call(rows)) : Call(out_call(rows));
        warm(call);
        const double weights = static_cast<double>(group ? group_bytes : out_bytes);
        const double us = b.kernel_us(call);
        s.points.push_back(flops ? std::vector<double>{weights * rows, us}
                                 : std::vector<double>{weights, static_cast<double>(rows), us});
      }
    }
    emit(std::move(s));
  };
  sweep(file_series("projection",
                    "runner::Gemm on the reference geometry: the grouped six (2,560 -> 13,952, "
                    "71.4 MB) and the output projection (6,144 -> 2,560, fp32 +=, 31.5 MB), up "
                    "to 64 rows",
                    timing),
        g.projection_rows, false);
  sweep(file_series("projection_wide",
                    "the same calls past 64 rows (cuBLAS: prefill chunks); the input is weight "
                    "bytes x rows, the flops",
                    timing),
        g.projection_wide_rows, true);
  // The wide calls at the two largest row counts timed another way (`time` of a call, us per
  // call), reported beside projection_wide.
  const auto& wide = g.projection_wide_rows;
  const auto largest_rows = [&](Series s, const std::function<double(const Call&)>& time) {
    for (auto it = wide.size() > 2 ? wide.end() - 2 : wide.begin(); it != wide.end(); ++it) {
      if (stop_sweep(b, s)) break;
      for (const bool group : {true, false}) {
        const Call call = group ? Call(group_call(*it)) : Call(out_call(*it));
        warm(call);
        s.points.push_back(
            {static_cast<double>(group ? group_bytes : out_bytes) * *it, time(call)});
      }
    }
    emit(std::move(s));
  };
  // Back to back for 500 x target_us (0.15 s), as a prefill runs them layer after layer for
  // seconds: the runner's prefill GEMMs took 1.6 - 2 x the figures above
  // (validation/results/h200-2026-12-03-model-forward.md), and a card at its power limit lowers
  // its clocks under sustained load, which short graphs after an idle pad never reach.
  largest_rows(
      extra_series("projection_wide_sustained", {"weight_byte_rows"},
                   "projection_wide's calls back to back for 500 x the grid's target (reported)",
                   "graph of up to 512 calls rotating over weight copies, after a pad; per call"),
      [&](const Call& call) { return b.timer.kernel_us(512, 500 * g.target_us, call); });
  // Launched eagerly, as the runner's prefill launches them (it captures only decode forwards
  // into graphs): ten calls back to back between two events.
  constexpr int kEagerCalls = 10;
  largest_rows(extra_series("projection_wide_eager", {"weight_byte_rows"},
                            "projection_wide's calls launched eagerly, ten back to back "
                            "(reported)",
                            "events around ten eager calls rotating over weight copies, after "
                            "the pad; per call"),
               [&](const Call& call) {
                 return b.timer.eager_us(
                            [&](cudaStream_t st) {
                              for (int c = 0; c < kEagerCalls; ++c)
                                call(c, st);
                            },
                            true) /
                        kEagerCalls;
               });
}

void run_layer_ops(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const Geometry geo;
  const int H = geo.hidden_size, qd = geo.q_heads * geo.head_dim, ratio = geo.compress_ratio,
            topk = geo.block_topk(), width = geo.select_width_tokens();
  constexpr std::int64_t kContext = 256;  // each row's position: 255 (a group closes there)
  const std::int64_t blocks_per_row = kContext / ratio;
  int rows_max = 1;
  for (const int r : g.layer_ops_rows)
    rows_max = std::max(rows_max, r);
  const auto rs = static_cast<std::size_t>(rows_max);
  std::vector<std::int32_t> req(rs);
  for (std::size_t r = 0; r < rs; ++r)
    req[r] = static_cast<std::int32_t>(r);
  const auto d_req = to_device(req);
  const auto d_pos =
      to_device(std::vector<std::int32_t>(rs, static_cast<std::int32_t>(kContext - 1)));
  const auto d_count = to_device(std::vector<std::int32_t>(rs, 1));
  const auto hd = static_cast<std::size_t>(geo.head_dim),
             id = static_cast<std::size_t>(geo.index_head_dim);
  cuda::DeviceArray<float> hidden(rs * static_cast<std::size_t>(H)), o(rs * qd), iq_norm(id),
      ik_norm(id), ring(rs * static_cast<std::size_t>(ratio) * id);
  cuda::DeviceArray<std::uint16_t> norm_w(static_cast<std::size_t>(H)),
      xn(rs * static_cast<std::size_t>(H)), q(rs * static_cast<std::size_t>(geo.q_heads) * hd),
      k(rs * static_cast<std::size_t>(geo.kv_heads) * hd),
      iq_raw(rs * static_cast<std::size_t>(geo.index_q_heads) * id),
      iq(rs * static_cast<std::size_t>(geo.index_q_heads) * id), ik(rs * id),
      slab(rs * static_cast<std::size_t>(blocks_per_row) * id), gate(rs * qd), attn_g(rs * qd);
  cuda::DeviceArray<std::int32_t> blocks(rs * static_cast<std::size_t>(topk)),
      sel(rs * static_cast<std::size_t>(width));
  for (auto* a : {&norm_w, &q, &k, &iq_raw, &ik, &gate})
    b.filler.fill(a->get(), a->bytes(), Pattern::bf16, b.stream());
  for (auto* a : {&hidden, &o, &iq_norm, &ik_norm, &ring})
    b.filler.fill(a->get(), a->bytes(), Pattern::scales, b.stream());
  KVT_CUDA_CHECK(cudaMemsetAsync(blocks.get(), 0, blocks.bytes(), b.stream()));  // block 0
  settle();
  const qsa::Rope rope = qsa::make_rope(geo.rope_dims, geo.rope_theta, false);
  constexpr float kEps = 1e-6f;
  Series s = file_series("layer_ops",
                         "a QSA layer's small kernels, one request per row: RMSNorm, RoPE of q "
                         "and k, index queries, compress, expand, sigmoid gate",
                         "graph of calls, median of the replays");
  for (const int n : g.layer_ops_rows) {
    if (stop_sweep(b, s)) break;
    const qsa::Rows r{d_req.get(), d_pos.get(), n};
    const qsa::CompressRequests fwd{d_req.get(), d_count.get(), d_pos.get(), n};
    const Call ops = [&, n](int, cudaStream_t st) {
      runner::rms_norm(hidden.get(), norm_w.get(), n, H, kEps, xn.get(), st);
      qsa::rope_inplace(q.get(), geo.q_heads, geo.head_dim, r, rope, st);
      qsa::rope_inplace(k.get(), geo.kv_heads, geo.head_dim, r, rope, st);
      qsa::index_queries(iq_raw.get(), iq_norm.get(), geo.index_q_heads, kEps, r, rope, iq.get(),
                         st);
      qsa::compress(ik.get(), r, fwd, ik_norm.get(), kEps, rope, ring.get(), slab.get(),
                    blocks_per_row, st);
      qsa::expand(blocks.get(), topk, r, ratio, sel.get(), width, st);
      runner::gate_mul(o.get(), gate.get(), std::int64_t{n} * qd, attn_g.get(), st);
    };
    s.points.push_back({static_cast<double>(n), b.kernel_us(ops)});
  }
  emit(std::move(s));
}

}  // namespace kvtier::calibrate
