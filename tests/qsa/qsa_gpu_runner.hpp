#pragma once
// Test harness: one request's QSA layer on the GPU, forward by forward (prefill chunks or
// decode rows), with its inputs drawn by the CPU reference's random_input. Tests and the
// benchmark compare what it produces with validation/qsa.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "validation/qsa/qsa_reference.hpp"

namespace kvtier::qsa::testing {

// Deterministic bf16 values in about [-1, 1) + offset from an integer hash (SplitMix64 of i;
// fast for 10^8 values).
inline std::uint16_t hashed_bf16(std::uint64_t i, std::uint64_t seed, float offset = 0.0f) {
  std::uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) / static_cast<float>(1u << 24);  // [0, 1)
  return qsa_ref::bf16_bits(2.0f * u - 1.0f + offset);
}

inline bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Device (or mapped pinned host) array; poisoned with 0xff bytes on creation. `huge`: the host
// array is 2 MiB-aligned, advised to transparent huge pages and registered (as the residency
// backend's host bank is), instead of cudaHostAlloc.
template <class T>
class Buf {
 public:
  Buf() = default;
  explicit Buf(std::size_t n, bool host_mapped = false, bool huge = false)
      : n_(n), host_(host_mapped), huge_(host_mapped && huge) {
    if (n == 0) return;
    if (huge_) {
      const std::size_t align = std::size_t{2} << 20;
      const std::size_t bytes = (n * sizeof(T) + align - 1) / align * align;
      h_ = static_cast<T*>(std::aligned_alloc(align, bytes));
      if (h_ == nullptr) throw std::runtime_error("Buf: aligned_alloc failed");
      madvise(h_, bytes, MADV_HUGEPAGE);
      std::memset(static_cast<void*>(h_), 0, bytes);  // fault the pages in
      KVT_CUDA_CHECK(cudaHostRegister(h_, bytes, cudaHostRegisterMapped));
      KVT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&p_), h_, 0));
    } else if (host_) {
      KVT_CUDA_CHECK(
          cudaHostAlloc(reinterpret_cast<void**>(&h_), n * sizeof(T), cudaHostAllocMapped));
      KVT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&p_), h_, 0));
    } else {
      KVT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    }
    KVT_CUDA_CHECK(cudaMemset(p_, 0xff, n * sizeof(T)));
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept { *this = std::move(o); }
  Buf& operator=(Buf&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(h_, o.h_);
    std::swap(n_, o.n_);
    std::swap(host_, o.host_);
    std::swap(huge_, o.huge_);
    return *this;
  }
  ~Buf() {
    if (huge_ && h_) {
      cudaHostUnregister(h_);
      std::free(h_);
      return;
    }
    if (host_ && h_) cudaFreeHost(h_);
    if (!host_ && p_) cudaFree(p_);
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T>& v) {
    KVT_CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  void zero() { KVT_CUDA_CHECK(cudaMemset(p_, 0, n_ * sizeof(T))); }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    KVT_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  T* p_ = nullptr;
  T* h_ = nullptr;
  std::size_t n_ = 0;
  bool host_ = false;
  bool huge_ = false;
};

inline std::vector<std::uint16_t> to_bf16(const qsa_ref::Mat& m) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.size(); ++i)
    v[i] = qsa_ref::bf16_bits(static_cast<float>(m.data()[i]));
  return v;
}

struct LayerConfig {
  qsa_ref::Dims dims;  // q_heads 24, kv_heads 2, head_dim 256, index 4 x 128 (compiled)
  bool fp8 = false;
  int page_size = 16;
  bool host_banks = false;  // K/V banks in mapped pinned host memory (host placement)
  int splits = 8;
  int page_offset = 0;  // physical page id = (pages - 1 - logical) + offset (shuffled)
};

// One request (id 0) of n tokens.
class GpuLayer {
 public:
  GpuLayer(const qsa_ref::LayerInput& in, const LayerConfig& c) : in_(in), c_(c) {
    const auto& d = c.dims;
    n_ = static_cast<int>(in.n);
    k_ = d.block_topk;
    width_ = d.select_width();
    pages_ = (n_ + c.page_size - 1) / c.page_size;
    phys_pages_ = pages_ + c.page_offset + 1;  // + the dummy page, last
    blocks_max_ = std::max<std::int64_t>(1, n_ / d.ratio);
    rope_ = make_rope(d.rope_dims, d.rope_theta, d.yarn, d.yarn_factor, d.yarn_original_max);
    q_ = Buf<std::uint16_t>(in.q.size());
    q_.upload(to_bf16(in.q));
    k_in_ = Buf<std::uint16_t>(in.k.size());
    k_in_.upload(to_bf16(in.k));
    v_in_ = Buf<std::uint16_t>(in.v.size());
    v_in_.upload(to_bf16(in.v));
    iq_raw_ = Buf<std::uint16_t>(in.iq.size());
    iq_raw_.upload(to_bf16(in.iq));
    ik_raw_ = Buf<std::uint16_t>(in.ik.size());
    ik_raw_.upload(to_bf16(in.ik));
    iq_ = Buf<std::uint16_t>(in.iq.size());
    std::vector<float> w(d.index_dim * 2);
    for (int i = 0; i < d.index_dim; ++i) {
      w[i] = static_cast<float>(in.q_norm_w[i]);
      w[d.index_dim + i] = static_cast<float>(in.k_norm_w[i]);
    }
    norm_w_ = Buf<float>(w.size());
    norm_w_.upload(w);
    const std::int64_t code_elems =
        std::int64_t{phys_pages_} * c.page_size * d.kv_heads * d.head_dim;
    const std::int64_t code_bytes = code_elems * (c.fp8 ? 1 : 2);
    kb_ = Buf<std::uint8_t>(static_cast<std::size_t>(code_bytes), c.host_banks);
    vb_ = Buf<std::uint8_t>(static_cast<std::size_t>(code_bytes), c.host_banks);
    kb_.zero();
    vb_.zero();
    if (c.fp8) {
      const std::size_t ns = static_cast<std::size_t>(phys_pages_) * c.page_size * d.kv_heads;
      ks_ = Buf<float>(ns, c.host_banks);
      vs_ = Buf<float>(ns, c.host_banks);
      ks_.zero();
      vs_.zero();
    }
    std::vector<std::int32_t> table(pages_);
    for (int p = 0; p < pages_; ++p)
      table[p] = pages_ - 1 - p + c.page_offset;
    table_ = Buf<std::int32_t>(table.size());
    table_.upload(table);
    slab_ = Buf<std::uint16_t>(static_cast<std::size_t>(blocks_max_) * d.index_dim);
    ring_ = Buf<float>(4 * static_cast<std::size_t>(d.index_dim));
    logits_ = Buf<float>(static_cast<std::size_t>(n_) * blocks_max_);
    blocks_ = Buf<std::int32_t>(static_cast<std::size_t>(n_) * k_);
    tokens_ = Buf<std::int32_t>(static_cast<std::size_t>(n_) * width_);
    o_ = Buf<float>(static_cast<std::size_t>(n_) * d.q_heads * d.head_dim);
    lse_ = Buf<float>(static_cast<std::size_t>(n_) * d.q_heads);
    work_ = Buf<float>(static_cast<std::size_t>(attend_workspace_floats(n_, d.q_heads, c.splits)));
    std::vector<std::int32_t> zeros(n_, 0), pos(n_);
    std::iota(pos.begin(), pos.end(), 0);
    req_ = Buf<std::int32_t>(n_);
    req_.upload(zeros);
    pos_ = Buf<std::int32_t>(n_);
    pos_.upload(pos);
    fwd_ = Buf<std::int32_t>(3);
    topk_work_ =
        Buf<std::int32_t>(static_cast<std::size_t>(topk_workspace_bytes(n_, blocks_max_) / 4));
  }

  KvBanks banks() const {
    return {kb_.get(), vb_.get(),    ks_.get(),        vs_.get(),
            c_.fp8,    c_.page_size, c_.dims.kv_heads, c_.host_banks};
  }
  PageTable table() const { return {table_.get(), pages_, phys_pages_ - 1}; }

  // Sets the forward's per-request header (outside any graph capture).
  void prepare(int begin, int count) { fwd_.upload({0, count, begin}); }
  // Rows [begin, begin + count) as one forward; prepare(begin, count) must come first.
  void forward(int begin, int count, cudaStream_t s) {
    const auto& d = c_.dims;
    const Rows rows{req_.get() + begin, pos_.get() + begin, count};
    std::uint16_t* q = q_.get() + std::int64_t{begin} * d.q_heads * d.head_dim;
    std::uint16_t* k = k_in_.get() + std::int64_t{begin} * d.kv_heads * d.head_dim;
    const std::uint16_t* v = v_in_.get() + std::int64_t{begin} * d.kv_heads * d.head_dim;
    rope_inplace(q, d.q_heads, d.head_dim, rows, rope_, s);
    rope_inplace(k, d.kv_heads, d.head_dim, rows, rope_, s);
    index_queries(iq_raw_.get() + std::int64_t{begin} * d.index_heads * d.index_dim, norm_w_.get(),
                  d.index_heads, static_cast<float>(d.norm_eps), rows, rope_,
                  iq_.get() + std::int64_t{begin} * d.index_heads * d.index_dim, s);
    store_kv(k, v, rows, banks(), table(), KvBanks{}, PageTable{}, s);
    const CompressRequests fwd{fwd_.get(), fwd_.get() + 1, fwd_.get() + 2, 1};
    compress(ik_raw_.get() + std::int64_t{begin} * d.index_dim, rows, fwd,
             norm_w_.get() + d.index_dim, static_cast<float>(d.norm_eps), rope_, ring_.get(),
             slab_.get(), blocks_max_, s);
    select_and_attend(begin, count, s);
  }
  // The idempotent tail of a forward (reads the rotated q, the slab and the banks; writes the
  // logits, selections, tokens and outputs of the rows): index, top-k, expand, attend. `splits`:
  // the attend's (0: config().splits); the attend workspace, sized for all rows at
  // config().splits, must hold `count` rows at `splits`.
  void select_and_attend(int begin, int count, cudaStream_t s, int splits = 0) {
    const auto& d = c_.dims;
    if (splits <= 0) splits = c_.splits;
    if (attend_workspace_floats(count, d.q_heads, splits) > static_cast<std::int64_t>(work_.size()))
      throw std::invalid_argument("select_and_attend: splits beyond the attend workspace");
    const Rows rows{req_.get() + begin, pos_.get() + begin, count};
    const std::uint16_t* q = q_.get() + std::int64_t{begin} * d.q_heads * d.head_dim;
    // Logits workspace rows are the forward's rows (bounded by the chunk, not the context).
    index_scores(iq_.get() + std::int64_t{begin} * d.index_heads * d.index_dim, d.index_heads, rows,
                 slab_.get(), blocks_max_, logits_.get(), blocks_max_, (begin + count) / d.ratio,
                 s);
    topk(logits_.get(), blocks_max_, nullptr, rows, d.ratio, k_,
         blocks_.get() + std::int64_t{begin} * k_, topk_work_.get(), blocks_max_, s);
    expand(blocks_.get() + std::int64_t{begin} * k_, k_, rows, d.ratio,
           tokens_.get() + std::int64_t{begin} * width_, width_, s);
    attend(q, d.q_heads, rows, tokens_.get() + std::int64_t{begin} * width_, width_, banks(),
           table(), splits, work_.get(), o_.get() + std::int64_t{begin} * d.q_heads * d.head_dim,
           lse_.get() + std::int64_t{begin} * d.q_heads, s);
    KVT_CUDA_CHECK(cudaPeekAtLastError());
  }
  // Forwards cut at `cuts`, up to row `end` (all rows when negative).
  void run_chunks(const std::vector<int>& cuts, int end = -1) {
    int b = 0;
    std::vector<int> ends = cuts;
    ends.push_back(end < 0 ? n_ : end);
    for (int e : ends) {
      if (e <= b) continue;
      prepare(b, e - b);
      forward(b, e - b, nullptr);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      b = e;
    }
  }

  // Stored K / V read back and dequantised: [n][kv_heads * head_dim].
  qsa_ref::Mat stored(bool v) const {
    const auto& d = c_.dims;
    const std::vector<std::uint8_t> bytes = (v ? vb_ : kb_).download();
    std::vector<float> scales;
    if (c_.fp8) scales = (v ? vs_ : ks_).download();
    const std::vector<std::int32_t> t = table_.download();
    qsa_ref::Mat m(n_, d.kv_heads * d.head_dim);
    for (int p = 0; p < n_; ++p) {
      const std::int64_t token =
          std::int64_t{t[p / c_.page_size]} * c_.page_size + p % c_.page_size;
      for (int h = 0; h < d.kv_heads; ++h)
        for (int i = 0; i < d.head_dim; ++i) {
          const std::int64_t e = (token * d.kv_heads + h) * d.head_dim + i;
          double x;
          if (c_.fp8) {
            x = static_cast<double>(qsa_ref::fp8_e4m3_decode(bytes[e]) *
                                    scales[token * d.kv_heads + h]);
          } else {
            std::uint16_t b;
            std::memcpy(&b, &bytes[2 * e], 2);
            x = qsa_ref::bf16_value(b);
          }
          m(p, h * d.head_dim + i) = x;
        }
    }
    return m;
  }
  static qsa_ref::Mat bf16_mat(const std::vector<std::uint16_t>& v, Eigen::Index rows) {
    qsa_ref::Mat m(rows, static_cast<Eigen::Index>(v.size()) / rows);
    for (std::size_t i = 0; i < v.size(); ++i)
      m.data()[i] = qsa_ref::bf16_value(v[i]);
    return m;
  }

  int n() const { return n_; }
  int k() const { return k_; }
  int width() const { return width_; }
  const LayerConfig& config() const { return c_; }
  Buf<std::uint16_t> q_, k_in_, v_in_, iq_raw_, ik_raw_, iq_, slab_;
  Buf<std::uint8_t> kb_, vb_;
  Buf<float> ks_, vs_, norm_w_, ring_, logits_, o_, lse_, work_;
  Buf<std::int32_t> table_, blocks_, tokens_, req_, pos_, fwd_, topk_work_;

 private:
  qsa_ref::LayerInput in_;
  LayerConfig c_;
  Rope rope_;
  int n_, k_, width_, pages_, phys_pages_;
  std::int64_t blocks_max_;
};

}  // namespace kvtier::qsa::testing
