// A layer's ops as the replay prices them (the store, the attention over each placement's
// reads, the mirror's residency step and prefetch), with the core's decisions.
#include <algorithm>
#include <array>
#include <string>

#include "frontend/decision_log.hpp"
#include "model/capacity_error.hpp"
#include "model/step_stamp.hpp"
#include "model/translate.hpp"
#include "sim/replay_simulation.hpp"

namespace kvtier::sim::replay_detail {

OpId Simulation::store_op(const LayerStep& ls, const Deps& deps, const char* name) {
  const std::int64_t bytes = tokens_ * token_bytes_;
  const std::int64_t host_bytes = cfg_.placement == Placement::device ? 0 : bytes;
  const std::int64_t device_bytes = cfg_.placement == Placement::host     ? 0
                                    : cfg_.placement == Placement::device ? bytes
                                                                          : mirror_pool_store(ls);
  const OpId st =
      tl_.add(Resource::compute,
              cost_.kernel_launch_ns(1) + cost_.store_ns(device_bytes, host_bytes, cfg_.dtype),
              deps, name, ls.layer);
  if (host_bytes > 0) {
    res_.d2h_bytes += host_bytes;
    const Resource link = frontend::locates_first(shape_) ? Resource::h2d : Resource::d2h;
    tl_.add(link, cost_.store_ns(0, host_bytes, cfg_.dtype), deps, "write-through", ls.layer);
  }
  return st;
}

std::int64_t Simulation::mirror_pool_store(const LayerStep& ls) const {
  const auto writes = fe_.writes();
  if (!shape_.mirror_in_place || writes.empty()) return tokens_ * token_bytes_;
  const ResidencyState& state = cur_->pools[all_layers_ ? 0 : ls.layer].state;
  const auto resident = std::count_if(writes.begin(), writes.end(),
                                      [&](PageId p) { return state.slot_of(p) != kNoSlot; });
  return tokens_ * token_bytes_ * resident / static_cast<std::int64_t>(writes.size());
}

std::int64_t Simulation::attend_cost(const frontend::LayerQuery& q, std::int64_t hbm_bytes,
                                     bool walk) const {
  const bool model = shape_.kind == frontend::ForwardKind::model;
  std::int64_t width = 1;
  for (const frontend::RowTokens& rt : q.rows)
    width = std::max(width, rt.last_token_selected);
  if (model) width = g_.select_width_tokens();
  const int rows = static_cast<int>(model ? tokens_ : std::ssize(q.rows));
  const std::int64_t ctas = cost_.attend_ctas(rows, g_.kv_heads, static_cast<int>(width));
  if (!model && cfg_.dtype == KvDtype::fp8 && q.last_token_selected > 0)
    hbm_bytes = CostModel::grid_bytes(hbm_bytes, rows * width, q.last_token_selected);
  const std::int64_t cta_tokens =
      walk ? cost_.attend_cta_tokens(rows, g_.kv_heads, static_cast<int>(width)) : 0;
  return cost_.attention_ns(hbm_bytes, rows, ctas, cfg_.dtype, cta_tokens);
}

bool Simulation::reuses_l2(RequestId one_row) const {
  return one_row != kNoReuse && one_row == last_one_row_ &&
         shape_.kind == frontend::ForwardKind::trace_replay &&
         cfg_.placement == Placement::device && cfg_.dtype == KvDtype::bf16;
}

OpId Simulation::attend_op(LayerStep& ls, const Deps& deps, const char* name) {
  const frontend::LayerQuery& q = *ls.q;
  if (cfg_.placement == Placement::device) {
    res_.hbm_read_bytes += ls.sel_bytes;
    const std::int64_t attend =
        std::max<std::int64_t>(0, attend_cost(q, ls.sel_bytes) - l2_reuse_ns_);
    return tl_.add(Resource::compute, cost_.kernel_launch_ns(2) + attend, deps, name, ls.layer);
  }
  if (cfg_.placement == Placement::host) return host_attend(q, deps, ls.layer, name);
  // Mirror: hits from the pool; the pages missed (in place) or bypassed come over the link
  // once the attention starts (after the step's copy when the step ran first).
  res_.hbm_read_bytes += ls.pool_sel_bytes;
  const std::array<OpId, 3> ready{deps[0], deps[1], ls.copied};
  const OpId rd = ls.in_place_bytes > 0
                      ? tl_.add(Resource::h2d, cost_.in_place_read_ns(ls.in_place_bytes), ready,
                                "in-place read", ls.layer)
                      : kNoOp;

  return tl_.add(Resource::compute, cost_.kernel_launch_ns(2) + attend_cost(q, ls.pool_sel_bytes),
                 {deps[0], deps[1], ls.copied, rd}, name, ls.layer);
}

std::int64_t Simulation::selected_tokens(const frontend::LayerQuery& q) const {
  return shape_.kind == frontend::ForwardKind::model ? q.selected_tokens : q.last_token_selected;
}

OpId Simulation::host_attend(const frontend::LayerQuery& q, const Deps& deps, int l,
                             const char* name) {
  const bool model = shape_.kind == frontend::ForwardKind::model;
  const std::int64_t staged_sel = model ? q.staged_selected_tokens : 0;
  const std::int64_t in_place = (selected_tokens(q) - staged_sel) * token_bytes_;
  const std::int64_t staged = model ? q.staged_cached_tokens * token_bytes_ : 0;
  res_.in_place_bytes += in_place;
  res_.h2d_bytes += in_place + staged;
  res_.hbm_read_bytes += staged_sel * token_bytes_;
  // Each row's own reads and staged windows, charged to its request.
  for (std::size_t r = 0; r < q.rows.size(); ++r) {
    const frontend::RowTokens& rt = q.rows[r];
    const std::int64_t sel = model ? rt.selected : rt.last_token_selected;
    const std::int64_t row_bytes =
        model ? (sel - rt.staged_selected + rt.staged_cached) * token_bytes_ : sel * token_bytes_;
    lat_.charge_row(static_cast<int>(r), static_cast<double>(row_bytes));
  }
  const std::int64_t windows = model ? q.staged_windows : 0;
  const OpId rd = in_place > 0 ? tl_.add(Resource::h2d, cost_.in_place_read_ns(in_place), deps,
                                         "in-place read", l)
                               : kNoOp;
  const OpId st = staged > 0 ? tl_.add(Resource::h2d, cost_.staging_ns(staged, windows), deps,
                                       "staging windows", l)
                             : kNoOp;
  // Each window's table, token list and fold, and the accumulator's reset (the runner's
  // attend_staged): device work in the attend's op.
  const std::int64_t window_work =
      windows > 0
          ? cost_.window_fold_ns(windows, q.staged_window_rows) + cost_.fold_reset_ns(tokens_)
          : 0;
  // fp8: the SIMT attend reading in place is compute-bound, priced by its own term (the link
  // op shows the link's use); bf16 reads at the link's pace, then the attend's own part.
  const bool fp8 = cfg_.dtype == KvDtype::fp8 && in_place > 0;
  const std::int64_t rows = model ? tokens_ : std::ssize(q.rows);
  const std::int64_t attend =
      (fp8 ? cost_.attention_fp8_host_ns(in_place, rows) : 0) +
      (fp8 && staged_sel == 0 ? 0 : attend_cost(q, staged_sel * token_bytes_, in_place == 0));
  return tl_.add(Resource::compute,
                 cost_.kernel_launch_ns(2 + static_cast<int>(windows)) + attend + window_work,
                 {deps[0], deps[1], fp8 ? kNoOp : rd, st}, name, l);
}

EnsureResult Simulation::ensure(PoolState& pool, const frontend::LayerQuery& q, std::int64_t step) {
  const int n = static_cast<int>(q.pages.size());
  const EnsureScratch es{sc_.miss.data(), sc_.victims.data(), sc_.bypass.data()};
  if (cfg_.policy == MirrorPolicy::hybrid) {
    return ensure_pages(pool.state.view(), q.pages.data(), n, step, pool.victims, es,
                        sc_.copies.data(), AdmitOnReuse{pool.last_seen.data(), {window_stamps_}});
  }
  return ensure_pages(pool.state.view(), q.pages.data(), n, step, pool.victims, es,
                      sc_.copies.data());
}

OpId Simulation::residency_op(LayerStep& ls, Resource lane, const Deps& deps, const char* name) {
  const frontend::LayerQuery& q = *ls.q;
  const int l = ls.layer;
  LayerStats& st = res_.layers[l];
  const int si = all_layers_ ? 0 : l;
  PoolState& pool = cur_->pools[static_cast<std::size_t>(si)];
  const int n = static_cast<int>(q.pages.size());
  sc_.fit(q.pages.size());
  const std::int64_t ls_index = layer_step(fi_, L_, l);
  const std::int64_t step = demand_stamp(ls_index);
  if (cfg_.on_query) cfg_.on_query(state_index(si), step, q.pages);
  const EnsureResult r = ensure(pool, q, step);
  if (r.status != EnsureStatus::ok) {
    throw CapacityError("forward " + std::to_string(fi_) + " layer " + std::to_string(l) +
                        ": the pool of " + std::to_string(cur_->slots) + " slots cannot take " +
                        std::to_string(r.misses) + " new pages (" + std::to_string(r.evictable) +
                        " evictable)");
  }
  const int missing = translate_pages(q.pages.data(), n, pool.state.slot_of_page().data(),
                                      num_pages_, dummy_slot(cur_->slots), sc_.physical.data());
  if (r.bypassed == 0 && missing != 0) {
    throw std::logic_error("simulator: a page is not resident after ensure");
  }
  frontend::log_installs(cfg_.decisions, fi_, state_index(si), step, frontend::InstallKind::demand,
                         {sc_.copies.data(), static_cast<std::size_t>(r.misses)});
  st.lookups += r.hits + r.misses + r.bypassed;
  st.hits += r.hits;
  st.misses += r.misses;
  st.bypassed += r.bypassed;
  st.evictions += r.evictions;
  const std::int64_t distinct = std::max(1, r.hits + r.misses + r.bypassed);
  const std::int64_t read_in_place = is_beside(lane) ? r.misses + r.bypassed : r.bypassed;
  // Rows that bypass the pool read all they select from the host bank; the pool's rows
  // read the share of their pages that the step did not have.
  const bool model = shape_.kind == frontend::ForwardKind::model;
  const std::int64_t bypass_sel =
      (model ? q.bypass_selected_tokens : q.bypass_last_token_selected) * token_bytes_;
  const std::int64_t bypass_read =
      (model ? q.bypass_read_tokens : q.bypass_last_token_selected) * token_bytes_;
  const std::int64_t pool_in_place = (ls.sel_bytes - bypass_sel) * read_in_place / distinct;
  ls.in_place_bytes = pool_in_place + bypass_read;
  ls.pool_sel_bytes = ls.sel_bytes - bypass_sel - pool_in_place;
  const std::int64_t copy_page_bytes = all_layers_ ? page_bytes_ * L_ : page_bytes_;
  const std::int64_t copy_bytes = std::int64_t{r.misses} * copy_page_bytes;
  res_.copy_bytes += copy_bytes;
  res_.in_place_bytes += ls.in_place_bytes;
  res_.h2d_bytes += copy_bytes + ls.in_place_bytes;
  charge_step(r, copy_page_bytes, read_in_place, pool_in_place);
  if (bypass_read > 0) charge_bypass_rows(q, model);
  // Beside, the step (compaction, ensure and miss copy) is one kernel on its lane's stream: a
  // layer's step starts once the previous step on that lane has copied its misses.
  const bool beside = is_beside(lane);
  const OpId previous_step = beside && l >= lanes_ ? beside_done_[l - lanes_] : kNoOp;
  const std::array<OpId, 3> after{deps[0], deps[1], previous_step};
  // Beside, the step runs on a few blocks without the translate (its own terms).
  const std::int64_t step_ns =
      beside ? cost_.step_beside_ns(std::ssize(q.rows), q.page_entries, cur_->slots, r.misses)
             : cost_.ensure_ns(n, cur_->slots, r.misses);
  const OpId ens = tl_.add(lane, cost_.kernel_launch_ns(1) + step_ns, after, name, l);
  // Beside, the step's own few blocks copy its misses; otherwise the copy kernel's full grid.
  const std::int64_t copy_ns =
      beside ? cost_.step_beside_copy_ns(copy_bytes) : cost_.zero_copy_read_ns(copy_bytes);
  const OpId cp = copy_bytes > 0 ? tl_.add(Resource::h2d, copy_ns, {ens}, "miss copy", l) : kNoOp;
  // In place the attention does not wait for the step (it reads what the step did not have
  // from the host bank, beside it); first, it waits for the step's copy.
  if (!beside) ls.copied = cp != kNoOp ? cp : ens;
  return cp != kNoOp ? cp : ens;
}

void Simulation::charge_step(const EnsureResult& r, std::int64_t copy_page_bytes,
                             std::int64_t read_in_place, std::int64_t in_place_bytes) {
  for (int i = 0; i < r.misses; ++i)
    lat_.charge_page(sc_.copies[i].page, static_cast<double>(copy_page_bytes));
  if (read_in_place == 0 || in_place_bytes == 0) return;
  const double per_page = static_cast<double>(in_place_bytes) / static_cast<double>(read_in_place);
  if (read_in_place > r.bypassed) {  // beside: the missed pages too
    for (int i = 0; i < r.misses; ++i)
      lat_.charge_page(sc_.copies[i].page, per_page);
  }
  for (int i = 0; i < r.bypassed; ++i)
    lat_.charge_page(sc_.bypass[i], per_page);
}

void Simulation::charge_bypass_rows(const frontend::LayerQuery& q, bool model) {
  const auto bypass = fe_.bypass();
  for (std::size_t i = 0; i < q.rows.size(); ++i) {
    if (bypass[i] == 0) continue;
    const frontend::RowTokens& rt = q.rows[i];
    const std::int64_t tokens = !model                 ? rt.last_token_selected
                                : rt.staged_cached > 0 ? rt.staged_cached
                                                       : rt.selected;
    lat_.charge_row(static_cast<int>(i), static_cast<double>(tokens * token_bytes_));
  }
}

OpId Simulation::prefetch_op(const frontend::LayerQuery& q, OpId after, int l,
                             std::int64_t ls_index, const char* name) {
  PoolState& next = cur_->pools[static_cast<std::size_t>(l) + 1];
  const int n = static_cast<int>(q.pages.size());
  sc_.fit(q.pages.size());
  const EnsureScratch es{sc_.miss.data(), sc_.victims.data(), sc_.bypass.data()};
  const EnsureResult pr = PrefetchNextLayer::prefetch(
      next.state.view(), q.pages.data(), n, ls_index, next.victims, es, sc_.copies.data());
  const int copied = pr.status == EnsureStatus::ok ? pr.misses : 0;
  const OpId ens =
      tl_.add(Resource::beside,
              cost_.kernel_launch_ns(1) +
                  cost_.step_beside_ns(std::ssize(q.rows), q.page_entries, cur_->slots, copied),
              {after}, name, l + 1);
  if (copied == 0) return ens;
  frontend::log_installs(cfg_.decisions, fi_, state_index(l + 1), prefetch_stamp(ls_index),
                         frontend::InstallKind::prefetch,
                         {sc_.copies.data(), static_cast<std::size_t>(copied)});
  res_.layers[l + 1].prefetched += copied;
  for (int i = 0; i < copied; ++i)
    lat_.charge_page(sc_.copies[i].page, static_cast<double>(page_bytes_));
  const std::int64_t pb = std::int64_t{copied} * page_bytes_;
  res_.copy_bytes += pb;
  res_.h2d_bytes += pb;
  return tl_.add(Resource::h2d, cost_.step_beside_copy_ns(pb), {ens}, "prefetch copy", l + 1);
}

}  // namespace kvtier::sim::replay_detail
