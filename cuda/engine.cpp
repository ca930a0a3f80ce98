#include "cuda/engine.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "frontend/forward_schedule.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"

namespace kvtier::cuda {

std::string mirror_reads_rule(bool may_read_in_place) {
  if (!may_read_in_place) return mirror_reads_name(false);
  return "decode: " + std::string(mirror_reads_name(true)) +
         " when the forward before missed at most " +
         std::to_string(frontend::kInPlaceMissesPerRowLayer) + " pages per row and layer, " +
         mirror_reads_name(false) + " otherwise";
}

MirrorEngine::MirrorEngine(const MirrorConfig& c, const ProgressFn& progress)
    : cfg_(c), host_(c.layout, c.num_pages, progress), pool_(c.layout, c.num_slots) {
  if (c.max_query <= 0) throw ConfigError("mirror engine: max_query must be positive");
  if (c.step_blocks < 0 || c.step_blocks > kMaxStepBlocks)
    throw ConfigError("mirror engine: step_blocks must be 0 (one per SM) .. " +
                      std::to_string(kMaxStepBlocks));
  if (c.beside_lanes < 1 || c.beside_lanes > frontend::kMaxBesideLanes)
    throw ConfigError("mirror engine: beside_lanes must be 1 .. " +
                      std::to_string(frontend::kMaxBesideLanes));
  const int nstates = c.unit == ResidencyUnit::layer_page ? c.layout.layers : 1;
  for (int i = 0; i < nstates; ++i) {
    State st{DeviceArray<SlotId>(static_cast<std::size_t>(c.num_pages)),
             DeviceArray<PageId>(static_cast<std::size_t>(c.num_slots)),
             DeviceArray<std::int64_t>(static_cast<std::size_t>(c.num_slots))};
    // kNoSlot / kNoPage are -1 in every byte; kFreeSlotStep likewise.
    KVT_CUDA_CHECK(cudaMemset(st.slot_of_page.get(), 0xff, st.slot_of_page.bytes()));
    KVT_CUDA_CHECK(cudaMemset(st.page_of_slot.get(), 0xff, st.page_of_slot.bytes()));
    KVT_CUDA_CHECK(cudaMemset(st.last_use.get(), 0xff, st.last_use.bytes()));
    states_.push_back(std::move(st));
  }
  static_assert(kNoSlot == -1 && kNoPage == -1 && kFreeSlotStep == -1);
  const auto q = static_cast<std::size_t>(c.max_query);
  for (int lane = 0; lane < c.beside_lanes; ++lane) {
    scratch_.push_back(Scratch{DeviceArray<PageId>(q), DeviceArray<SlotId>(q),
                               DeviceArray<CopyOp>(q), DeviceArray<int>(1),
                               DeviceArray<EnsureResult>(1)});
    KVT_CUDA_CHECK(cudaMemset(scratch_.back().copy_count.get(), 0, sizeof(int)));
  }
  counters_ = DeviceArray<Counters>(1);
  step_ = DeviceArray<std::int64_t>(1);
  ticket_ = DeviceArray<StepTicket>(1);
  beside_tickets_ = DeviceArray<StepTicket>(static_cast<std::size_t>(2 * c.beside_lanes));
  prefetch_ticket_ = DeviceArray<StepTicket>(1);
  std::vector<const SlotId*> tables;
  for (int l = 0; l < c.layout.layers; ++l)
    tables.push_back(states_[static_cast<std::size_t>(state_index(l))].slot_of_page.get());
  slot_tables_ = DeviceArray<const SlotId*>(tables.size());
  KVT_CUDA_CHECK(cudaMemcpy(slot_tables_.get(), tables.data(), tables.size() * sizeof(SlotId*),
                            cudaMemcpyHostToDevice));
  query_ = DeviceArray<PageId>(q);
  one_slot_ = DeviceArray<SlotId>(1);
  if (c.form == EnsureForm::multi_block) {
    const int chunks = multi_block_chunks(c.num_slots);
    multi_candidates_ = DeviceArray<SlotId>(static_cast<std::size_t>(chunks) * kMultiChunk);
    multi_ints_ = DeviceArray<int>(static_cast<std::size_t>(3 * chunks + 1 + 4));
    int* ints = multi_ints_.get();
    multi_ = MultiBlockScratch{multi_candidates_.get(), ints, ints + chunks, ints + 2 * chunks,
                               ints + 3 * chunks + 1};
    KVT_CUDA_CHECK(cudaMemset(ints, 0, multi_ints_.bytes()));
  }
  KVT_CUDA_CHECK(cudaMemset(counters_.get(), 0, counters_.bytes()));
  KVT_CUDA_CHECK(cudaMemset(step_.get(), 0, step_.bytes()));
  KVT_CUDA_CHECK(cudaMemset(ticket_.get(), 0, ticket_.bytes()));
  KVT_CUDA_CHECK(cudaMemset(beside_tickets_.get(), 0, beside_tickets_.bytes()));
  KVT_CUDA_CHECK(cudaMemset(prefetch_ticket_.get(), 0, prefetch_ticket_.bytes()));
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
}

void MirrorEngine::check_layer(int layer) const {
  if (layer < 0 || layer >= cfg_.layout.layers) {
    throw std::out_of_range("mirror engine: layer " + std::to_string(layer) + " outside 0.." +
                            std::to_string(cfg_.layout.layers - 1));
  }
}

ResidencyView MirrorEngine::device_view(int layer) const {
  const State& s = states_[static_cast<std::size_t>(state_index(layer))];
  return {s.slot_of_page.get(), s.page_of_slot.get(), s.last_use.get(), cfg_.num_pages,
          cfg_.num_slots};
}

EnsureParams MirrorEngine::ensure_params(int layer, const PageId* d_query, int n,
                                         const EnsureHooks& hooks, int lane) const {
  const Scratch& sc = lane_scratch(lane);
  return EnsureParams{device_view(layer),
                      d_query,
                      n,
                      hooks.step != nullptr ? hooks.step : step_.get(),
                      sc.miss_pages.get(),
                      sc.victims.get(),
                      sc.copies.get(),
                      sc.copy_count.get(),
                      sc.result.get(),
                      &counters_.get()->ensure_errors,
                      hooks.totals};
}

void MirrorEngine::check_query(int n) const {
  if (n > cfg_.max_query) {
    throw ConfigError("mirror engine: query of " + std::to_string(n) +
                      " entries exceeds max_query " + std::to_string(cfg_.max_query));
  }
}

void MirrorEngine::check_step(int layer, const CompactParams& c, const PageId* d_query,
                              int n) const {
  check_layer(layer);
  check_query(n);
  if (c.rows > 0 && (c.out < d_query || c.out + std::int64_t{c.rows} * c.width > d_query + n)) {
    throw std::invalid_argument("mirror engine: the compaction's output must lie in the query");
  }
}

void MirrorEngine::check_lane(int lane) const {
  if (lane < 0 || lane >= cfg_.beside_lanes) {
    throw std::out_of_range("mirror engine: lane " + std::to_string(lane) + " outside 0.." +
                            std::to_string(cfg_.beside_lanes - 1) +
                            " (MirrorConfig::beside_lanes)");
  }
}

CopyParams MirrorEngine::copy_params(int layer, int lane) const {
  const bool per_layer = cfg_.unit == ResidencyUnit::layer_page;
  const Scratch& sc = lane_scratch(lane);
  return CopyParams{sc.copies.get(),
                    sc.copy_count.get(),
                    host_.device_bank_table(),
                    pool_.device_bank_table(),
                    cfg_.layout,
                    per_layer ? layer : 0,
                    per_layer ? 1 : cfg_.layout.layers};
}

void MirrorEngine::ensure_only_async(int layer, const PageId* d_query, int n, cudaStream_t s,
                                     const EnsureHooks& hooks) {
  check_layer(layer);
  check_query(n);
  launch_ensure_form(ensure_params(layer, d_query, n, hooks), s);
}

void MirrorEngine::launch_ensure_form(const EnsureParams& ep, cudaStream_t s) {
  if (cfg_.form == EnsureForm::multi_block) {
    launch_ensure_multi(ep, multi_, s);
  } else {
    launch_ensure(ep, cfg_.form, s);
  }
}

void MirrorEngine::ensure_async(int layer, const PageId* d_query, int n, cudaStream_t s,
                                const EnsureHooks& hooks) {
  ensure_only_async(layer, d_query, n, s, hooks);
  launch_copy(copy_params(layer), s);
}

TranslateParams MirrorEngine::translate_params(int layer, const TranslateTarget& t) const {
  return TranslateParams{t.logical,
                         t.physical,
                         device_view(layer).slot_of_page,
                         t.missing != nullptr ? t.missing : &counters_.get()->missing,
                         cfg_.num_pages,
                         t.dummy,
                         t.n};
}

void MirrorEngine::translate_async(int layer, const PageId* d_logical, int n, SlotId* d_physical,
                                   cudaStream_t s) {
  check_layer(layer);
  launch_translate(translate_params(layer, {d_logical, d_physical, n, dummy_slot(cfg_.num_slots)}),
                   s);
}

void MirrorEngine::residency_step_async(int layer, const CompactParams& c, const PageId* d_query,
                                        int n, const TranslateTarget& t, cudaStream_t s,
                                        const EnsureHooks& hooks) {
  check_step(layer, c, d_query, n);
  if (cfg_.form != EnsureForm::block) {
    launch_compact(c, s);
    ensure_async(layer, d_query, n, s, hooks);
    if (t.n > 0) launch_translate(translate_params(layer, t), s);
    return;
  }
  launch_residency_step({c, ensure_params(layer, d_query, n, hooks), copy_params(layer),
                         translate_params(layer, t), ticket_.get(), cfg_.step_blocks, hooks.stamps},
                        s);
}

void MirrorEngine::residency_beside_async(int layer, const CompactParams& c, const PageId* d_query,
                                          int n, cudaStream_t s, const EnsureHooks& hooks, int lane,
                                          int blocks) {
  check_lane(lane);
  if (blocks != kBesideBlocks && blocks != kBesideBlocksWide)
    throw std::invalid_argument(
        "mirror engine: a step beside takes " + std::to_string(kBesideBlocks) + " or " +
        std::to_string(kBesideBlocksWide) + " blocks, not " + std::to_string(blocks));
  if (cfg_.form != EnsureForm::block) {
    if (lane != 0)
      throw std::invalid_argument("mirror engine: steps beside on lane " + std::to_string(lane) +
                                  " need the block form");
    residency_step_async(layer, c, d_query, n, TranslateTarget{}, s, hooks);
    return;
  }
  check_step(layer, c, d_query, n);
  launch_residency_step(
      {c, ensure_params(layer, d_query, n, hooks, lane), copy_params(layer, lane),
       translate_params(layer, TranslateTarget{}),
       beside_tickets_.get() + 2 * lane + (blocks == kBesideBlocks ? 0 : 1), blocks, hooks.stamps},
      s);
}

void MirrorEngine::prefetch_async(int layer, const PageId* d_query, int n, cudaStream_t s,
                                  const EnsureHooks& hooks) {
  check_layer(layer);
  check_query(n);
  EnsureParams ep = ensure_params(layer, d_query, n, hooks);
  ep.errors = nullptr;  // PrefetchNextLayer: a hint, never a reason to fail a step
  if (cfg_.form != EnsureForm::block) {
    launch_ensure_form(ep, s);
    launch_copy(copy_params(layer), s);
    return;
  }
  // The one-launch step with no rows to compact and no table to translate: ensure and copy.
  launch_residency_step(
      {CompactParams{}, ep, copy_params(layer), translate_params(layer, TranslateTarget{}),
       prefetch_ticket_.get(), kBesideBlocks},
      s);
}

void MirrorEngine::locate_async(int first, int layers, const PageId* d_logical, int n,
                                SlotId* d_physical, int* d_in_place, cudaStream_t s) {
  check_layer(first);
  check_layer(first + layers - 1);
  if (layers > 1 && cfg_.unit != ResidencyUnit::layer_page) {
    throw std::invalid_argument(
        "mirror engine: locating several layers at once needs the per-layer unit");
  }
  launch_locate(LocateParams{d_logical, d_physical, slot_tables_.get() + first, d_in_place,
                             cfg_.num_pages, n, layers},
                s);
}
void MirrorEngine::store_async(int layer, const PageId* d_pages, const std::int32_t* d_tokens,
                               const std::byte* const* src, int n, cudaStream_t s) {
  check_layer(layer);
  StoreParams sp{};
  sp.pages = d_pages;
  sp.tokens = d_tokens;
  for (int k = 0; k < cfg_.layout.banks_per_layer; ++k) {
    sp.src[k] = src[k];
    sp.host[k] = host_.device(bank_of(layer, PageLayout::kind_of(k)));
    sp.pool[k] = pool_.bank(bank_of(layer, PageLayout::kind_of(k)));
  }
  sp.slot_of_page = device_view(layer).slot_of_page;
  sp.bad = &counters_.get()->bad_stores;
  sp.layout = cfg_.layout;
  sp.num_pages = cfg_.num_pages;
  sp.n = n;
  launch_store(sp, s);
}

void MirrorEngine::flush_async(cudaStream_t s) {
  for (std::size_t i = 0; i < states_.size(); ++i)
    launch_flush(device_view(cfg_.unit == ResidencyUnit::layer_page ? static_cast<int>(i) : 0), s);
}

void MirrorEngine::reset_counters_async(cudaStream_t s) {
  KVT_CUDA_CHECK(cudaMemsetAsync(counters_.get(), 0, counters_.bytes(), s));
}

EnsureResult MirrorEngine::ensure(int layer, std::span<const PageId> query, std::int64_t step,
                                  std::vector<CopyOp>& copies) {
  check_layer(layer);
  const int n = static_cast<int>(query.size());
  if (n > cfg_.max_query) {
    throw ConfigError("mirror engine: query of " + std::to_string(n) +
                      " entries exceeds max_query " + std::to_string(cfg_.max_query));
  }
  if (n > 0) {
    KVT_CUDA_CHECK(
        cudaMemcpy(query_.get(), query.data(), query.size_bytes(), cudaMemcpyHostToDevice));
  }
  launch_set_step(step_.get(), step, nullptr);
  ensure_async(layer, query_.get(), n, nullptr);
  EnsureResult r;
  KVT_CUDA_CHECK(cudaMemcpy(&r, result(), sizeof r, cudaMemcpyDeviceToHost));
  if (r.status == EnsureStatus::page_out_of_range) {
    throw std::out_of_range("mirror engine: query entry " + std::to_string(r.bad_index) +
                            " is page " + std::to_string(query[r.bad_index]) + ", outside 0.." +
                            std::to_string(cfg_.num_pages - 1));
  }
  if (r.status == EnsureStatus::pool_too_small) {
    throw CapacityError("mirror engine: " + std::to_string(r.misses) + " misses but " +
                        std::to_string(r.evictable) + " evictable slots of " +
                        std::to_string(cfg_.num_slots));
  }
  copies.resize(static_cast<std::size_t>(r.misses));
  if (r.misses > 0) {
    KVT_CUDA_CHECK(cudaMemcpy(copies.data(), scratch_[0].copies.get(),
                              copies.size() * sizeof(CopyOp), cudaMemcpyDeviceToHost));
  }
  return r;
}

void MirrorEngine::store(int layer, std::span<const TokenBytes> tokens) {
  check_layer(layer);
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return;
  std::vector<PageId> pages(tokens.size());
  std::vector<std::int32_t> toks(tokens.size());
  const int kinds = cfg_.layout.banks_per_layer;
  std::vector<std::vector<std::byte>> src(static_cast<std::size_t>(kinds));
  for (int i = 0; i < n; ++i) {
    pages[i] = tokens[i].page;
    toks[i] = tokens[i].token;
    for (int k = 0; k < kinds; ++k) {
      const auto tb = static_cast<std::size_t>(cfg_.layout.token_bytes(PageLayout::kind_of(k)));
      if (tokens[i].bytes[k].size() != tb) {
        throw std::invalid_argument("mirror engine: token bytes " +
                                    std::to_string(tokens[i].bytes[k].size()) + ", expected " +
                                    std::to_string(tb));
      }
      src[k].insert(src[k].end(), tokens[i].bytes[k].begin(), tokens[i].bytes[k].end());
    }
  }
  DeviceArray<PageId> d_pages(pages.size());
  DeviceArray<std::int32_t> d_tokens(toks.size());
  DeviceArray<std::byte> d_src[4];
  const std::byte* src_ptr[4] = {};
  KVT_CUDA_CHECK(cudaMemcpy(d_pages.get(), pages.data(), d_pages.bytes(), cudaMemcpyHostToDevice));
  KVT_CUDA_CHECK(cudaMemcpy(d_tokens.get(), toks.data(), d_tokens.bytes(), cudaMemcpyHostToDevice));
  for (int k = 0; k < kinds; ++k) {
    d_src[k] = DeviceArray<std::byte>(src[k].size());
    KVT_CUDA_CHECK(
        cudaMemcpy(d_src[k].get(), src[k].data(), src[k].size(), cudaMemcpyHostToDevice));
    src_ptr[k] = d_src[k].get();
  }
  store_async(layer, d_pages.get(), d_tokens.get(), src_ptr, n, nullptr);
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
}

void MirrorEngine::flush() {
  flush_async(nullptr);
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
}

MirrorEngine::Counters MirrorEngine::read_counters() {
  Counters c{};
  KVT_CUDA_CHECK(cudaMemcpy(&c, counters_.get(), sizeof c, cudaMemcpyDeviceToHost));
  return c;
}

std::vector<std::byte> MirrorEngine::read_through_table(int layer, BankKind kind, PageId page) {
  check_layer(layer);
  KVT_CUDA_CHECK(cudaMemcpy(query_.get(), &page, sizeof page, cudaMemcpyHostToDevice));
  translate_async(layer, query_.get(), 1, one_slot_.get(), nullptr);
  SlotId s = 0;
  KVT_CUDA_CHECK(cudaMemcpy(&s, one_slot_.get(), sizeof s, cudaMemcpyDeviceToHost));
  if (s < 0 || s > cfg_.num_slots) throw std::logic_error("translate returned a bad slot");
  const std::int64_t pb = cfg_.layout.page_bytes(kind);
  std::vector<std::byte> out(static_cast<std::size_t>(pb));
  KVT_CUDA_CHECK(cudaMemcpy(out.data(), pool_.bank(bank_of(layer, kind)) + s * pb, out.size(),
                            cudaMemcpyDeviceToHost));
  return out;
}

std::vector<std::byte> MirrorEngine::host_page(int layer, BankKind kind, PageId page) {
  check_layer(layer);
  if (page < 0 || page > cfg_.num_pages) {
    throw std::out_of_range("mirror engine: page " + std::to_string(page) + " outside the bank");
  }
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::int64_t pb = cfg_.layout.page_bytes(kind);
  const std::byte* p = host_.host(bank_of(layer, kind)) + page * pb;
  return {p, p + pb};
}

std::vector<SlotId> MirrorEngine::translate(int layer, std::span<const PageId> logical) {
  check_layer(layer);
  std::vector<SlotId> out(logical.size());
  if (logical.empty()) return out;
  DeviceArray<PageId> d_in(logical.size());
  DeviceArray<SlotId> d_out(logical.size());
  KVT_CUDA_CHECK(
      cudaMemcpy(d_in.get(), logical.data(), logical.size_bytes(), cudaMemcpyHostToDevice));
  translate_async(layer, d_in.get(), static_cast<int>(logical.size()), d_out.get(), nullptr);
  KVT_CUDA_CHECK(
      cudaMemcpy(out.data(), d_out.get(), out.size() * sizeof(SlotId), cudaMemcpyDeviceToHost));
  return out;
}

std::vector<std::byte> MirrorEngine::download_pool_bank(int bank) {
  std::vector<std::byte> out(static_cast<std::size_t>(pool_.bank_bytes(bank)));
  KVT_CUDA_CHECK(cudaMemcpy(out.data(), pool_.bank(bank), out.size(), cudaMemcpyDeviceToHost));
  return out;
}

void MirrorEngine::download_state(int layer, std::vector<SlotId>& slot_of_page,
                                  std::vector<PageId>& page_of_slot,
                                  std::vector<std::int64_t>& last_use) {
  const ResidencyView v = device_view(layer);
  slot_of_page.resize(static_cast<std::size_t>(v.num_pages));
  page_of_slot.resize(static_cast<std::size_t>(v.num_slots));
  last_use.resize(static_cast<std::size_t>(v.num_slots));
  KVT_CUDA_CHECK(cudaMemcpy(slot_of_page.data(), v.slot_of_page,
                            slot_of_page.size() * sizeof(SlotId), cudaMemcpyDeviceToHost));
  KVT_CUDA_CHECK(cudaMemcpy(page_of_slot.data(), v.page_of_slot,
                            page_of_slot.size() * sizeof(PageId), cudaMemcpyDeviceToHost));
  KVT_CUDA_CHECK(cudaMemcpy(last_use.data(), v.last_use, last_use.size() * sizeof(std::int64_t),
                            cudaMemcpyDeviceToHost));
}

}  // namespace kvtier::cuda
