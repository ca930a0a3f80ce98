// The bf16 attend past one wave of CTAs (attention_waves): a prefill chunk's rows, as the
// runner's model forward attends them, each row and KV head one CTA walking the row's whole
// selection. The decode-shaped attention series stays within one wave (at most 32 rows, their
// rows split to fill it), where the bytes stream at about 3.2 TB/s on the H200; the runner's
// prefill attends of 2,048 - 16,384 rows went at about 4.2 (validation/results/
// h200-2026-12-03-model-forward.md), so they have their own terms.
//
// Rows come in chunks of waves_chunk_rows rows a request, the rows of a request sharing its page
// table, each row reading its own random 4-token blocks (decode_positions) of a 64k-token
// context whose pages are scattered over the bank. One call reads 0.3 - 69 GB, far past the L2:
// every call of a timed graph reads the same rows.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "model/page_space.hpp"

namespace kvtier::calibrate {
namespace {

// Every row's selected positions at one width ([rows][tokens]).
struct WaveSelections {
  int tokens = 0;
  cuda::DeviceArray<std::int32_t> positions;
};

}  // namespace

void run_attention_waves(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  const PageLayout l = qsa_layer_layout(false);
  const int max_rows = *std::max_element(g.waves_rows.begin(), g.waves_rows.end());
  const int requests = (max_rows + g.waves_chunk_rows - 1) / g.waves_chunk_rows;
  const std::int64_t context = std::int64_t{g.context_pages} * l.page_size;
  const auto rows_sz = static_cast<std::size_t>(max_rows);

  const cuda::DevicePool pool(l, g.bank_pages);
  b.filler.fill(pool, b.stream());
  const qsa::KvBanks kv = layer_banks(pool);
  const auto tables = to_device(scattered_tables(b.rng, requests, g.context_pages, g.bank_pages));
  std::vector<std::int32_t> req(rows_sz);
  for (int i = 0; i < max_rows; ++i)
    req[static_cast<std::size_t>(i)] = i / g.waves_chunk_rows;
  const auto d_req = to_device(req);
  const auto d_pos =
      to_device(std::vector<std::int32_t>(rows_sz, static_cast<std::int32_t>(context - 1)));
  std::vector<WaveSelections> sel;
  std::int64_t work = 1;
  for (const int tokens : g.waves_tokens) {
    std::vector<std::int32_t> pos;
    pos.reserve(rows_sz * static_cast<std::size_t>(tokens));
    for (int i = 0; i < max_rows; ++i) {
      const std::vector<std::int32_t> p = decode_positions(b.rng, context, tokens);
      pos.insert(pos.end(), p.begin(), p.end());
    }
    sel.push_back({tokens, to_device(pos)});
    work = std::max(
        work, qsa::attend_workspace_floats(max_rows, kQHeads,
                                           qsa::attend_default_splits(max_rows, kKvHeads, tokens)));
  }
  const std::size_t q_elems = rows_sz * kQHeads * qsa::kHeadDim;
  cuda::DeviceArray<std::uint16_t> q(q_elems);
  b.filler.fill(q.get(), q.bytes(), Pattern::bf16, b.stream());
  cuda::DeviceArray<float> workspace(static_cast<std::size_t>(work)), o(q_elems);
  settle();

  const std::int64_t token_bytes = layer_token_bytes(l);
  const qsa::PageTable table{tables.get(), g.context_pages, dummy_slot(g.bank_pages)};
  Series s = file_series(
      "attention_waves",
      "qsa::attend, device banks, bf16 (tensor cores), prefill chunks past one wave of CTAs: rows "
      "(chunks of " +
          std::to_string(g.waves_chunk_rows) +
          " rows a request) x selected tokens, each CTA walking its whole row",
      "graph of calls over the same rows (each reads 0.3 - 69 GB), after a pad; per call");
  for (const int rows : g.waves_rows) {
    for (const WaveSelections& w : sel) {
      if (stop_sweep(b, s)) break;
      const int splits = qsa::attend_default_splits(rows, kKvHeads, w.tokens);
      const double us = b.kernel_us([&](int, cudaStream_t st) {
        qsa::attend(q.get(), kQHeads, qsa::Rows{d_req.get(), d_pos.get(), rows}, w.positions.get(),
                    w.tokens, kv, table, splits, workspace.get(), o.get(), nullptr, st);
      });
      s.points.push_back({static_cast<double>(std::int64_t{rows} * w.tokens * token_bytes),
                          static_cast<double>(std::int64_t{rows} * kKvHeads * splits), us});
    }
  }
  emit(std::move(s));
}

}  // namespace kvtier::calibrate
