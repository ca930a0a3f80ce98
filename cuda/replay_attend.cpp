#include "cuda/replay_attend.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "cuda/device_upload.hpp"
#include "cuda/kv_banks.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "model/config_error.hpp"
#include "model/ensure.hpp"

namespace kvtier::cuda {

namespace {

// The K/V of a token and the query of a row are finite bf16 values uniform in [-1, 1], picked
// from fixed pattern tables on the device by a hash of (position, layer): a gather (the
// multi-bank copy kernel over a one-token "page" layout) stands in for the model's
// projections. Pattern rows are drawn once by SplitMix64 on the CPU.
constexpr int kKvPatternTokens = 8192;
constexpr int kQueryPatternRows = 512;

std::uint64_t splitmix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Pattern row of (position, layer) for K/V (salt 0) or the query (salt 1).
PageId pattern_row(std::int64_t pos, int layer, int salt, int rows) {
  const std::uint64_t h =
      splitmix(static_cast<std::uint64_t>(pos) * 0xD1B54A32D192ED03ull ^
               (static_cast<std::uint64_t>(layer) << 8 | static_cast<std::uint64_t>(salt)));
  return static_cast<PageId>(h % static_cast<std::uint64_t>(rows));
}

std::vector<std::uint16_t> bf16_pattern(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  std::uint64_t z = seed;
  for (auto& x : v) {
    z = splitmix(z);
    // uniform in [-1, 1], rounded to bf16 (round to nearest even on the fp32 bits)
    const float f = static_cast<float>(static_cast<double>(z >> 11) * 0x1p-53 * 2.0 - 1.0);
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    b += 0x7FFFu + ((b >> 16) & 1u);
    x = static_cast<std::uint16_t>(b >> 16);
  }
  return v;
}

std::byte* bytes(void* p) {
  return reinterpret_cast<std::byte*>(p);
}

}  // namespace

void check_attend_geometry(const Geometry& g) {
  const bool ok = g.head_dim == qsa::kHeadDim && g.kv_heads >= 1 && g.kv_heads <= 16 &&
                  g.q_heads % g.kv_heads == 0 && g.q_heads / g.kv_heads == 12;
  if (!ok)
    throw ConfigError("run --read attend: the QSA attention kernel is compiled for head_dim " +
                      std::to_string(qsa::kHeadDim) +
                      ", GQA group 12 (q_heads / kv_heads) and at most 16 KV heads; this "
                      "trace's geometry has head_dim " +
                      std::to_string(g.head_dim) + ", q_heads " + std::to_string(g.q_heads) +
                      ", kv_heads " + std::to_string(g.kv_heads) + " (use --read checksum)");
}

AttendReplay::AttendReplay(const Geometry& g, const PageLayout& layout, cudaStream_t s)
    : g_(g),
      layout_(layout),
      layers_(g.qsa_layers()),
      q_row_(std::int64_t{g.q_heads} * qsa::kHeadDim),
      kv_row_(std::int64_t{g.kv_heads} * qsa::kHeadDim),
      // One-token "pages": K/V rows [kv_heads][256]; a query row as two halves (K and V banks
      // of a layout of q_heads / 2 heads, written to slots 2r of q and q + half a row).
      kv_gather_(PageLayout::make(1, 1, g.kv_heads, g.head_dim, false)),
      q_gather_(PageLayout::make(1, 1, g.q_heads / 2, g.head_dim, false)),
      // The digest reads every output row [q_heads][256] fp32 as one "token" of a layout of
      // 2 * q_heads bf16-sized heads (both banks point at the outputs: each row is read twice).
      digest_layout_(PageLayout::make(1, 1, 2 * g.q_heads, g.head_dim, false)),
      d_gen_ptrs_(8),
      d_ints_(4),
      d_digest_banks_(2),
      d_checksum_(1) {
  const auto kv_elems = static_cast<std::size_t>(kKvPatternTokens * kv_row_);
  const auto q_elems = static_cast<std::size_t>(kQueryPatternRows * q_row_ / 2);
  const std::vector<std::uint16_t> pk = bf16_pattern(kv_elems, 1), pv = bf16_pattern(kv_elems, 2),
                                   pq0 = bf16_pattern(q_elems, 3), pq1 = bf16_pattern(q_elems, 4);
  upload(d_pat_k_, pk, s);
  upload(d_pat_v_, pv, s);
  upload(d_pat_q0_, pq0, s);
  upload(d_pat_q1_, pq1, s);
  KVT_CUDA_CHECK(cudaMemsetAsync(d_checksum_.get(), 0, sizeof(unsigned long long), s));
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));  // the pattern vectors die here
}

void AttendReplay::stage(const StagedForward& sf, cudaStream_t s) {
  const int L = layers_;
  rows_ = sf.rows;
  n_store_ = sf.n_store();
  max_tokens_ = sf.max_tokens;
  stride_ = sf.stride;
  tokens32_.assign(static_cast<std::size_t>(L) * rows_ * max_tokens_, -1);
  for (std::size_t k = 0; k < sf.read_positions.size(); ++k)
    std::transform(sf.read_positions[k].begin(), sf.read_positions[k].end(),
                   tokens32_.begin() + static_cast<std::int64_t>(k) * max_tokens_,
                   [](std::int64_t p) { return static_cast<std::int32_t>(p); });
  store_pos32_.assign(sf.store_pos.begin(), sf.store_pos.end());
  rowpos32_.assign(sf.row_last_pos.begin(), sf.row_last_pos.end());
  row_req_.resize(static_cast<std::size_t>(rows_));
  for (int r = 0; r < rows_; ++r)
    row_req_[r] = r;
  gen_kv_.resize(static_cast<std::size_t>(L) * n_store_);
  gen_q_.resize(static_cast<std::size_t>(L) * rows_);
  for (int l = 0; l < L; ++l) {
    for (int i = 0; i < n_store_; ++i)
      gen_kv_[static_cast<std::size_t>(l) * n_store_ + i] = {
          pattern_row(sf.store_pos[i], l, 0, kKvPatternTokens), l * n_store_ + i, kNoPage};
    for (int r = 0; r < rows_; ++r)
      gen_q_[static_cast<std::size_t>(l) * rows_ + r] = {
          pattern_row(sf.row_last_pos[r], l, 1, kQueryPatternRows), 2 * (l * rows_ + r), kNoPage};
  }
  const int n_out = L * rows_;
  digest_pos_.resize(static_cast<std::size_t>(n_out));
  digest_table_.resize(static_cast<std::size_t>(n_out));
  for (int i = 0; i < n_out; ++i) {
    digest_pos_[i] = i;
    digest_table_[i] = i;
  }
  upload(d_store_req_, sf.store_req, s);
  upload(d_store_pos32_, store_pos32_, s);
  upload(d_row_req_, row_req_, s);
  upload(d_rowpos32_, rowpos32_, s);
  upload(d_tokens32_, tokens32_, s);
  upload(d_gen_kv_, gen_kv_, s);
  upload(d_gen_q_, gen_q_, s);
  upload(d_digest_pos_, digest_pos_, s);
  upload(d_digest_table_, digest_table_, s);
  upload(d_digest_len_, std::vector<std::int64_t>{n_out}, s);
  fit(d_slot_tables_, static_cast<std::size_t>(L) * rows_ * stride_);
  fit(d_stage_k_, static_cast<std::size_t>(L * n_store_ * kv_row_));
  fit(d_stage_v_, static_cast<std::size_t>(L * n_store_ * kv_row_));
  fit(d_q_, static_cast<std::size_t>(L * rows_ * q_row_));
  fit(d_o_, static_cast<std::size_t>(n_out * q_row_));
  splits_ = qsa::attend_default_splits(rows_, g_.kv_heads, max_tokens_);
  fit(d_work_, static_cast<std::size_t>(qsa::attend_workspace_floats(rows_, g_.q_heads, splits_)));
  const std::vector<std::byte*> ptrs{bytes(d_pat_k_.get()),   bytes(d_pat_v_.get()),
                                     bytes(d_stage_k_.get()), bytes(d_stage_v_.get()),
                                     bytes(d_pat_q0_.get()),  bytes(d_pat_q1_.get()),
                                     bytes(d_q_.get()),       bytes(d_q_.get() + q_row_ / 2)};
  upload(d_gen_ptrs_, ptrs, s);
  const std::vector<std::byte*> dig{bytes(d_o_.get()), bytes(d_o_.get())};
  upload(d_digest_banks_, dig, s);
  upload(d_ints_, std::vector<int>{L * n_store_, L * rows_, 0, 0}, s);
}

void AttendReplay::generate(cudaStream_t s) {
  CopyParams gp{
      d_gen_kv_.get(), d_ints_.get(), d_gen_ptrs_.get(), d_gen_ptrs_.get() + 2, kv_gather_, 0, 1};
  launch_copy(gp, s);
  CopyParams gq{d_gen_q_.get(),
                d_ints_.get() + 1,
                d_gen_ptrs_.get() + 4,
                d_gen_ptrs_.get() + 6,
                q_gather_,
                0,
                1};
  launch_copy(gq, s);
}

TranslateTarget AttendReplay::pool_table_target(const PageId* d_tables, int layer) {
  // The scratch counter counts table entries that are not resident, most of which no row reads.
  return {d_tables, pool_tables(layer), rows_ * stride_, kNoSlot, d_ints_.get() + 2};
}

SlotId* AttendReplay::pool_tables(int layer) const {
  return d_slot_tables_.get() + std::int64_t{layer} * rows_ * stride_;
}

qsa::KvBanks AttendReplay::layer_banks(int layer, const AttendPlacement& at) const {
  return at.placement == Placement::host ? layer_kv_banks(layout_, layer, at.host_banks, true)
                                         : layer_kv_banks(layout_, layer, at.pool_banks, false);
}

qsa::PageTable AttendReplay::read_table(int layer, const AttendPlacement& at,
                                        const PageId* d_tables) const {
  if (at.placement == Placement::mirror) {
    // the rows' tables as the residency step translated them, or as located before the ensure
    // (pool_table_target); located entries <= -2 read the host bank in place
    qsa::PageTable t{pool_tables(layer), stride_, dummy_slot(at.slots)};
    if (at.in_place || at.bypass_rows)
      t.in_place = layer_kv_banks(layout_, layer, at.host_banks, true);
    // rows that bypass the pool read all they select in place: those reads are the forward's
    t.mostly_in_place = at.bypass_rows;
    return t;
  }
  return {d_tables, stride_,
          at.placement == Placement::device ? at.num_pages : dummy_page(at.num_pages)};
}

void AttendReplay::store(int layer, const AttendPlacement& at, const PageId* d_tables,
                         cudaStream_t s) {
  const qsa::PageTable logical_table{d_tables, stride_, 0};
  const qsa::Rows store_rows{d_store_req_.get(), d_store_pos32_.get(), n_store_};
  const qsa::KvBanks kv = layer_banks(layer, at);
  const qsa::PageTable table = read_table(layer, at, d_tables);
  // mirror: the pool's copy where the page is resident (entries < 0 are not written) and the
  // host bank's always; device: the pool (and the host bank with write-through); host: the bank
  const bool second =
      at.placement == Placement::mirror || (at.placement == Placement::device && at.write_through);
  const qsa::KvBanks host_kv =
      second ? layer_kv_banks(layout_, layer, at.host_banks, true) : qsa::KvBanks{};
  const std::int64_t at_layer = std::int64_t{layer} * n_store_ * kv_row_;
  qsa::store_kv(d_stage_k_.get() + at_layer, d_stage_v_.get() + at_layer, store_rows, kv, table,
                host_kv, second ? logical_table : qsa::PageTable{}, s);
}

void AttendReplay::attend(int layer, const AttendPlacement& at, const PageId* d_tables,
                          cudaStream_t s) {
  const qsa::Rows att_rows{d_row_req_.get(), d_rowpos32_.get(), rows_};
  const std::int32_t* tokens = d_tokens32_.get() + std::int64_t{layer} * rows_ * max_tokens_;
  float* o = d_o_.get() + std::int64_t{layer} * rows_ * q_row_;
  qsa::attend(d_q_.get() + std::int64_t{layer} * rows_ * q_row_, g_.q_heads, att_rows, tokens,
              max_tokens_, layer_banks(layer, at), read_table(layer, at, d_tables), splits_,
              d_work_.get(), o, nullptr, s);
}

void AttendReplay::digest(cudaStream_t s) {
  ReadParams dp{};
  dp.positions = d_digest_pos_.get();
  dp.tables = d_digest_table_.get();
  dp.table_len = d_digest_len_.get();
  dp.banks = d_digest_banks_.get();
  dp.slot_of_page = nullptr;
  dp.missing = d_ints_.get() + 3;
  dp.checksum = d_checksum_.get();
  dp.layout = digest_layout_;
  dp.layer = 0;
  dp.rows = 1;
  dp.max_tokens = layers_ * rows_;
  dp.table_stride = 0;
  dp.num_pages = layers_ * rows_;
  dp.dummy = 0;
  launch_read(dp, s);
}

unsigned long long AttendReplay::checksum() const {
  unsigned long long c = 0;
  KVT_CUDA_CHECK(cudaMemcpy(&c, d_checksum_.get(), sizeof c, cudaMemcpyDeviceToHost));
  return c;
}

}  // namespace kvtier::cuda
