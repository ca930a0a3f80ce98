// One QSA layer of a planned forward, per placement (see qsa_runner.hpp for the rules).
#include <algorithm>

#include "cuda/kernels.hpp"
#include "cuda/runner/ops.hpp"
#include "cuda/runner/runner_impl.hpp"
#include "cuda/runner/tier_ops.hpp"
#include "model/cost_model.hpp"

namespace kvtier::runner {

void QsaRunner::Impl::mark(const char* phase) {
  if (!phases_on) return;
  if (phase_used == phase_events.size()) {
    cudaEvent_t e = nullptr;
    KVT_CUDA_CHECK(cudaEventCreate(&e));
    phase_events.push_back(e);
    phase_names.emplace_back();
  }
  phase_names[phase_used] = phase;
  KVT_CUDA_CHECK(cudaEventRecord(phase_events[phase_used++], s));
}

bool QsaRunner::Impl::in_place_decode() const {
  return c.placement == Placement::mirror && !c.copy_first && c.dtype == KvDtype::bf16 &&
         c.policy == MirrorPolicy::lru;
}

void QsaRunner::Impl::prefetch_next_layer(int li, int n) {
  if (!prefetches() || !PrefetchNextLayer::applies(ResidencyUnit::layer_page, li, L)) return;
  KVT_CUDA_CHECK(cudaEventRecord(ev_fork, s));
  KVT_CUDA_CHECK(cudaStreamWaitEvent(side, ev_fork));
  // The query holds layer li's pages until layer li + 1's step rewrites it, which waits.
  kv->mirror().prefetch_async(
      li + 1, query.get(), n, side,
      cuda::EnsureHooks{prefetch_stamps.get() + li, counters.get()->prefetch});
  KVT_CUDA_CHECK(cudaEventRecord(ev_prefetched, side));
  prefetch_pending = true;
}

void QsaRunner::Impl::wait_for_prefetch() {
  if (!prefetch_pending) return;
  KVT_CUDA_CHECK(cudaStreamWaitEvent(s, ev_prefetched));
  prefetch_pending = false;
}

void QsaRunner::Impl::join_residency() {
  if (pending_join < 0) return;
  KVT_CUDA_CHECK(cudaStreamWaitEvent(s, ev_join[pending_join]));
  pending_join = -1;
}

void QsaRunner::Impl::stand_in_mlp(int rows) {
  const int H = g.hidden_size;
  const int W = c.stand_in_width;
  rms_norm(hidden.get(), mlp_norm.get(), rows, H, c.norm_eps, xn.get(), s);
  const ProjectionOutput gate_up[] = {{mlp_gate.get(), W, mlp_a.get()},
                                      {mlp_up.get(), W, mlp_b.get()}};
  gemm.bf16_out_group(xn.get(), rows, H, gate_up);
  silu_mul(mlp_a.get(), mlp_b.get(), std::int64_t{rows} * W, mlp_a.get(), s);
  gemm.f32_out(mlp_a.get(), mlp_down.get(), rows, W, H, hidden.get(), true);
}

void QsaRunner::Impl::input_projections(const LayerWeights& l, int rows) {
  const ProjectionOutput projections[] = {
      {l.q.get(), qd, q.get()},        {l.k.get(), kvd, kk.get()},  {l.v.get(), kvd, v.get()},
      {l.iq.get(), iqd, iq_raw.get()}, {l.ik.get(), ikd, ik.get()}, {l.gate.get(), qd, gate.get()}};
  gemm.bf16_out_group(xn.get(), rows, g.hidden_size, projections);
}

void QsaRunner::Impl::output_projection(const LayerWeights& l, int rows) {
  gemm.f32_out(attn_g.get(), l.o.get(), rows, qd, g.hidden_size, hidden.get(), true);
}

void QsaRunner::Impl::lm_head_logits(int trows) {
  gemm.f32_out(xn.get(), lm_head.get(), trows, g.hidden_size, static_cast<int>(vocab),
               logits_vocab.get(), false);
}

void QsaRunner::Impl::attend_staged(int li, const ForwardPlan& p, qsa::Rows r, RunnerStats& st) {
  const PagedKv& store = *kv;
  const std::int64_t wp = store.window_pages();
  const qsa::PageTable wt{wtable.get(), stride, static_cast<std::int32_t>(wp)};
  const std::int64_t qd_row = std::int64_t{g.q_heads} * g.head_dim;
  qsa::fold_reset(o.get(), lse.get(), p.rows, g.q_heads, s);
  // A trace row's tokens are the forward's rows [first, first + count): each of its windows is
  // attended by those rows alone (the other requests' rows would find no token of the window).
  std::int64_t first = 0;
  for (const auto& row : p.trace.rows) {
    const int rq = static_cast<int>(row.request);
    const int n = static_cast<int>(row.count);
    const qsa::Rows rr{r.req + first, r.pos + first, n};
    const std::int64_t pages = g.pages_for_context(row.position + row.count);
    for (std::int64_t p0 = 0; p0 < pages; p0 += wp) {
      const std::int64_t p1 = std::min(pages, p0 + wp);
      store.stage(li, tables.get() + rq * stride + p0, p1 - p0, s);
      mark("staging");
      window_table(R, stride, rq, p0, p1, wtable.get(), s);
      window_tokens(sel.get() + first * width, width, rr.req, n, rq, p0 * g.page_size,
                    p1 * g.page_size, sel_w.get(), s);
      mark("window tables");
      qsa::attend(q.get() + first * qd_row, g.q_heads, rr, sel_w.get(), width, store.window_banks(),
                  wt, p.splits, work.get(), o_w.get(), lse_w.get(), s);
      qsa::fold(o.get() + first * qd_row, lse.get() + first * g.q_heads, o_w.get(), lse_w.get(), n,
                g.q_heads, s);
      mark("attend");
      st.staged_bytes += (p1 - p0) * store.layout().layer_page_bytes();
      ++st.staged_windows;
    }
    first += n;
  }
}

void QsaRunner::Impl::qsa_layer(int li, const ForwardPlan& p, QsaRunner& owner) {
  LayerWeights& l = layers[static_cast<std::size_t>(li)];
  RunnerStats& st = owner.stats_;
  const int rows = p.rows;
  const int H = g.hidden_size;
  const qsa::Rows r{req.get(), rpos.get(), rows};
  const qsa::CompressRequests f{fwd.get(), fwd.get() + R, fwd.get() + 2 * R, R};
  mark("other");
  rms_norm(hidden.get(), l.input_norm.get(), rows, H, c.norm_eps, xn.get(), s);
  mark("norm");
  input_projections(l, rows);
  mark("projections");
  qsa::rope_inplace(q.get(), g.q_heads, g.head_dim, r, rope, s);
  qsa::rope_inplace(kk.get(), g.kv_heads, g.head_dim, r, rope, s);
  qsa::index_queries(iq_raw.get(), l.iq_norm.get(), g.index_q_heads, c.norm_eps, r, rope, iq.get(),
                     s);
  qsa::compress(ik.get(), r, f, l.ik_norm.get(), c.norm_eps, rope, l.ring.get(), l.slab.get(),
                slab_stride, s);
  mark("rope, compress");
  qsa::index_scores(iq.get(), g.index_q_heads, r, l.slab.get(), slab_stride, logits_idx.get(),
                    slab_stride, p.max_blocks, s, p.request_rows);
  mark("index");
  join_residency();  // the previous layer's step reads the selection the top-k rewrites
  // Many rows of contexts up to 128k (prefill chunks, large decode batches): one CTA per row.
  // Otherwise the workspace entry, which takes the one-launch cluster kernel for up to 16 rows
  // (decode) and the multi-CTA chain beyond. The same selection either way; the rule is the
  // cost model's (model/cost_model.hpp, topk_path), which prices each kernel with its terms.
  if (topk_path(rows, p.max_blocks) == TopkPath::one_cta)
    qsa::topk(logits_idx.get(), slab_stride, nullptr, r, g.compress_ratio, k, blocks.get(), s);
  else
    qsa::topk(logits_idx.get(), slab_stride, nullptr, r, g.compress_ratio, k, blocks.get(),
              topk_work.get(), p.max_blocks, s);
  mark("top-k");
  qsa::expand(blocks.get(), k, r, g.compress_ratio, sel.get(), width, s);

  // The trace row selections: each request's rows' union (or the row itself).
  const std::int32_t* row_sel = blocks.get();
  int nb = k;
  const bool mirror = c.placement == Placement::mirror;
  if ((mirror || recorder != nullptr) && !p.decode) {  // some request has several rows
    union_selections(blocks.get(), k, rows, group_of_row.get(), p.trows, p.max_blocks, bitmap.get(),
                     lists.get(), p.max_blocks, counts.get(), s);
    row_sel = lists.get();
    nb = static_cast<int>(p.max_blocks);
  }
  if (recorder != nullptr) {
    std::vector<std::int32_t> h(static_cast<std::size_t>(p.trows) * nb);
    KVT_CUDA_CHECK(cudaMemcpyAsync(h.data(), row_sel, h.size() * 4, cudaMemcpyDeviceToHost, s));
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    for (int t = 0; t < p.trows; ++t) {
      auto& out = recorded[static_cast<std::size_t>(li) * p.trows + t];
      out.clear();
      for (int i = 0; i < nb; ++i) {
        const std::int32_t b = h[static_cast<std::size_t>(t) * nb + i];
        if (b >= 0) out.push_back(b);
      }
    }
  }
  if (owner.probe_pos_ >= 0) {
    for (int i = 0; i < rows; ++i) {
      if (p.row_req[static_cast<std::size_t>(i)] != 0 ||
          p.row_pos[static_cast<std::size_t>(i)] != owner.probe_pos_)
        continue;
      std::vector<std::uint16_t> b(static_cast<std::size_t>(kvd));
      KVT_CUDA_CHECK(cudaMemcpyAsync(b.data(), v.get() + std::int64_t{i} * kvd, b.size() * 2,
                                     cudaMemcpyDeviceToHost, s));
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
      auto& pv = owner.probe_v_[static_cast<std::size_t>(li)];
      pv.resize(b.size());
      for (std::size_t j = 0; j < b.size(); ++j)
        pv[j] = weights::bf16_to_float(b[j]);
    }
  }

  mark("expand, union");
  PagedKv& store = *kv;
  const qsa::KvBanks logical = store.logical_banks(li);
  const qsa::PageTable logical_table{tables.get(), stride, store.logical_dummy()};
  if (mirror) {
    cuda::MirrorEngine& m = store.mirror();
    DeviceCounters* dc = counters.get();
    cuda::CompactParams cp{row_sel,
                           trow_pos.get(),
                           trow_tables.get(),
                           trow_len.get(),
                           query.get() + p.writes,
                           &dc->dropped,
                           &dc->bad_rows,
                           p.trows,
                           nb,
                           static_cast<int>(stride),
                           p.width_pages,
                           g.compress_ratio,
                           g.page_size,
                           trow_bypass.get()};
    const std::int32_t n = p.writes + p.trows * p.width_pages;
    const cuda::EnsureHooks hooks{stamps.get() + li, dc->ensure};
    std::int32_t* layer_tbl = pool_tbl.get() + li * R * stride;
    const cuda::TranslateTarget pool_target{tables.get(), layer_tbl, static_cast<int>(R * stride),
                                            kNoSlot, &dc->missing};
    qsa::PageTable pool_table{layer_tbl, stride, store.pool_dummy()};
    if (in_place(p)) {
      // The rows' tables were located before the forward's ensures (forward_work: resident
      // pages to slots, the others read in place from the host bank). The store (the pool where
      // resident, the host bank always), then the attention beside the residency step on a few
      // SMs: the ensure changes no slot of a page the attention reads, and the copy brings the
      // new tokens with the pages it admits (it follows the store).
      qsa::store_kv(kk.get(), v.get(), r, logical, logical_table, store.pool_banks(li), pool_table,
                    s);
      KVT_CUDA_CHECK(cudaEventRecord(ev_fork, s));
      KVT_CUDA_CHECK(cudaStreamWaitEvent(side, ev_fork));
      m.residency_beside_async(li, cp, query.get(), n, side, hooks);
      KVT_CUDA_CHECK(cudaEventRecord(ev_join[li % 2], side));
      mark("residency, store");
      pool_table.in_place = logical;
      qsa::attend(q.get(), g.q_heads, r, sel.get(), width, store.pool_banks(li), pool_table,
                  p.splits, work.get(), o.get(), nullptr, s);
      pending_join = li % 2;
    } else {
      // Compaction, ensure, miss copy and the translate of the rows' tables in one launch. The
      // translated table (slot per resident page, -1 otherwise) serves the store (writes go to
      // the host bank and to the slot of every resident page: all written pages are, they head
      // the query) and the decode attention (-1 reads the zero dummy slot).
      wait_for_prefetch();  // the previous layer's, into this layer's pool
      m.residency_step_async(li, cp, query.get(), n, pool_target, s, hooks);
      prefetch_next_layer(li, n);
      qsa::store_kv(kk.get(), v.get(), r, logical, logical_table, store.pool_banks(li), pool_table,
                    s);
      mark("residency, store");
      if (p.decode) {
        qsa::attend(q.get(), g.q_heads, r, sel.get(), width, store.pool_banks(li), pool_table,
                    p.splits, work.get(), o.get(), nullptr, s);
      }
    }
  } else {
    qsa::store_kv(kk.get(), v.get(), r, logical, logical_table, qsa::KvBanks{}, qsa::PageTable{},
                  s);
    mark("residency, store");
  }
  // Mirror decode attended through the pool above; everything else reads the logical pages
  // (device memory, or the host bank in place) or, for staged prefill, the windows.
  if (p.staged) {
    attend_staged(li, p, r, st);
  } else if (!(mirror && p.decode)) {
    const bool yield = reads != nullptr && p.decode;
    if (yield) {
      KVT_CUDA_CHECK(cudaEventRecord(ev_reads_fork, s));
      KVT_CUDA_CHECK(cudaStreamWaitEvent(reads, ev_reads_fork));
    }
    qsa::attend(q.get(), g.q_heads, r, sel.get(), width, logical, logical_table, p.splits,
                work.get(), o.get(), nullptr, yield ? reads : s);
    if (yield) {
      KVT_CUDA_CHECK(cudaEventRecord(ev_reads_join, reads));
      KVT_CUDA_CHECK(cudaStreamWaitEvent(s, ev_reads_join));
    }
  }
  mark("attend");
  if (owner.probe_pos_ >= 0) {
    auto& a = owner.last_attn_[static_cast<std::size_t>(li)];
    a.resize(static_cast<std::size_t>(qd));
    KVT_CUDA_CHECK(cudaMemcpyAsync(a.data(), o.get() + std::int64_t{rows - 1} * qd, a.size() * 4,
                                   cudaMemcpyDeviceToHost, s));
  }
  gate_mul(o.get(), gate.get(), std::int64_t{rows} * qd, attn_g.get(), s);
  mark("gate");
  output_projection(l, rows);
  mark("output projection");
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

}  // namespace kvtier::runner
