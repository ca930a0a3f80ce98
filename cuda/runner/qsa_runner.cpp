#include "cuda/runner/qsa_runner.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "cuda/cuda_check.hpp"
#include "cuda/runner/gemm.hpp"
#include "cuda/runner/ops.hpp"
#include "cuda/weights/qsa_tensors.hpp"
#include "model/config_error.hpp"

namespace kvtier::runner {

using cuda::DeviceArray;

namespace {

constexpr int kCompiledGroup = 12;  // cuda/qsa attend is compiled for a GQA group of 12

// A BF16 tensor of the file on the device (its 16-bit codes).
DeviceArray<std::uint16_t> upload_bf16(const weights::SafetensorsFile& f, const std::string& name) {
  const auto d = f.data(name);
  DeviceArray<std::uint16_t> a(d.size() / 2);
  KVT_CUDA_CHECK(cudaMemcpy(a.get(), d.data(), d.size(), cudaMemcpyHostToDevice));
  return a;
}

// A BF16 vector of the file on the device as fp32 (the QSA kernels take fp32 norm weights).
DeviceArray<float> upload_f32(const weights::SafetensorsFile& f, const std::string& name) {
  const auto d = f.data(name);
  std::vector<float> v(d.size() / 2);
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t b;
    std::memcpy(&b, d.data() + 2 * i, 2);
    v[i] = weights::bf16_to_float(b);
  }
  DeviceArray<float> a(v.size());
  KVT_CUDA_CHECK(cudaMemcpy(a.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return a;
}

struct Layer {
  DeviceArray<std::uint16_t> input_norm, q, k, v, iq, ik, gate, o;
  DeviceArray<float> iq_norm, ik_norm;
  DeviceArray<std::uint16_t> kbank, vbank;  // [pages + 1][page_size][kv_heads][256], dummy last
  DeviceArray<std::uint16_t> slab;          // [slab_stride][128]
  DeviceArray<float> ring;                  // [4][128]
};

}  // namespace

struct QsaRunner::Impl {
  Geometry g;
  std::int64_t vocab = 0;
  RunnerConfig c;
  qsa::Rope rope;
  Gemm gemm;
  cudaStream_t s = nullptr;
  int qd = 0, kvd = 0, iqd = 0, ikd = 0, k = 0, width = 0, splits = 0;
  std::int64_t pages = 0, slab_stride = 0;
  DeviceArray<std::uint16_t> embed, final_norm, lm_head;
  std::vector<Layer> layers;
  DeviceArray<std::int32_t> table, tokens, req, pos, fwd, blocks, sel, argmax_out;
  DeviceArray<float> hidden, o, work, logits_idx, logits_vocab;
  DeviceArray<std::uint16_t> xn, q, kk, v, iq_raw, iq, ik, gate, attn_g;
  DeviceArray<std::int32_t> topk_work;
};

QsaRunner::QsaRunner(const weights::SafetensorsFile& file, const Geometry& g, std::int64_t vocab,
                     const RunnerConfig& c)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  g.validate();
  if (g.head_dim != qsa::kHeadDim)
    throw ConfigError("runner: head_dim must be " + std::to_string(qsa::kHeadDim) +
                      " (the compiled size), got " + std::to_string(g.head_dim));
  if (g.index_head_dim != qsa::kIndexDim)
    throw ConfigError("runner: index_head_dim must be " + std::to_string(qsa::kIndexDim) +
                      " (the compiled size), got " + std::to_string(g.index_head_dim));
  if (g.index_kv_heads != 1) throw ConfigError("runner: index_kv_heads must be 1");
  if (g.gqa_group() != kCompiledGroup)
    throw ConfigError("runner: q_heads / kv_heads must be " + std::to_string(kCompiledGroup) +
                      " (the attend kernel's compiled GQA group), got " +
                      std::to_string(g.gqa_group()));
  if (c.max_rows < 1) throw ConfigError("runner: max_rows must be positive");
  if (c.max_context < 1 || c.max_context > g.max_context(c.yarn))
    throw ConfigError("runner: max_context must be 1.." + std::to_string(g.max_context(c.yarn)) +
                      (c.yarn ? "" : " (or switch YaRN on)"));
  if (c.max_context > INT32_MAX) throw ConfigError("runner: max_context must fit 32 bits");
  weights::check_qsa_weights(file, g, vocab);
  m.g = g;
  m.vocab = vocab;
  m.c = c;
  m.rope = qsa::make_rope(g.rope_dims, g.rope_theta, c.yarn, g.yarn_factor,
                          static_cast<double>(g.rope_max_positions));
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&m.s, cudaStreamNonBlocking));
  m.gemm.set_stream(m.s);
  m.qd = g.q_heads * g.head_dim;
  m.kvd = g.kv_heads * g.head_dim;
  m.iqd = g.index_q_heads * g.index_head_dim;
  m.ikd = g.index_head_dim;
  m.k = g.block_topk();
  m.width = g.select_width_tokens();
  m.pages = g.pages_for_context(c.max_context);
  m.slab_stride = std::max<std::int64_t>(1, c.max_context / g.compress_ratio);
  m.splits = c.splits > 0 ? c.splits : qsa::attend_default_splits(c.max_rows, g.kv_heads, m.width);

  m.embed = upload_bf16(file, weights::kEmbedName);
  m.final_norm = upload_bf16(file, weights::kFinalNormName);
  m.lm_head = upload_bf16(file, weights::kLmHeadName);
  const std::int64_t bank_elems = (m.pages + 1) * g.page_size * m.kvd;
  for (int id : g.qsa_layer_ids) {
    const weights::LayerNames n = weights::layer_names(id);
    Layer l;
    l.input_norm = upload_bf16(file, n.input_norm);
    l.q = upload_bf16(file, n.q_proj);
    l.k = upload_bf16(file, n.k_proj);
    l.v = upload_bf16(file, n.v_proj);
    l.iq = upload_bf16(file, n.index_q);
    l.ik = upload_bf16(file, n.index_k);
    l.gate = upload_bf16(file, n.gate_proj);
    l.o = upload_bf16(file, n.o_proj);
    l.iq_norm = upload_f32(file, n.index_q_norm);
    l.ik_norm = upload_f32(file, n.index_k_norm);
    l.kbank = DeviceArray<std::uint16_t>(static_cast<std::size_t>(bank_elems));
    l.vbank = DeviceArray<std::uint16_t>(static_cast<std::size_t>(bank_elems));
    KVT_CUDA_CHECK(cudaMemset(l.kbank.get(), 0, l.kbank.bytes()));
    KVT_CUDA_CHECK(cudaMemset(l.vbank.get(), 0, l.vbank.bytes()));
    l.slab = DeviceArray<std::uint16_t>(static_cast<std::size_t>(m.slab_stride) * m.ikd);
    l.ring = DeviceArray<float>(4 * static_cast<std::size_t>(m.ikd));
    KVT_CUDA_CHECK(cudaMemset(l.slab.get(), 0, l.slab.bytes()));
    KVT_CUDA_CHECK(cudaMemset(l.ring.get(), 0, l.ring.bytes()));
    m.layers.push_back(std::move(l));
  }
  // Device placement: logical page p is physical page p; the dummy page is the last (zero).
  std::vector<std::int32_t> table(static_cast<std::size_t>(m.pages));
  std::iota(table.begin(), table.end(), 0);
  m.table = DeviceArray<std::int32_t>(table.size());
  KVT_CUDA_CHECK(cudaMemcpy(m.table.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));

  const auto R = static_cast<std::size_t>(c.max_rows);
  const auto H = static_cast<std::size_t>(g.hidden_size);
  m.tokens = DeviceArray<std::int32_t>(R);
  m.req = DeviceArray<std::int32_t>(R);
  KVT_CUDA_CHECK(cudaMemset(m.req.get(), 0, m.req.bytes()));
  m.pos = DeviceArray<std::int32_t>(R);
  m.fwd = DeviceArray<std::int32_t>(3);
  m.blocks = DeviceArray<std::int32_t>(R * static_cast<std::size_t>(m.k));
  m.sel = DeviceArray<std::int32_t>(R * static_cast<std::size_t>(m.width));
  m.argmax_out = DeviceArray<std::int32_t>(1);
  m.hidden = DeviceArray<float>(R * H);
  m.o = DeviceArray<float>(R * static_cast<std::size_t>(m.qd));
  m.work = DeviceArray<float>(
      static_cast<std::size_t>(qsa::attend_workspace_floats(c.max_rows, g.q_heads, m.splits)));
  m.logits_idx = DeviceArray<float>(R * static_cast<std::size_t>(m.slab_stride));
  m.logits_vocab = DeviceArray<float>(static_cast<std::size_t>(vocab));
  m.xn = DeviceArray<std::uint16_t>(R * H);
  m.q = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.qd));
  m.kk = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.kvd));
  m.v = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.kvd));
  m.iq_raw = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.iqd));
  m.iq = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.iqd));
  m.ik = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.ikd));
  m.gate = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.qd));
  m.attn_g = DeviceArray<std::uint16_t>(R * static_cast<std::size_t>(m.qd));
  m.topk_work = DeviceArray<std::int32_t>(
      static_cast<std::size_t>(qsa::topk_workspace_bytes(c.max_rows, m.slab_stride) / 4 + 1));
  captured_.resize(g.qsa_layer_ids.size());
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
}

QsaRunner::~QsaRunner() {
  if (!impl_) return;
  cudaStream_t s = impl_->s;
  if (s) cudaStreamSynchronize(s);
  impl_.reset();  // buffers and the cuBLAS handle go before the stream they were used on
  if (s) cudaStreamDestroy(s);
}

std::int32_t QsaRunner::forward(const std::vector<std::int32_t>& tokens) {
  Impl& m = *impl_;
  const Geometry& g = m.g;
  const int rows = static_cast<int>(tokens.size());
  if (rows < 1 || rows > m.c.max_rows)
    throw ConfigError("runner: a forward takes 1.." + std::to_string(m.c.max_rows) + " rows, got " +
                      std::to_string(rows));
  if (pos_ + rows > m.c.max_context)
    throw ConfigError("runner: the request would pass max_context " +
                      std::to_string(m.c.max_context));
  for (std::int32_t t : tokens)
    if (t < 0 || t >= m.vocab)
      throw ConfigError("runner: token " + std::to_string(t) + " outside the vocabulary");
  const auto p0 = static_cast<std::int32_t>(pos_);
  std::vector<std::int32_t> pos(static_cast<std::size_t>(rows));
  std::iota(pos.begin(), pos.end(), p0);
  const std::int32_t fwd[3] = {0, rows, p0};
  cudaStream_t s = m.s;
  KVT_CUDA_CHECK(
      cudaMemcpyAsync(m.tokens.get(), tokens.data(), tokens.size() * 4, cudaMemcpyHostToDevice, s));
  KVT_CUDA_CHECK(
      cudaMemcpyAsync(m.pos.get(), pos.data(), pos.size() * 4, cudaMemcpyHostToDevice, s));
  KVT_CUDA_CHECK(cudaMemcpyAsync(m.fwd.get(), fwd, sizeof(fwd), cudaMemcpyHostToDevice, s));
  const qsa::Rows r{m.req.get(), m.pos.get(), rows};
  const qsa::Forward f{m.fwd.get(), m.fwd.get() + 1, m.fwd.get() + 2, 1};
  const qsa::PageTable table{m.table.get(), m.pages, static_cast<std::int32_t>(m.pages)};
  const int H = g.hidden_size;
  embed(m.embed.get(), m.tokens.get(), rows, H, m.hidden.get(), s);
  for (std::size_t li = 0; li < m.layers.size(); ++li) {
    Layer& l = m.layers[li];
    rms_norm(m.hidden.get(), l.input_norm.get(), rows, H, m.c.norm_eps, m.xn.get(), s);
    m.gemm.bf16_out(m.xn.get(), l.q.get(), rows, H, m.qd, m.q.get());
    m.gemm.bf16_out(m.xn.get(), l.k.get(), rows, H, m.kvd, m.kk.get());
    m.gemm.bf16_out(m.xn.get(), l.v.get(), rows, H, m.kvd, m.v.get());
    m.gemm.bf16_out(m.xn.get(), l.iq.get(), rows, H, m.iqd, m.iq_raw.get());
    m.gemm.bf16_out(m.xn.get(), l.ik.get(), rows, H, m.ikd, m.ik.get());
    m.gemm.bf16_out(m.xn.get(), l.gate.get(), rows, H, m.qd, m.gate.get());
    qsa::rope_inplace(m.q.get(), g.q_heads, g.head_dim, r, m.rope, s);
    qsa::rope_inplace(m.kk.get(), g.kv_heads, g.head_dim, r, m.rope, s);
    qsa::index_queries(m.iq_raw.get(), l.iq_norm.get(), g.index_q_heads, m.c.norm_eps, r, m.rope,
                       m.iq.get(), s);
    const qsa::KvBanks banks{l.kbank.get(), l.vbank.get(), nullptr,   nullptr,
                             false,         g.page_size,   g.kv_heads};
    qsa::store_kv(m.kk.get(), m.v.get(), r, banks, table, qsa::KvBanks{}, qsa::PageTable{}, s);
    qsa::compress(m.ik.get(), r, f, l.ik_norm.get(), m.c.norm_eps, m.rope, l.ring.get(),
                  l.slab.get(), m.slab_stride, s);
    qsa::index_scores(m.iq.get(), g.index_q_heads, r, l.slab.get(), m.slab_stride,
                      m.logits_idx.get(), m.slab_stride, (p0 + rows) / g.compress_ratio, s);
    qsa::topk(m.logits_idx.get(), m.slab_stride, nullptr, r, g.compress_ratio, m.k, m.blocks.get(),
              m.topk_work.get(), m.slab_stride, s);
    qsa::expand(m.blocks.get(), m.k, r, g.compress_ratio, m.sel.get(), m.width, s);
    qsa::attend(m.q.get(), g.q_heads, r, m.sel.get(), m.width, banks, table, m.splits, m.work.get(),
                m.o.get(), nullptr, s);
    gate_mul(m.o.get(), m.gate.get(), std::int64_t{rows} * m.qd, m.attn_g.get(), s);
    m.gemm.f32_out(m.attn_g.get(), l.o.get(), rows, m.qd, H, m.hidden.get(), true);
    KVT_CUDA_CHECK(cudaPeekAtLastError());
    if (capture_) {
      auto& out = captured_[li];
      const std::size_t at = out.size();
      out.resize(at + static_cast<std::size_t>(rows) * H);
      KVT_CUDA_CHECK(cudaMemcpyAsync(out.data() + at, m.hidden.get(),
                                     static_cast<std::size_t>(rows) * H * 4, cudaMemcpyDeviceToHost,
                                     s));
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    }
  }
  // The last row only: final norm, LM head, greedy pick.
  const float* last = m.hidden.get() + std::int64_t{rows - 1} * H;
  rms_norm(last, m.final_norm.get(), 1, H, m.c.norm_eps, m.xn.get(), s);
  const int V = static_cast<int>(m.vocab);
  m.gemm.f32_out(m.xn.get(), m.lm_head.get(), 1, H, V, m.logits_vocab.get(), false);
  argmax(m.logits_vocab.get(), 1, V, m.argmax_out.get(), s);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
  std::int32_t next = 0;
  KVT_CUDA_CHECK(cudaMemcpyAsync(&next, m.argmax_out.get(), 4, cudaMemcpyDeviceToHost, s));
  if (capture_) {
    last_logits_.resize(static_cast<std::size_t>(V));
    KVT_CUDA_CHECK(cudaMemcpyAsync(last_logits_.data(), m.logits_vocab.get(),
                                   static_cast<std::size_t>(V) * 4, cudaMemcpyDeviceToHost, s));
  }
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
  pos_ += rows;
  return next;
}

std::vector<std::int32_t> QsaRunner::generate(const std::vector<std::int32_t>& prompt, int chunk,
                                              int decode) {
  if (prompt.empty()) throw ConfigError("runner: empty prompt");
  if (chunk < 1) throw ConfigError("runner: the prefill chunk must be positive");
  std::int32_t next = 0;
  for (std::size_t b = 0; b < prompt.size(); b += static_cast<std::size_t>(chunk)) {
    const std::size_t e = std::min(prompt.size(), b + static_cast<std::size_t>(chunk));
    next = forward(std::vector<std::int32_t>(prompt.begin() + static_cast<std::ptrdiff_t>(b),
                                             prompt.begin() + static_cast<std::ptrdiff_t>(e)));
  }
  std::vector<std::int32_t> out;
  for (int i = 0; i < decode; ++i) {
    out.push_back(next);
    if (i + 1 < decode) next = forward({next});
  }
  return out;
}

}  // namespace kvtier::runner
