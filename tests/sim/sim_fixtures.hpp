#pragma once
// Small geometries, a round-number hardware profile and a seeded random trace generator for
// the simulator tests.
#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "model/cost_model.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::testing {

// 4 layers, QSA layers 1 and 3; 4-token pages, 2-token blocks, budget 4 tokens (2 blocks):
// a row touches at most 3 pages. bf16 K+V = 2 x 1 head x 4 dims x 2 B = 16 B per token.
inline Geometry tiny_geometry() {
  Geometry g;
  g.total_layers = 4;
  g.qsa_layer_ids = {1, 3};
  g.hidden_size = 8;
  g.q_heads = 2;
  g.kv_heads = 1;
  g.head_dim = 4;
  g.rope_dims = 2;
  g.index_q_heads = 1;
  g.index_kv_heads = 1;
  g.index_head_dim = 4;
  g.compress_ratio = 2;
  g.select_budget = 4;
  g.page_size = 4;
  g.validate();
  return g;
}

// Every rate 1 GB/s (1 byte per ns), every fixed cost 1 ns, every per-unit cost 1 ns, the
// non-QSA layers 10 ns per forward + 1 ns per token, one SM: timelines can be added up by hand.
inline HardwareProfile unit_profile() {
  HardwareProfile p;
  p.name = "unit";
  p.device_memory_gib = 1;
  p.pcie_h2d_gbps = p.pcie_d2h_gbps = 1;
  p.pcie_latency_us = 0.001;
  p.zero_copy_read_gbps = p.zero_copy_write_gbps = p.step_beside_copy_gbps = 1;
  p.step_beside_copy_us = p.pcie_latency_us;
  p.hbm_gbps = 1;
  p.launch_us = 0.001;
  p.graph_launch_us = 0.001;
  p.indexer_ns_per_row_block = 1;
  p.topk_ns_per_row_block = 1;
  // the index and top-k calls 1 ns each; a projection call 1 ns whatever its weights and rows
  // (the tiny geometries' weights at 10^9 GB/s, 10^-6 ns a row); the small kernels nothing
  p.indexer_fixed_us = p.topk_fixed_us = p.indexer_prefill_fixed_us = 0.001;
  p.indexer_prefill_ns_per_row_block = 1;
  p.topk_one_cta_fixed_us = p.topk_chain_fixed_us = 0.001;
  p.topk_one_cta_ns_per_row_block = p.topk_chain_ns_per_row_block = 1;
  p.projection_fixed_us = p.projection_wide_fixed_us = 0.001;
  p.projection_gbps = 1e9;
  p.projection_ns_per_row = 1e-6;
  p.projection_wide_tflops = 1e9;
  p.layer_ops_fixed_us = 1e-9;
  p.layer_ops_ns_per_row = 1e-6;
  p.ensure_fixed_us = 0.001;
  p.ensure_ns_per_lookup = 1;
  p.ensure_ns_per_slot = 1;
  p.ensure_ns_per_miss = 1;
  // the step beside: 1 ns a page entry, a slot searched, a miss; rows and the pages of a step
  // that misses all but nothing (the timelines' steps keep their own arithmetic)
  p.step_beside_fixed_us = p.step_beside_wide_fixed_us = 0.001;
  p.step_beside_us_per_row_doubling = 1e-9;
  p.step_beside_wide_ns_per_row = 1e-6;
  p.step_beside_ns_per_page = p.step_beside_ns_per_slot = p.step_beside_ns_per_miss = 1;
  p.step_beside_wide_ns_per_page = p.step_beside_wide_ns_per_slot = p.step_beside_wide_ns_per_miss =
      1;
  p.step_beside_ns_per_page_missing = p.step_beside_wide_ns_per_page_missing = 1e-6;
  p.step_beside_us_missing = 1e-9;
  p.attention_fixed_us = 0.001;
  p.attention_ns_per_cta = 1;
  p.attention_ns_per_cta_token = 1e-6;  // the bytes bound every attend of the unit tests
  p.attention_fp8_fixed_us = 0.001;
  p.attention_fp8_gbps = 1;
  p.attention_fp8_ns_per_row = 1;
  p.attention_fp8_host_fixed_us = 0.001;
  p.attention_fp8_host_gbps = 1;
  p.attention_fp8_host_ns_per_row = 1;
  p.store_fixed_us = p.store_host_us = 0.001;
  p.store_hbm_gbps = 1;
  p.store_fp8_fixed_us = p.store_fp8_host_us = 0.001;
  p.store_fp8_hbm_gbps = p.store_fp8_host_gbps = 1;
  // the host bank's store without a knee: 1 ns + every byte at 1 GB/s
  p.store_host_knee_bytes = p.store_host_ns_per_kib = 0;
  p.store_fp8_host_knee_bytes = p.store_fp8_host_ns_per_kib = 0;
  p.sm_count = 1;  // the attend: one CTA per (row, KV head) for selections up to 32 tokens
  p.non_qsa_forward_us = 0.01;
  p.non_qsa_token_us = 0.001;
  return p;
}

inline void add_forward(std::vector<traces::Record>& out, const Geometry& g,
                        std::vector<traces::ForwardRow> rows,
                        const std::vector<std::vector<std::vector<std::int32_t>>>& sel) {
  traces::Forward f;
  f.rows = std::move(rows);
  f.layers = g.qsa_layers();
  f.offsets.push_back(0);
  for (int l = 0; l < f.layers; ++l) {
    for (std::size_t r = 0; r < f.rows.size(); ++r) {
      f.ids.insert(f.ids.end(), sel[l][r].begin(), sel[l][r].end());
      f.offsets.push_back(static_cast<std::int64_t>(f.ids.size()));
    }
  }
  out.emplace_back(std::move(f));
}

// A random decode-and-prefill trace: up to `max_open` requests at once, each row selecting a
// random subset of at most block_topk visible blocks per layer; layers overlap partly.
inline traces::TraceInput random_trace(std::uint64_t seed, const Geometry& g, int forwards,
                                       int max_open = 3, bool prefill = true) {
  std::mt19937_64 rng(seed);
  std::vector<traces::Record> recs;
  struct Open {
    RequestId id;
    std::int64_t pos;
  };
  std::vector<Open> open;
  RequestId next_id = 1;
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  for (int fi = 0; fi < forwards; ++fi) {
    while (open.size() < static_cast<std::size_t>(max_open) && (open.empty() || coin(0.2))) {
      const std::int64_t prompt = 4 + static_cast<std::int64_t>(rng() % 40);
      recs.emplace_back(traces::RequestBegin{next_id, prompt, 0, 0});
      open.push_back({next_id++, prompt});
    }
    std::vector<traces::ForwardRow> rows;
    for (auto& o : open) {
      traces::ForwardRow r;
      r.request = o.id;
      r.position = o.pos;
      if (prefill && coin(0.1)) {
        r.kind = traces::RowKind::prefill;
        r.count = 1 + static_cast<std::int32_t>(rng() % 6);
      }
      rows.push_back(r);
      o.pos += r.count;
    }
    std::vector<std::vector<std::vector<std::int32_t>>> sel(
        g.qsa_layers(), std::vector<std::vector<std::int32_t>>(rows.size()));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::int64_t last = rows[r].position + rows[r].count - 1;
      const auto visible = static_cast<std::int32_t>((last + 1) / g.compress_ratio);
      std::set<std::int32_t> prev;
      for (int l = 0; l < g.qsa_layers(); ++l) {
        std::set<std::int32_t> s;
        const int k =
            std::min<int>(visible, rows[r].kind == traces::RowKind::prefill ? 2 * g.block_topk()
                                                                            : g.block_topk());
        for (std::int32_t b : prev) {
          if (static_cast<int>(s.size()) < k && coin(0.5)) s.insert(b);
        }
        while (static_cast<int>(s.size()) < k && visible > 0) {
          // favour recent blocks: locality, so that LRU has something to find
          const auto span = std::max<std::int32_t>(1, std::min<std::int32_t>(visible, 12));
          const std::int32_t b = coin(0.7) ? visible - 1 - static_cast<std::int32_t>(rng() % span)
                                           : static_cast<std::int32_t>(rng() % visible);
          s.insert(b);
        }
        sel[l][r].assign(s.begin(), s.end());
        prev = s;
      }
    }
    add_forward(recs, g, rows, sel);
    for (std::size_t i = 0; i < open.size();) {
      if (coin(0.08)) {
        recs.emplace_back(traces::RequestEnd{open[i].id});
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  for (const auto& o : open)
    recs.emplace_back(traces::RequestEnd{o.id});
  traces::TraceHeader h;
  h.geometry = g;
  h.producer = "tests/sim random_trace";
  return traces::memory_trace("random", h, std::move(recs));
}

}  // namespace kvtier::testing
