// A whole QSA decode layer (the runner's qsa_layer for the device placement, projections and
// norms apart: RoPE of q and k, the index queries, compress, index scoring, top-k, expand, store,
// attend) timed eager (launched back to back from an idle GPU, as without graphs) and as one graph
// replay: what graphs save per layer, against launch_eager and launch_graph's per-kernel figures.
// Reported only: the cost model has no term for it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "model/page_space.hpp"

namespace kvtier::calibrate {
namespace {

constexpr int kIndexHeads = 4, kTopK = 512, kRatio = 4;
constexpr int kWidth = kTopK * kRatio + kRatio - 1;
constexpr int kContextPages = 512;  // 32k tokens per request
constexpr std::int64_t kContext = std::int64_t{kContextPages} * 64;
constexpr std::int64_t kBlocks = kContext / kRatio;
constexpr float kEps = 1e-6f;

}  // namespace

void run_decode_layer(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const int rows = *std::max_element(g.layer_rows.begin(), g.layer_rows.end());
  const PageLayout layout = qsa_layer_layout(false);
  const cuda::DevicePool pool(layout, rows * kContextPages);
  b.filler.fill(pool, b.stream());
  // every row its own pages (each stores a token into its last one)
  const auto tables = to_device(scattered_tables(b.rng, 1, rows * kContextPages, pool.num_slots()));
  std::vector<std::int32_t> req(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r)
    req[static_cast<std::size_t>(r)] = r;
  const auto d_req = to_device(req);
  const auto d_pos = to_device(std::vector<std::int32_t>(static_cast<std::size_t>(rows),
                                                         static_cast<std::int32_t>(kContext - 1)));
  const auto d_count = to_device(std::vector<std::int32_t>(static_cast<std::size_t>(rows), 1));
  const auto rs = static_cast<std::size_t>(rows);
  cuda::DeviceArray<std::uint16_t> q(rs * kQHeads * qsa::kHeadDim),
      k(rs * kKvHeads * qsa::kHeadDim), v(rs * kKvHeads * qsa::kHeadDim),
      iq_raw(rs * kIndexHeads * qsa::kIndexDim), iq(rs * kIndexHeads * qsa::kIndexDim),
      ik(rs * qsa::kIndexDim), slab(rs * static_cast<std::size_t>(kBlocks) * qsa::kIndexDim);
  cuda::DeviceArray<float> iq_norm(qsa::kIndexDim), ik_norm(qsa::kIndexDim),
      ring(rs * kRatio * qsa::kIndexDim), logits(rs * static_cast<std::size_t>(kBlocks)),
      o(rs * kQHeads * qsa::kHeadDim);
  for (auto* a : {&q, &k, &v, &iq_raw, &ik, &slab})
    b.filler.fill(a->get(), a->bytes(), Pattern::bf16, b.stream());
  for (auto* a : {&iq_norm, &ik_norm, &ring})
    b.filler.fill(a->get(), a->bytes(), Pattern::scales, b.stream());
  cuda::DeviceArray<std::int32_t> blocks(rs * kTopK), sel(rs * kWidth);
  const cuda::DeviceArray<std::byte> topk_work(
      static_cast<std::size_t>(qsa::topk_workspace_bytes(rows, kBlocks)));
  int max_splits = 1;
  for (const int n : g.layer_rows)
    max_splits = std::max(max_splits, qsa::attend_default_splits(n, kKvHeads, kWidth));
  const cuda::DeviceArray<float> work(
      static_cast<std::size_t>(qsa::attend_workspace_floats(rows, kQHeads, max_splits)));
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  const qsa::Rope rope = qsa::make_rope(64, 1e7, false);
  const qsa::KvBanks kv = layer_banks(pool);
  const qsa::PageTable table{tables.get(), kContextPages, dummy_slot(pool.num_slots())};

  Series s = extra_series("decode_layer", {"rows", "graph"},
                          "QSA decode layer without projections (rope, index queries, compress, "
                          "index, top-k, expand, store, attend), device bf16, 32k context",
                          "graph 0: events around the eager launches from an idle GPU, L2 "
                          "cold; graph 1: one graph replay after a pad");
  for (const int n : g.layer_rows) {
    if (stop_sweep(b, s)) break;
    const qsa::Rows r{d_req.get(), d_pos.get(), n};
    const qsa::CompressRequests fwd{d_req.get(), d_count.get(), d_pos.get(), n};
    const int splits = qsa::attend_default_splits(n, kKvHeads, kWidth);
    const Enqueue layer = [&](cudaStream_t st) {
      qsa::rope_inplace(q.get(), kQHeads, qsa::kHeadDim, r, rope, st);
      qsa::rope_inplace(k.get(), kKvHeads, qsa::kHeadDim, r, rope, st);
      qsa::index_queries(iq_raw.get(), iq_norm.get(), kIndexHeads, kEps, r, rope, iq.get(), st);
      qsa::compress(ik.get(), r, fwd, ik_norm.get(), kEps, rope, ring.get(), slab.get(), kBlocks,
                    st);
      qsa::index_scores(iq.get(), kIndexHeads, r, slab.get(), kBlocks, logits.get(), kBlocks,
                        kBlocks, st, 1);  // one request per row, as the runner's decode
      qsa::topk(logits.get(), kBlocks, nullptr, r, kRatio, kTopK, blocks.get(), topk_work.get(),
                kBlocks, st);
      qsa::expand(blocks.get(), kTopK, r, kRatio, sel.get(), kWidth, st);
      qsa::store_kv(k.get(), v.get(), r, kv, table, qsa::KvBanks{}, qsa::PageTable{}, st);
      qsa::attend(q.get(), kQHeads, r, sel.get(), kWidth, kv, table, splits, work.get(), o.get(),
                  nullptr, st);
    };
    const double eager = b.timer.eager_us(layer, true);
    const double graph = b.timer.graph_us(1, [&](int, cudaStream_t st) { layer(st); });
    s.points.push_back({static_cast<double>(n), 0.0, eager});
    s.points.push_back({static_cast<double>(n), 1.0, graph});
  }
  emit(std::move(s));
}

}  // namespace kvtier::calibrate
