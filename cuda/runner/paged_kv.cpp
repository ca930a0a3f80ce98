#include "cuda/runner/paged_kv.hpp"

#include "cuda/kv_banks.hpp"
#include "cuda/runner/tier_ops.hpp"
#include "model/config_error.hpp"

namespace kvtier::runner {

PagedKv::PagedKv(const Geometry& g, const PagedKvConfig& c, const cuda::ProgressFn& progress)
    : c_(c),
      layout_(PageLayout::make(g.qsa_layers(), g.page_size, g.kv_heads, g.head_dim,
                               c.dtype == KvDtype::fp8)) {
  if (c.num_pages < 1) throw ConfigError("runner: the page space needs at least one page");
  const bool staged = c.placement != Placement::device;
  if (staged && c.window_pages < 1)
    throw ConfigError("runner: the staging window needs at least one page");
  const int banks = layout_.banks();
  logical_.resize(static_cast<std::size_t>(banks));
  switch (c.placement) {
    case Placement::device:
      device_ = std::make_unique<cuda::DevicePool>(layout_, static_cast<SlotId>(c.num_pages));
      for (int b = 0; b < banks; ++b)
        logical_[static_cast<std::size_t>(b)] = device_->bank(b);
      break;
    case Placement::host:
      host_ = std::make_unique<cuda::HostBank>(layout_, c.num_pages, progress);
      for (int b = 0; b < banks; ++b)
        logical_[static_cast<std::size_t>(b)] = host_->device(b);
      break;
    case Placement::mirror: {
      if (c.pool_slots < 1)
        throw ConfigError("runner: placement mirror needs a pool (--pool-pages)");
      cuda::MirrorConfig mc{layout_,      ResidencyUnit::layer_page, c.num_pages,
                            c.pool_slots, std::max(1, c.max_query),  cuda::EnsureForm::block};
      mc.step_blocks = c.step_blocks;
      mirror_ = std::make_unique<cuda::MirrorEngine>(mc, progress);
      pool_.resize(static_cast<std::size_t>(banks));
      for (int b = 0; b < banks; ++b) {
        logical_[static_cast<std::size_t>(b)] = mirror_->host().device(b);
        pool_[static_cast<std::size_t>(b)] = mirror_->pool().bank(b);
      }
      break;
    }
  }
  if (staged) {
    const PageLayout one =
        PageLayout::make(1, g.page_size, g.kv_heads, g.head_dim, c.dtype == KvDtype::fp8);
    window_ = std::make_unique<cuda::DevicePool>(one, static_cast<SlotId>(c.window_pages));
  }
}

qsa::KvBanks PagedKv::logical_banks(int layer) const {
  return cuda::layer_kv_banks(layout_, layer, logical_.data(), c_.placement != Placement::device);
}

qsa::KvBanks PagedKv::pool_banks(int layer) const {
  if (!mirror_) throw ConfigError("runner: pool banks exist for placement mirror only");
  return cuda::layer_kv_banks(layout_, layer, pool_.data(), false);
}

qsa::KvBanks PagedKv::window_banks() const {
  if (!window_) throw ConfigError("runner: the staging window exists for host / mirror only");
  std::byte* base[4] = {};
  for (int b = 0; b < layout_.banks_per_layer; ++b)
    base[b] = window_->bank(b);
  return cuda::layer_kv_banks(window_->layout(), 0, base, false);
}

void PagedKv::stage(int layer, const std::int32_t* pages, std::int64_t n, cudaStream_t s) const {
  if (n > c_.window_pages) throw ConfigError("runner: staging more pages than the window holds");
  BankPair bp;
  bp.banks = layout_.banks_per_layer;
  for (int b = 0; b < bp.banks; ++b) {
    bp.src[b] = logical_[static_cast<std::size_t>(layer * layout_.banks_per_layer + b)];
    bp.dst[b] = window_->bank(b);
    bp.page_bytes[b] = layout_.page_bytes(PageLayout::kind_of(b));
  }
  gather_pages(bp, pages, n, s);
}

std::int64_t PagedKv::device_bytes() const {
  std::int64_t b = 0;
  if (device_) b += device_->total_bytes();
  if (mirror_) b += mirror_->pool().total_bytes();
  if (window_) b += window_->total_bytes();
  return b;
}

double PagedKv::host_bank_s() const {
  if (host_) return host_->ready_s();
  if (mirror_) return mirror_->host().ready_s();
  return 0;
}

std::int64_t PagedKv::host_bytes() const {
  if (host_) return host_->total_bytes();
  if (mirror_) return mirror_->host().total_bytes();
  return 0;
}

}  // namespace kvtier::runner
