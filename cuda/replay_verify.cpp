#include "cuda/replay_verify.hpp"

#include <algorithm>
#include <cstring>

#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"
#include "frontend/decision_log.hpp"
#include "model/ensure.hpp"
#include "model/mirror_policy.hpp"
#include "model/step_stamp.hpp"

namespace kvtier::cuda {

unsigned long long token_checksum(const PageLayout& layout, int layer, std::int64_t content,
                                  std::int64_t pos) {
  // launch_read folds words of W bytes (W from the layout; 16-byte words as two 8-byte
  // terms), indexed over the layer's banks K, V[, K scale, V scale] concatenated.
  std::int64_t g = layout.token_bytes(BankKind::k);
  if (layout.fp8()) g |= layout.token_bytes(BankKind::k_scale);
  int w = 1;
  for (int c : {16, 8, 4, 2}) {
    if (g % c == 0) {
      w = c;
      break;
    }
  }
  const int term_bytes = w >= 8 ? 8 : w;
  std::vector<unsigned char> bytes;
  for (int k = 0; k < layout.banks_per_layer; ++k) {
    const std::int64_t words = layout.token_bytes(PageLayout::kind_of(k)) / 4;
    for (std::int64_t i = 0; i < words; ++i) {
      const std::uint32_t v = content < 0 ? 0u : token_word(content, layer, k, i);
      for (int b = 0; b < 4; ++b)
        bytes.push_back(static_cast<unsigned char>(v >> (8 * b)));
    }
  }
  unsigned long long sum = 0;
  const std::size_t terms = bytes.size() / static_cast<std::size_t>(term_bytes);
  for (std::size_t j = 0; j < terms; ++j) {
    unsigned long long word = 0;
    std::memcpy(&word, bytes.data() + j * static_cast<std::size_t>(term_bytes),
                static_cast<std::size_t>(term_bytes));  // little-endian, zero-extended
    sum += checksum_term(word, pos, static_cast<std::int64_t>(j));
  }
  return sum;
}

std::string describe_copies(const std::vector<CopyOp>& a, const std::vector<CopyOp>& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i])
    ++i;
  auto op = [](const std::vector<CopyOp>& v, std::size_t k) {
    if (k >= v.size()) return std::string("(none)");
    return "page " + std::to_string(v[k].page) + " -> slot " + std::to_string(v[k].slot) +
           " (evicts " + std::to_string(v[k].evicted) + ")";
  };
  return "copy " + std::to_string(i) + ": gpu " + op(a, i) + ", core " + op(b, i) + " (" +
         std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " copies)";
}

MirrorVerifier::MirrorVerifier(int layers, PageId pages, SlotId slots) {
  pools_.reserve(static_cast<std::size_t>(layers));
  for (int l = 0; l < layers; ++l)
    pools_.emplace_back(pages, slots);
}

void MirrorVerifier::release(std::span<const PageId> freed) {
  for (auto& p : pools_)
    for (PageId page : freed)
      release_page(p.state.view(), page, p.victims);
}

void MirrorVerifier::check_layer(frontend::FrontEnd& fe, const traces::Forward& f, int layer,
                                 int width, std::int64_t forward, std::int64_t step,
                                 const PageId* d_query, int qlen, const MirrorEngine& engine,
                                 ReplayResult& res, std::ostream* decisions) {
  const std::string where =
      "forward " + std::to_string(forward) + " layer " + std::to_string(layer);
  const frontend::LayerQuery cq = fe.build(f, layer, width);
  gpu_query_.resize(static_cast<std::size_t>(qlen));
  KVT_CUDA_CHECK(cudaMemcpy(gpu_query_.data(), d_query, gpu_query_.size() * sizeof(PageId),
                            cudaMemcpyDeviceToHost));
  if (!std::equal(gpu_query_.begin(), gpu_query_.end(), cq.pages.begin(), cq.pages.end())) {
    if (res.query_mismatches++ == 0) res.first_mismatch = where + ": compacted query differs";
  }
  LayerState& pool = pools_[static_cast<std::size_t>(layer)];
  const auto n = cq.pages.size();
  cpu_miss_.resize(n + 1);
  cpu_victims_.resize(n + 1);
  cpu_copies_.resize(n + 1);
  const EnsureResult cr = ensure_pages(
      pool.state.view(), cq.pages.data(), static_cast<int>(n), step, pool.victims,
      EnsureScratch{cpu_miss_.data(), cpu_victims_.data(), nullptr}, cpu_copies_.data());
  cpu_copies_.resize(cr.status == EnsureStatus::ok ? static_cast<std::size_t>(cr.misses) : 0);
  compare_copies(engine, where, res);
  frontend::log_installs(decisions, forward, layer, step, frontend::InstallKind::demand,
                         gpu_copies_);
  last_query_.assign(cq.pages.begin(), cq.pages.end());
}

void MirrorVerifier::check_prefetch(int layer, std::int64_t forward, std::int64_t layer_step_index,
                                    const MirrorEngine& engine, ReplayResult& res,
                                    std::ostream* decisions) {
  LayerState& next = pools_[static_cast<std::size_t>(layer) + 1];
  const auto n = last_query_.size();
  cpu_miss_.resize(n + 1);
  cpu_victims_.resize(n + 1);
  cpu_copies_.resize(n + 1);
  const EnsureResult cr = PrefetchNextLayer::prefetch(
      next.state.view(), last_query_.data(), static_cast<int>(n), layer_step_index, next.victims,
      EnsureScratch{cpu_miss_.data(), cpu_victims_.data(), nullptr}, cpu_copies_.data());
  cpu_copies_.resize(cr.status == EnsureStatus::ok ? static_cast<std::size_t>(cr.misses) : 0);
  compare_copies(
      engine,
      "forward " + std::to_string(forward) + " prefetch into layer " + std::to_string(layer + 1),
      res);
  frontend::log_installs(decisions, forward, layer + 1, prefetch_stamp(layer_step_index),
                         frontend::InstallKind::prefetch, gpu_copies_);
}

void MirrorVerifier::compare_copies(const MirrorEngine& engine, const std::string& where,
                                    ReplayResult& res) {
  int count = 0;
  KVT_CUDA_CHECK(cudaMemcpy(&count, engine.copy_count(), sizeof count, cudaMemcpyDeviceToHost));
  gpu_copies_.resize(static_cast<std::size_t>(count));
  if (count > 0)
    KVT_CUDA_CHECK(cudaMemcpy(gpu_copies_.data(), engine.copies(),
                              gpu_copies_.size() * sizeof(CopyOp), cudaMemcpyDeviceToHost));
  if (gpu_copies_ != cpu_copies_) {
    if (res.decision_mismatches++ == 0 && res.first_mismatch.empty())
      res.first_mismatch = where + ": " + describe_copies(gpu_copies_, cpu_copies_);
  }
}

SlotContents::SlotContents(PageId pages, int page_size)
    : page_size_(static_cast<std::size_t>(page_size)),
      content_(static_cast<std::size_t>(pages) * page_size_, -1) {}

void SlotContents::record_stores(const StagedForward& sf) {
  for (std::size_t i = 0; i < sf.store_pos.size(); ++i)
    content_[static_cast<std::size_t>(sf.store_pages[i]) * page_size_ +
             static_cast<std::size_t>(sf.store_tokens[i])] = sf.store_pos[i];
}

unsigned long long SlotContents::expected(const PageLayout& layout, int layer,
                                          const StagedForward& sf) const {
  unsigned long long sum = 0;
  const auto ps = static_cast<std::int64_t>(page_size_);
  for (int r = 0; r < sf.rows; ++r) {
    const PageId* table = sf.tables.data() + std::int64_t{r} * sf.stride;
    for (std::int64_t p : sf.read_positions[static_cast<std::size_t>(layer) * sf.rows + r]) {
      const std::size_t at =
          static_cast<std::size_t>(table[p / ps]) * page_size_ + static_cast<std::size_t>(p % ps);
      sum += token_checksum(layout, layer, content_[at], p);
    }
  }
  return sum;
}

}  // namespace kvtier::cuda
