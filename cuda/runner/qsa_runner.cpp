#include "cuda/runner/qsa_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "cuda/kernels.hpp"
#include "cuda/runner/ops.hpp"
#include "cuda/runner/runner_impl.hpp"
#include "cuda/runner/tier_ops.hpp"
#include "cuda/weights/qsa_tensors.hpp"
#include "model/config_error.hpp"

namespace kvtier::runner {

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

template <class T>
DeviceArray<T> zeroed(std::size_t n) {
  DeviceArray<T> a(std::max<std::size_t>(n, 1));
  KVT_CUDA_CHECK(cudaMemset(a.get(), 0, a.bytes()));
  return a;
}

std::size_t free_device_bytes() {
  std::size_t free_b = 0, total = 0;
  KVT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

}  // namespace

QsaRunner::QsaRunner(const weights::SafetensorsFile& file, const Geometry& g, std::int64_t vocab,
                     const RunnerConfig& c, const cuda::ProgressFn& progress)
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
  if (c.splits < 0 || c.splits > 65535 || c.decode_splits < 0 || c.decode_splits > 65535)
    throw ConfigError("runner: attend splits must be 0 (the kernels' default) .. 65535");
  if (c.max_requests < 1 || c.max_requests > c.max_rows)
    throw ConfigError("runner: requests must be 1..max_rows (" + std::to_string(c.max_rows) + ")");
  if (c.max_context < 1 || c.max_context > g.max_context(c.yarn))
    throw ConfigError("runner: the context must be 1.." + std::to_string(g.max_context(c.yarn)) +
                      " tokens" + (c.yarn ? "" : " (or switch YaRN on)"));
  if (c.max_context > INT32_MAX) throw ConfigError("runner: the context must fit 32 bits");
  if (c.stand_in_width < 0) throw ConfigError("runner: the stand-in width must be >= 0");
  if (c.staging_window_tokens < g.page_size)
    throw ConfigError("runner: the staging window must hold at least one page (" +
                      std::to_string(g.page_size) + " tokens)");
  weights::check_qsa_weights(file, g, vocab);
  m.g = g;
  m.vocab = vocab;
  m.c = c;
  m.R = c.max_requests;
  m.L = g.qsa_layers();
  m.rope = qsa::make_rope(g.rope_dims, g.rope_theta, c.yarn, g.yarn_factor,
                          static_cast<double>(g.rope_max_positions));
  if (c.reads_yield) {
    int least = 0, greatest = 0;
    KVT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    KVT_CUDA_CHECK(cudaStreamCreateWithPriority(&m.s, cudaStreamNonBlocking, greatest));
    KVT_CUDA_CHECK(cudaStreamCreateWithPriority(&m.reads, cudaStreamNonBlocking, least));
    KVT_CUDA_CHECK(cudaEventCreateWithFlags(&m.ev_reads_fork, cudaEventDisableTiming));
    KVT_CUDA_CHECK(cudaEventCreateWithFlags(&m.ev_reads_join, cudaEventDisableTiming));
  } else {
    KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&m.s, cudaStreamNonBlocking));
  }
  m.gemm.set_stream(m.s);
  m.qd = g.q_heads * g.head_dim;
  m.kvd = g.kv_heads * g.head_dim;
  m.iqd = g.index_q_heads * g.index_head_dim;
  m.ikd = g.index_head_dim;
  m.k = g.block_topk();
  m.width = g.select_width_tokens();
  m.stride = g.pages_for_context(c.max_context);
  m.slab_stride = std::max<std::int64_t>(1, c.max_context / g.compress_ratio);

  // Pages: the page space, pool and window (the largest allocations first).
  PagedKvConfig kc;
  kc.placement = c.placement;
  kc.dtype = c.dtype;
  const std::int64_t pages = c.host_pages > 0 ? c.host_pages : m.stride * m.R;
  if (pages > INT32_MAX - 1) throw ConfigError("runner: more than 2^31 - 2 pages");
  kc.num_pages = static_cast<PageId>(pages);
  if (c.placement == Placement::mirror) {
    if (c.pool_pages < 1) throw ConfigError("runner: placement mirror needs --pool-pages N");
    if (c.pool_pages > INT32_MAX - 1) throw ConfigError("runner: pool pages beyond 2^31 - 2");
    kc.pool_slots = static_cast<SlotId>(c.pool_pages);
    kc.max_query = static_cast<int>(c.pool_pages);  // rows x width + writes <= slots
    kc.step_blocks = c.step_blocks;
  }
  kc.window_pages = std::min(c.staging_window_tokens / g.page_size, m.stride);
  m.kv.emplace(g, kc, progress);
  m.fe.emplace(g, kc.num_pages, c.staging_window_tokens);
  m.pos.assign(static_cast<std::size_t>(m.R), 0);
  m.prompt.assign(static_cast<std::size_t>(m.R), 0);
  m.opened.assign(static_cast<std::size_t>(m.R), false);
  m.begun.assign(static_cast<std::size_t>(m.R), false);
  const std::size_t after_kv = free_device_bytes();

  m.embed = upload_bf16(file, weights::kEmbedName);
  m.final_norm = upload_bf16(file, weights::kFinalNormName);
  m.lm_head = upload_bf16(file, weights::kLmHeadName);
  const auto R = static_cast<std::size_t>(m.R);
  for (int id : g.qsa_layer_ids) {
    const weights::LayerNames n = weights::layer_names(id);
    LayerWeights l;
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
    l.slab = zeroed<std::uint16_t>(R * static_cast<std::size_t>(m.slab_stride) * m.ikd);
    l.ring = zeroed<float>(R * 4 * static_cast<std::size_t>(m.ikd));
    m.layers.push_back(std::move(l));
  }
  const int H = g.hidden_size;
  if (c.stand_in_width > 0) {
    // Synthetic, deterministic, shared by every non-QSA layer: real GPU work of the right
    // shape between the QSA layers, not a model.
    const int W = c.stand_in_width;
    m.mlp_up = DeviceArray<std::uint16_t>(static_cast<std::size_t>(W) * H);
    m.mlp_gate = DeviceArray<std::uint16_t>(static_cast<std::size_t>(W) * H);
    m.mlp_down = DeviceArray<std::uint16_t>(static_cast<std::size_t>(W) * H);
    m.mlp_norm = zeroed<std::uint16_t>(static_cast<std::size_t>(H));
    hash_bf16(m.mlp_up.get(), W, H, 0, 0x5713ull, std::sqrt(3.0f / static_cast<float>(H)), m.s);
    hash_bf16(m.mlp_gate.get(), W, H, 0, 0x5714ull, std::sqrt(3.0f / static_cast<float>(H)), m.s);
    hash_bf16(m.mlp_down.get(), H, W, 0, 0x5715ull, std::sqrt(3.0f / static_cast<float>(W)), m.s);
    m.mlp_a = DeviceArray<std::uint16_t>(static_cast<std::size_t>(c.max_rows) * W);
    m.mlp_b = DeviceArray<std::uint16_t>(static_cast<std::size_t>(c.max_rows) * W);
  }

  const auto MR = static_cast<std::size_t>(c.max_rows);
  const auto T = R * static_cast<std::size_t>(m.stride);
  m.tokens = DeviceArray<std::int32_t>(MR);
  m.req = DeviceArray<std::int32_t>(MR);
  m.rpos = DeviceArray<std::int32_t>(MR);
  m.fwd = DeviceArray<std::int32_t>(3 * R);
  m.tables = DeviceArray<std::int32_t>(T);
  // mirror: one pool table per QSA layer (decode locates all of them before the first layer)
  m.pool_tbl = DeviceArray<std::int32_t>(
      c.placement == Placement::mirror ? T * static_cast<std::size_t>(m.L) : 1);
  m.wtable = DeviceArray<std::int32_t>(T);
  m.blocks = DeviceArray<std::int32_t>(MR * static_cast<std::size_t>(m.k));
  m.sel = DeviceArray<std::int32_t>(MR * static_cast<std::size_t>(m.width));
  m.sel_w = DeviceArray<std::int32_t>(MR * static_cast<std::size_t>(m.width));
  m.group_of_row = DeviceArray<std::int32_t>(MR);
  m.lists = DeviceArray<std::int32_t>(R * static_cast<std::size_t>(m.slab_stride));
  m.counts = DeviceArray<std::int32_t>(R);
  m.bitmap =
      DeviceArray<std::uint32_t>(static_cast<std::size_t>(union_bitmap_words(m.R, m.slab_stride)));
  m.last_idx = DeviceArray<std::int32_t>(R);
  m.argmax_out = DeviceArray<std::int32_t>(R);
  m.trow_tables = DeviceArray<PageId>(T);
  m.trow_len = DeviceArray<std::int64_t>(R);
  m.trow_pos = DeviceArray<std::int64_t>(R);
  m.trow_bypass = DeviceArray<std::uint8_t>(R);
  m.stamps = DeviceArray<std::int64_t>(static_cast<std::size_t>(m.L));
  m.prefetch_stamps = DeviceArray<std::int64_t>(static_cast<std::size_t>(m.L));
  KVT_CUDA_CHECK(cudaEventCreate(&m.ev_a));
  KVT_CUDA_CHECK(cudaEventCreate(&m.ev_b));
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&m.side, cudaStreamNonBlocking));
  KVT_CUDA_CHECK(cudaEventCreateWithFlags(&m.ev_fork, cudaEventDisableTiming));
  for (cudaEvent_t& e : m.ev_join)
    KVT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  KVT_CUDA_CHECK(cudaEventCreateWithFlags(&m.ev_prefetched, cudaEventDisableTiming));
  m.query = DeviceArray<PageId>(static_cast<std::size_t>(std::max<std::int64_t>(1, c.pool_pages)));
  m.counters = DeviceArray<DeviceCounters>(1);
  m.hidden = DeviceArray<float>(MR * H);
  m.o = DeviceArray<float>(MR * static_cast<std::size_t>(m.qd));
  m.lse = DeviceArray<float>(MR * static_cast<std::size_t>(g.q_heads));
  if (c.placement != Placement::device) {
    m.o_w = DeviceArray<float>(MR * static_cast<std::size_t>(m.qd));
    m.lse_w = DeviceArray<float>(MR * static_cast<std::size_t>(g.q_heads));
  }
  // The attend workspace for the largest split count any forward's row count uses.
  std::int64_t work_floats = 1;
  for (int rows = 1; rows <= c.max_rows; ++rows) {
    const int sp = c.splits > 0 ? c.splits : qsa::attend_default_splits(rows, g.kv_heads, m.width);
    work_floats = std::max(work_floats, qsa::attend_workspace_floats(rows, g.q_heads, sp));
  }
  if (c.decode_splits > 0)
    work_floats = std::max(
        work_floats, qsa::attend_workspace_floats(c.max_requests, g.q_heads, c.decode_splits));
  m.work = DeviceArray<float>(static_cast<std::size_t>(work_floats));
  m.logits_idx = DeviceArray<float>(MR * static_cast<std::size_t>(m.slab_stride));
  m.logits_vocab = DeviceArray<float>(R * static_cast<std::size_t>(vocab));
  m.last_hidden = DeviceArray<float>(R * H);
  m.xn = DeviceArray<std::uint16_t>(MR * H);
  m.q = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.qd));
  m.kk = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.kvd));
  m.v = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.kvd));
  m.iq_raw = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.iqd));
  m.iq = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.iqd));
  m.ik = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.ikd));
  m.gate = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.qd));
  m.attn_g = DeviceArray<std::uint16_t>(MR * static_cast<std::size_t>(m.qd));
  m.topk_work = DeviceArray<std::int32_t>(
      static_cast<std::size_t>(qsa::topk_workspace_bytes(c.max_rows, m.slab_stride) / 4 + 1));
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  m.other_device_bytes =
      static_cast<std::int64_t>(after_kv) - static_cast<std::int64_t>(free_device_bytes());
  captured_.resize(g.qsa_layer_ids.size());
  probe_v_.resize(g.qsa_layer_ids.size());
  last_attn_.resize(g.qsa_layer_ids.size());
}

QsaRunner::~QsaRunner() {
  if (!impl_) return;
  cudaStream_t s = impl_->s;
  if (s) cudaStreamSynchronize(s);
  for (auto& [key, exec] : impl_->graphs)
    cudaGraphExecDestroy(exec);
  if (impl_->ev_a) cudaEventDestroy(impl_->ev_a);
  for (cudaEvent_t e : impl_->phase_events)
    cudaEventDestroy(e);
  if (impl_->ev_b) cudaEventDestroy(impl_->ev_b);
  if (impl_->ev_fork) cudaEventDestroy(impl_->ev_fork);
  if (impl_->ev_prefetched) cudaEventDestroy(impl_->ev_prefetched);
  for (cudaEvent_t e : impl_->ev_join)
    if (e) cudaEventDestroy(e);
  if (impl_->side) {
    cudaStreamSynchronize(impl_->side);
    cudaStreamDestroy(impl_->side);
  }
  if (impl_->ev_reads_fork) cudaEventDestroy(impl_->ev_reads_fork);
  if (impl_->ev_reads_join) cudaEventDestroy(impl_->ev_reads_join);
  if (impl_->reads) {
    cudaStreamSynchronize(impl_->reads);
    cudaStreamDestroy(impl_->reads);
  }
  impl_.reset();  // buffers and the cuBLAS handle go before the stream they were used on
  if (s) cudaStreamDestroy(s);
}

std::string QsaRunner::mirror_reads() const {
  if (impl_->c.placement != Placement::mirror) return "";
  return cuda::mirror_reads_rule(impl_->in_place_decode());
}

std::int64_t QsaRunner::kv_device_bytes() const {
  return impl_->kv->device_bytes();
}
std::int64_t QsaRunner::kv_host_bytes() const {
  return impl_->kv->host_bytes();
}
double QsaRunner::host_bank_s() const {
  return impl_->kv->host_bank_s();
}
std::int64_t QsaRunner::other_device_bytes() const {
  return impl_->other_device_bytes;
}

std::int64_t QsaRunner::position(int request) const {
  if (request < 0 || request >= impl_->R) throw ConfigError("runner: no such request");
  return impl_->pos[static_cast<std::size_t>(request)];
}

void QsaRunner::set_probe(std::int64_t position) {
  probe_pos_ = position;
}

void QsaRunner::open(int request, std::int64_t prompt_tokens) {
  Impl& m = *impl_;
  if (request < 0 || request >= m.R)
    throw ConfigError("runner: request " + std::to_string(request) + " outside 0.." +
                      std::to_string(m.R - 1));
  const auto i = static_cast<std::size_t>(request);
  if (m.opened[i]) throw ConfigError("runner: request " + std::to_string(request) + " is open");
  if (prompt_tokens < 0 || prompt_tokens > m.c.max_context)
    throw ConfigError("runner: a prompt of " + std::to_string(prompt_tokens) +
                      " tokens does not fit the context of " + std::to_string(m.c.max_context));
  m.fe->begin(traces::RequestBegin{static_cast<RequestId>(request), prompt_tokens, 0, 0});
  m.opened[i] = true;
  m.begun[i] = false;
  m.prompt[i] = prompt_tokens;
  m.pos[i] = 0;
}

void QsaRunner::set_recorder(traces::TraceWriter* w) {
  impl_->recorder = w;
}

traces::TraceHeader QsaRunner::trace_header(const std::string& producer) const {
  traces::TraceHeader h;
  h.geometry = impl_->g;
  h.producer = producer;
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  h.created = buf;
  return h;
}

}  // namespace kvtier::runner
