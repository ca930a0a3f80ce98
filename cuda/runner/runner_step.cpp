// A forward of the batch: the host plans it (trace description, page tables, select width,
// staging), the layers run (runner_layer.cpp), the LM head picks each request's next token.
// Also generate(), fill() and close().
#include <algorithm>
#include <chrono>
#include <set>

#include "cuda/kernels.hpp"
#include "cuda/runner/ops.hpp"
#include "cuda/runner/runner_impl.hpp"
#include "cuda/runner/tier_ops.hpp"
#include "model/config_error.hpp"
#include "model/step_stamp.hpp"

namespace kvtier::runner {

namespace {

// Tokens a row at `pos` attends: its chosen blocks' tokens and the open group's causal tail.
std::int64_t attended_tokens(std::int64_t pos, int ratio, int k) {
  const std::int64_t visible = (pos + 1) / ratio;
  return std::min<std::int64_t>(k, visible) * ratio + (pos + 1 - visible * ratio);
}

}  // namespace

std::vector<std::int32_t> QsaRunner::step(const std::vector<RequestRows>& batch) {
  launch_step(batch);
  return finish_step();
}

void QsaRunner::launch_step(const std::vector<RequestRows>& batch) {
  Impl& m = *impl_;
  const Geometry& g = m.g;
  if (pending_) throw std::logic_error("runner: launch_step while a forward is in flight");
  if (batch.empty()) throw ConfigError("runner: a forward needs at least one request");
  std::set<int> seen;
  int rows = 0;
  for (const auto& rr : batch) {
    if (rr.request < 0 || rr.request >= m.R)
      throw ConfigError("runner: request " + std::to_string(rr.request) + " outside 0.." +
                        std::to_string(m.R - 1));
    if (!seen.insert(rr.request).second)
      throw ConfigError("runner: request " + std::to_string(rr.request) + " twice in a forward");
    if (rr.tokens.empty()) throw ConfigError("runner: a request row without tokens");
    for (std::int32_t t : rr.tokens)
      if (t < 0 || t >= m.vocab)
        throw ConfigError("runner: token " + std::to_string(t) + " outside the vocabulary");
    const auto i = static_cast<std::size_t>(rr.request);
    if (m.opened[i] && m.pos[i] + static_cast<std::int64_t>(rr.tokens.size()) > m.c.max_context)
      throw ConfigError("runner: request " + std::to_string(rr.request) +
                        " would pass the context of " + std::to_string(m.c.max_context));
    rows += static_cast<int>(rr.tokens.size());
  }
  if (rows > m.c.max_rows)
    throw ConfigError("runner: a forward takes at most " + std::to_string(m.c.max_rows) +
                      " rows, got " + std::to_string(rows));
  for (const auto& rr : batch)
    if (!m.opened[static_cast<std::size_t>(rr.request)]) open(rr.request, 0);

  // --- plan: the trace description of the forward, the page tables, the query rows
  ForwardPlan p;
  p.rows = rows;
  p.trows = static_cast<int>(batch.size());
  p.decode = true;
  p.step_base = layer_step(m.forwards, m.L, 0);
  std::vector<std::int32_t> tokens, fwd(static_cast<std::size_t>(3 * m.R), 0), group, last_idx;
  for (int t = 0; t < p.trows; ++t) {
    const auto& rr = batch[static_cast<std::size_t>(t)];
    const auto i = static_cast<std::size_t>(rr.request);
    const auto count = static_cast<std::int32_t>(rr.tokens.size());
    traces::ForwardRow row;
    row.request = rr.request;
    row.position = m.pos[i];
    row.count = count;
    row.kind =
        count > 1 || m.pos[i] < m.prompt[i] ? traces::RowKind::prefill : traces::RowKind::decode;
    p.trace.rows.push_back(row);
    p.decode = p.decode && count == 1;
    p.request_rows = std::max(p.request_rows, static_cast<int>(count));
    fwd[i] = static_cast<std::int32_t>(tokens.size());
    fwd[static_cast<std::size_t>(m.R) + i] = count;
    fwd[static_cast<std::size_t>(2 * m.R) + i] = static_cast<std::int32_t>(m.pos[i]);
    for (std::int32_t j = 0; j < count; ++j) {
      p.row_req.push_back(rr.request);
      p.row_pos.push_back(static_cast<std::int32_t>(m.pos[i] + j));
      group.push_back(t);
    }
    tokens.insert(tokens.end(), rr.tokens.begin(), rr.tokens.end());
    last_idx.push_back(static_cast<std::int32_t>(tokens.size()) - 1);
    p.max_blocks = std::max<std::int64_t>(p.max_blocks, (m.pos[i] + count) / g.compress_ratio);
  }
  p.in_place = p.decode && m.in_place_decode() && frontend::decode_reads_in_place(m.last);
  p.splits = p.decode && m.c.decode_splits > 0 ? m.c.decode_splits
             : m.c.splits > 0                  ? m.c.splits
                              : qsa::attend_default_splits(rows, g.kv_heads, m.width);
  m.fe->prepare(p.trace);  // grows the page tables (throws when the page space is full)
  std::vector<std::int32_t> tables(static_cast<std::size_t>(m.R * m.stride), kNoPage);
  for (int r = 0; r < m.R; ++r) {
    if (!m.opened[static_cast<std::size_t>(r)]) continue;
    const auto t = m.fe->table(r);
    std::copy(t.begin(), t.end(), tables.begin() + r * m.stride);
  }
  std::vector<PageId> trow_tables(static_cast<std::size_t>(p.trows * m.stride), kNoPage);
  std::vector<std::int64_t> trow_len(static_cast<std::size_t>(p.trows)),
      trow_pos(static_cast<std::size_t>(p.trows));
  for (int t = 0; t < p.trows; ++t) {
    const auto& row = p.trace.rows[static_cast<std::size_t>(t)];
    const auto tb = m.fe->table(row.request);
    std::copy(tb.begin(), tb.end(), trow_tables.begin() + t * m.stride);
    trow_len[static_cast<std::size_t>(t)] = static_cast<std::int64_t>(tb.size());
    trow_pos[static_cast<std::size_t>(t)] = row.position + row.count - 1;
  }
  const bool mirror = m.c.placement == Placement::mirror;
  if (mirror) {
    // prefill rows wider than the pool bypass it: they read the host bank (in place or through
    // the staging windows, as every mirror prefill row does) and only their tails are queried
    p.width_pages = m.fe->plan_rows(m.c.pool_pages);
    const auto bypass = m.fe->bypass();
    m.trow_bypass_host.assign(bypass.begin(), bypass.end());
    upload(m.trow_bypass, m.trow_bypass_host, m.s);
    p.writes = m.fe->write_pages();
    const auto w = m.fe->writes();
    KVT_CUDA_CHECK(cudaMemcpyAsync(m.query.get(), w.data(), w.size() * sizeof(PageId),
                                   cudaMemcpyHostToDevice, m.s));
  }
  if (m.c.placement != Placement::device && !p.decode) {
    for (const auto& row : p.trace.rows)
      if (std::int64_t{row.count} * m.width > row.position + row.count) p.staged = true;
  }
  std::vector<std::int64_t> stamps(static_cast<std::size_t>(m.L));
  for (int l = 0; l < m.L; ++l)
    stamps[static_cast<std::size_t>(l)] = demand_stamp(p.step_base + l);  // the simulator's
  upload(m.stamps, stamps, m.s);
  if (m.prefetches()) {
    std::vector<std::int64_t> prefetch_stamps(stamps.size());
    for (int l = 0; l < m.L; ++l)
      prefetch_stamps[static_cast<std::size_t>(l)] = prefetch_stamp(p.step_base + l);
    upload(m.prefetch_stamps, prefetch_stamps, m.s);
  }
  if (p.decode) p.max_blocks = m.slab_stride;  // one shape per batch size (graphs)
  upload(m.tokens, tokens, m.s);
  upload(m.req, p.row_req, m.s);
  upload(m.rpos, p.row_pos, m.s);
  upload(m.fwd, fwd, m.s);
  upload(m.tables, tables, m.s);
  upload(m.group_of_row, group, m.s);
  upload(m.last_idx, last_idx, m.s);
  upload(m.trow_tables, trow_tables, m.s);
  upload(m.trow_len, trow_len, m.s);
  upload(m.trow_pos, trow_pos, m.s);
  KVT_CUDA_CHECK(cudaMemsetAsync(m.counters.get(), 0, sizeof(DeviceCounters), m.s));
  if (m.recorder != nullptr) m.recorded.assign(static_cast<std::size_t>(m.L * p.trows), {});

  // --- the GPU work: a graph for decode shapes seen before, else eagerly
  const bool graph_ok = m.c.graphs && !m.c.profile_phases && p.decode && !capture_ &&
                        probe_pos_ < 0 && m.recorder == nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  KVT_CUDA_CHECK(cudaEventRecord(m.ev_a, m.s));
  m.phases_on = m.c.profile_phases;
  m.phase_used = 0;
  m.mark("other");
  const Impl::GraphKey key{rows, p.width_pages, p.writes, p.in_place};
  bool steady = p.decode && m.decode_shapes_seen[key]++ > 0;
  if (graph_ok) {
    auto it = m.graphs.find(key);
    if (it == m.graphs.end() && m.graph_seen[key]++ > 0) {
      steady = false;  // this forward captures and instantiates
      cudaGraph_t graph = nullptr;
      KVT_CUDA_CHECK(cudaStreamBeginCapture(m.s, cudaStreamCaptureModeThreadLocal));
      m.forward_work(p, *this);
      KVT_CUDA_CHECK(cudaStreamEndCapture(m.s, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t e = cudaGraphInstantiate(
          &exec, graph, m.c.reads_yield ? cudaGraphInstantiateFlagUseNodePriority : 0);
      cudaGraphDestroy(graph);
      KVT_CUDA_CHECK(e);
      it = m.graphs.emplace(key, exec).first;
    }
    if (it != m.graphs.end()) {
      KVT_CUDA_CHECK(cudaGraphLaunch(it->second, m.s));
      ++stats_.graph_forwards;
    } else {
      m.forward_work(p, *this);
    }
  } else {
    m.forward_work(p, *this);
  }
  m.mark("LM head");
  KVT_CUDA_CHECK(cudaEventRecord(m.ev_b, m.s));
  pending_ = std::make_unique<PendingStep>(PendingStep{std::move(p), t0, steady});
}

std::vector<std::int32_t> QsaRunner::finish_step() {
  if (!pending_) throw std::logic_error("runner: finish_step without a forward in flight");
  const std::unique_ptr<PendingStep> pend = std::move(pending_);
  Impl& m = *impl_;
  const Geometry& g = m.g;
  ForwardPlan& p = pend->plan;
  const int rows = p.rows;
  const bool mirror = m.c.placement == Placement::mirror;
  const int V = static_cast<int>(m.vocab);
  std::vector<std::int32_t> next(static_cast<std::size_t>(p.trows));
  KVT_CUDA_CHECK(cudaMemcpyAsync(next.data(), m.argmax_out.get(), next.size() * 4,
                                 cudaMemcpyDeviceToHost, m.s));
  DeviceCounters dc{};
  KVT_CUDA_CHECK(cudaMemcpyAsync(&dc, m.counters.get(), sizeof dc, cudaMemcpyDeviceToHost, m.s));
  cuda::MirrorEngine::Counters ec{};  // with the forward's other results: one synchronise
  if (mirror)
    KVT_CUDA_CHECK(
        cudaMemcpyAsync(&ec, m.kv->mirror().counters(), sizeof ec, cudaMemcpyDeviceToHost, m.s));
  if (capture_) {
    last_logits_.resize(static_cast<std::size_t>(V));
    KVT_CUDA_CHECK(cudaMemcpyAsync(last_logits_.data(),
                                   m.logits_vocab.get() + std::int64_t{p.trows - 1} * V,
                                   static_cast<std::size_t>(V) * 4, cudaMemcpyDeviceToHost, m.s));
  }
  KVT_CUDA_CHECK(cudaStreamSynchronize(m.s));
  float gpu_ms = 0;
  KVT_CUDA_CHECK(cudaEventElapsedTime(&gpu_ms, m.ev_a, m.ev_b));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - pend->t0)
          .count();
  if (mirror) {
    if (ec.ensure_errors != 0 || dc.bad_rows != 0)
      throw std::runtime_error("runner: residency failed on the device (ensure errors " +
                               std::to_string(ec.ensure_errors) + ", bad rows " +
                               std::to_string(dc.bad_rows) + ")");
  }

  // --- statistics and the trace record
  RunnerStats& st = stats_;
  ++st.forwards;
  const PageLayout& lay = m.kv->layout();
  const std::int64_t token_bytes = lay.layer_page_bytes() / lay.page_size;
  for (const auto& row : p.trace.rows)
    (row.kind == traces::RowKind::decode ? st.decode_tokens : st.prefill_tokens) += row.count;
  (p.decode ? st.decode_ms : st.prefill_ms) += ms;
  if (p.decode) st.decode_gpu_ms += gpu_ms;
  if (pend->steady) {
    st.decode_steady_ms += ms;
    ++st.decode_steady_forwards;
  }
  last_steady_ = pend->steady;
  const std::int64_t h2d_before = st.h2d_bytes();
  if (m.phases_on) {
    const std::string kind = p.decode ? "decode/" : "prefill/";
    for (std::size_t i = 1; i < m.phase_used; ++i) {
      float e = 0;
      KVT_CUDA_CHECK(cudaEventElapsedTime(&e, m.phase_events[i - 1], m.phase_events[i]));
      st.phases[kind + m.phase_names[i]] += e;
    }
  }
  m.last = frontend::LastForward{p.decode, dc.ensure[1], std::int64_t{rows} * m.L};
  if (p.in_place) ++st.in_place_forwards;
  st.hits += dc.ensure[0];
  st.misses += dc.ensure[1];
  st.evictions += dc.ensure[2];
  st.drops += dc.dropped;
  st.miss_copy_bytes += dc.ensure[1] * lay.layer_page_bytes();
  st.prefetched += dc.prefetch[1];
  st.prefetch_copy_bytes += dc.prefetch[1] * lay.layer_page_bytes();
  if (m.c.placement != Placement::device) st.write_through_bytes += rows * token_bytes * m.L;
  const bool in_place =
      m.c.placement == Placement::host ? !p.staged : (mirror && !p.decode && !p.staged);
  if (in_place) {
    for (int i = 0; i < rows; ++i)
      st.in_place_bytes +=
          attended_tokens(p.row_pos[static_cast<std::size_t>(i)], g.compress_ratio, m.k) *
          token_bytes * m.L;
  }
  if (pend->steady) st.decode_steady_h2d_bytes += st.h2d_bytes() - h2d_before;
  if (m.recorder != nullptr) {
    for (const auto& row : p.trace.rows) {
      const auto i = static_cast<std::size_t>(row.request);
      if (!m.begun[i]) m.recorder->write(traces::RequestBegin{row.request, m.prompt[i], 0, 0});
      m.begun[i] = true;
    }
    p.trace.layers = m.L;
    p.trace.offsets.assign(1, 0);
    for (const auto& sel : m.recorded) {
      p.trace.ids.insert(p.trace.ids.end(), sel.begin(), sel.end());
      p.trace.offsets.push_back(static_cast<std::int64_t>(p.trace.ids.size()));
    }
    m.recorder->write(p.trace);
  }
  for (const auto& row : p.trace.rows)
    m.pos[static_cast<std::size_t>(row.request)] += row.count;
  ++m.forwards;
  return next;
}

void QsaRunner::Impl::forward_work(const ForwardPlan& p, QsaRunner& owner) {
  const int rows = p.rows;
  const int H = g.hidden_size;
  runner::embed(embed.get(), tokens.get(), rows, H, hidden.get(), s);
  if (in_place(p)) {
    // every layer's pool table before any ensure of the forward (each stays valid until its
    // own layer's ensure), one launch
    kv->mirror().locate_async(0, L, tables.get(), static_cast<int>(R * stride), pool_tbl.get(),
                              nullptr, s);
  }
  int li = 0;
  for (int id = 0; id < g.total_layers; ++id) {
    const bool is_qsa = li < L && g.qsa_layer_ids[static_cast<std::size_t>(li)] == id;
    if (!is_qsa) {
      if (c.stand_in_width > 0) stand_in_mlp(rows);
      continue;
    }
    qsa_layer(li, p, owner);
    if (owner.capture_) {
      auto& out = owner.captured_[static_cast<std::size_t>(li)];
      const std::size_t at = out.size();
      out.resize(at + static_cast<std::size_t>(rows) * H);
      KVT_CUDA_CHECK(cudaMemcpyAsync(out.data() + at, hidden.get(),
                                     static_cast<std::size_t>(rows) * H * 4, cudaMemcpyDeviceToHost,
                                     s));
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    }
    ++li;
  }
  join_residency();  // the last layer's residency step (mirror decode)
  // --- each request's last row: final norm, LM head, greedy pick
  const int V = static_cast<int>(vocab);
  gather_rows(hidden.get(), last_idx.get(), p.trows, H, last_hidden.get(), s);
  rms_norm(last_hidden.get(), final_norm.get(), p.trows, H, c.norm_eps, xn.get(), s);
  lm_head_logits(p.trows);
  argmax(logits_vocab.get(), p.trows, V, argmax_out.get(), s);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
}

std::int32_t QsaRunner::forward(const std::vector<std::int32_t>& tokens) {
  return step({RequestRows{0, tokens}})[0];
}

std::vector<std::vector<std::int32_t>> QsaRunner::generate(
    const std::vector<std::vector<std::int32_t>>& prompts, int chunk, int decode,
    const std::function<void(std::int64_t, std::int64_t)>& on_forward) {
  Impl& m = *impl_;
  const int n = static_cast<int>(prompts.size());
  if (n < 1 || n > m.R)
    throw ConfigError("runner: 1.." + std::to_string(m.R) + " prompts, got " + std::to_string(n));
  if (chunk < 1) throw ConfigError("runner: the prefill chunk must be positive");
  if (std::int64_t{chunk} * n > m.c.max_rows)
    throw ConfigError("runner: " + std::to_string(n) + " requests x chunk " +
                      std::to_string(chunk) + " rows exceed the forward's " +
                      std::to_string(m.c.max_rows) + " rows");
  if (decode < 0) throw ConfigError("runner: decode steps must be >= 0");
  for (int r = 0; r < n; ++r) {
    const auto& pr = prompts[static_cast<std::size_t>(r)];
    if (pr.empty()) throw ConfigError("runner: empty prompt for request " + std::to_string(r));
    const auto i = static_cast<std::size_t>(r);
    const std::int64_t base = m.opened[i] ? m.pos[i] : 0;
    if (base + static_cast<std::int64_t>(pr.size()) + decode > m.c.max_context + 1)
      throw ConfigError("runner: request " + std::to_string(r) + " needs " +
                        std::to_string(base + static_cast<std::int64_t>(pr.size()) + decode - 1) +
                        " positions, the context holds " + std::to_string(m.c.max_context));
    if (!m.opened[i]) open(r, static_cast<std::int64_t>(pr.size()));
  }
  std::vector<std::int32_t> next(static_cast<std::size_t>(n), 0);
  std::vector<std::size_t> done(static_cast<std::size_t>(n), 0);
  std::int64_t total = 0, sofar = 0;
  for (const auto& pr : prompts)
    total += static_cast<std::int64_t>(pr.size());
  for (;;) {
    std::vector<RequestRows> batch;
    for (int r = 0; r < n; ++r) {
      const auto& pr = prompts[static_cast<std::size_t>(r)];
      const std::size_t b = done[static_cast<std::size_t>(r)];
      if (b >= pr.size()) continue;
      const std::size_t e = std::min(pr.size(), b + static_cast<std::size_t>(chunk));
      batch.push_back({r, std::vector<std::int32_t>(pr.begin() + static_cast<std::ptrdiff_t>(b),
                                                    pr.begin() + static_cast<std::ptrdiff_t>(e))});
      done[static_cast<std::size_t>(r)] = e;
    }
    if (batch.empty()) break;
    const auto out = step(batch);
    for (std::size_t j = 0; j < batch.size(); ++j) {
      next[static_cast<std::size_t>(batch[j].request)] = out[j];
      sofar += static_cast<std::int64_t>(batch[j].tokens.size());
    }
    if (on_forward) on_forward(sofar, total);
  }
  std::vector<std::vector<std::int32_t>> decoded(static_cast<std::size_t>(n));
  for (int d = 0; d < decode; ++d) {
    std::vector<RequestRows> batch;
    for (int r = 0; r < n; ++r) {
      decoded[static_cast<std::size_t>(r)].push_back(next[static_cast<std::size_t>(r)]);
      batch.push_back({r, {next[static_cast<std::size_t>(r)]}});
    }
    if (d + 1 == decode) break;
    const auto out = step(batch);
    for (int r = 0; r < n; ++r)
      next[static_cast<std::size_t>(r)] = out[static_cast<std::size_t>(r)];
  }
  return decoded;
}

std::vector<std::int32_t> QsaRunner::generate(const std::vector<std::int32_t>& prompt, int chunk,
                                              int decode) {
  return generate(std::vector<std::vector<std::int32_t>>{prompt}, chunk, decode)[0];
}

void QsaRunner::fill(std::int64_t depth) {
  Impl& m = *impl_;
  const Geometry& g = m.g;
  if (m.forwards != 0 || stats_.filled_tokens != 0)
    throw ConfigError("runner: fill comes before any forward");
  if (depth < 1 || depth >= m.c.max_context)
    throw ConfigError("runner: the fill depth must be 1.." + std::to_string(m.c.max_context - 1) +
                      " (the context holds " + std::to_string(m.c.max_context) + ")");
  // The page tables of [0, depth], grown in request order as a replay of the recorded trace
  // (no fill forward: each request begins at the depth) grows them at its first forward, so the
  // page ids are the replay's.
  traces::Forward all;
  for (int r = 0; r < m.R; ++r) {
    if (!m.opened[static_cast<std::size_t>(r)]) open(r, depth);
    all.rows.push_back({static_cast<RequestId>(r), 0, static_cast<std::int32_t>(depth + 1),
                        traces::RowKind::prefill});
  }
  m.fe->prepare(all);
  std::vector<std::int32_t> tables(static_cast<std::size_t>(m.R * m.stride), kNoPage);
  for (int r = 0; r < m.R; ++r) {
    const auto t = m.fe->table(r);
    std::copy(t.begin(), t.end(), tables.begin() + r * m.stride);
  }
  upload(m.tables, tables, m.s);
  const qsa::PageTable table{m.tables.get(), m.stride, m.kv->logical_dummy()};
  // Positions are written in chunks of their own buffers (max_rows may be a single row).
  const int chunk = static_cast<int>(std::min<std::int64_t>(depth, 16384));
  DeviceArray<std::uint16_t> fk(static_cast<std::size_t>(chunk) * m.kvd),
      fv(static_cast<std::size_t>(chunk) * m.kvd);
  DeviceArray<std::int32_t> fpos(static_cast<std::size_t>(chunk)),
      freq(static_cast<std::size_t>(chunk));
  for (int li = 0; li < m.L; ++li) {
    LayerWeights& l = m.layers[static_cast<std::size_t>(li)];
    const qsa::KvBanks banks = m.kv->logical_banks(li);
    for (int r = 0; r < m.R; ++r) {
      const std::uint64_t salt = (static_cast<std::uint64_t>(li) << 40) ^
                                 (static_cast<std::uint64_t>(r) << 20) ^ 0xF111ull;
      for (std::int64_t p0 = 0; p0 < depth; p0 += chunk) {
        const int n = static_cast<int>(std::min<std::int64_t>(chunk, depth - p0));
        hash_bf16(fk.get(), n, m.kvd, p0, salt + 1, 1.0f, m.s);
        hash_bf16(fv.get(), n, m.kvd, p0, salt + 2, 1.0f, m.s);
        iota_i32(fpos.get(), n, static_cast<std::int32_t>(p0), m.s);
        fill_i32(freq.get(), n, r, m.s);
        qsa::store_kv(fk.get(), fv.get(), qsa::Rows{freq.get(), fpos.get(), n}, banks, table,
                      qsa::KvBanks{}, qsa::PageTable{}, m.s);
      }
      // Index keys: the closed groups' slab rows, the open group's raw keys in the ring.
      const std::int64_t closed = depth / g.compress_ratio;
      hash_bf16(l.slab.get() + r * m.slab_stride * m.ikd, closed, m.ikd, 0, salt + 3, 1.7f, m.s);
      const std::int64_t open_from = closed * g.compress_ratio;
      for (std::int64_t q = open_from; q < depth; ++q)
        hash_f32(l.ring.get() + (std::int64_t{r} * 4 + q % 4) * m.ikd, 1, m.ikd, q, salt + 4, 1.0f,
                 m.s);
    }
  }
  KVT_CUDA_CHECK(cudaStreamSynchronize(m.s));
  for (int r = 0; r < m.R; ++r)
    m.pos[static_cast<std::size_t>(r)] = depth;
  stats_.filled_tokens += depth * m.R;
}

void QsaRunner::warm_up(const std::vector<int>& forward_rows) {
  Impl& m = *impl_;
  const int H = m.g.hidden_size;
  std::vector<int> rows_seen;
  for (const int asked : forward_rows) {
    const int rows = std::clamp(asked, 1, m.c.max_rows);
    if (std::find(rows_seen.begin(), rows_seen.end(), rows) != rows_seen.end()) continue;
    rows_seen.push_back(rows);
    // Zeroed inputs (the buffers may hold anything) through the forward's own calls; every
    // buffer they write a forward writes before it reads (hidden: embedded anew by each forward).
    const auto n = static_cast<std::size_t>(rows);
    KVT_CUDA_CHECK(cudaMemsetAsync(m.hidden.get(), 0, n * H * sizeof(float), m.s));
    KVT_CUDA_CHECK(cudaMemsetAsync(m.xn.get(), 0, n * H * 2, m.s));
    KVT_CUDA_CHECK(cudaMemsetAsync(m.attn_g.get(), 0, n * m.qd * 2, m.s));
    m.input_projections(m.layers.front(), rows);
    m.output_projection(m.layers.front(), rows);
    if (m.c.stand_in_width > 0) m.stand_in_mlp(rows);
  }
  m.lm_head_logits(m.R);  // a forward with every request: its rows are the requests, one each
  KVT_CUDA_CHECK(cudaStreamSynchronize(m.s));
}

void QsaRunner::close() {
  Impl& m = *impl_;
  for (int r = 0; r < m.R; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (!m.opened[i]) continue;
    const std::vector<PageId> freed = m.fe->end(traces::RequestEnd{static_cast<RequestId>(r)});
    if (m.c.placement == Placement::mirror && !freed.empty()) {
      DeviceArray<PageId> d(freed.size());
      KVT_CUDA_CHECK(cudaMemcpyAsync(d.get(), freed.data(), freed.size() * sizeof(PageId),
                                     cudaMemcpyHostToDevice, m.s));
      for (int l = 0; l < m.L; ++l)
        cuda::launch_release(m.kv->mirror().device_view(l), d.get(), static_cast<int>(freed.size()),
                             m.s);
      KVT_CUDA_CHECK(cudaStreamSynchronize(m.s));
    }
    if (m.recorder != nullptr && m.begun[i])
      m.recorder->write(traces::RequestEnd{static_cast<RequestId>(r)});
    m.opened[i] = false;
    m.begun[i] = false;
    m.pos[i] = 0;
  }
}

}  // namespace kvtier::runner
