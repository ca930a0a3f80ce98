// A forward's layers on the GPU (replay_detail::TraceReplay::launch_layers): the ops of
// frontend::layer_schedule, launched on the replay's streams, captured as one graph in attend
// mode, and the parameters of the kernels they launch.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/trace_replay_detail.hpp"
#include "model/ensure.hpp"

namespace kvtier::cuda::replay_detail {

CompactParams TraceReplay::compact_params(int l) const {
  DeviceCounters* dc = d_counters_.get();
  return CompactParams{d_blocks_.get() + std::int64_t{l} * sf_.rows * sf_.blocks_per_row,
                       d_rowpos_.get(),
                       d_tables_.get(),
                       d_tablelen_.get(),
                       query(l) + sf_.writes,
                       &dc->dropped,
                       &dc->bad_rows,
                       sf_.rows,
                       sf_.blocks_per_row,
                       sf_.stride,
                       sf_.width,
                       g_.compress_ratio,
                       g_.page_size};
}

void TraceReplay::launch_layers(const traces::Forward& f) {
  // attend, device and host: compaction only counts the drops (the attention reads the
  // token lists directly), so it runs before the timed span.
  if (attend_ && !mirror_) {
    for (int l = 0; l < L_; ++l)
      launch_compact(compact_params(l), s_);
  }
  // attend: every layer's K/V and queries first (a stand-in for the model's projections), so
  // that the timed part is the layers' store .. attention back to back
  if (attend_) att_->generate(s_);
  const bool graphed = attend_ && !verifier_;
  if (graphed) {
    KVT_CUDA_CHECK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
  } else {
    KVT_CUDA_CHECK(cudaEventRecord(ev_a_, s_));
  }
  // The layers as frontend::layer_schedule lists them (the simulator prices the same list).
  const frontend::ScheduleShape shape{cfg_.placement, frontend::ForwardKind::trace_replay,
                                      at_.in_place, prefetch_};
  prefetch_pending_ = false;
  const frontend::BesideJoin join = frontend::beside_join(shape);
  forward_ = frontend::beside_steps(shape, f, g_, qsa::sm_count());
  if (forward_.lanes > lanes_) forward_ = {};  // an engine of another form: one step at a time
  // Mirror, in place: every layer's table before any ensure of the forward (each stays valid
  // until its own layer's ensure), one launch.
  if (frontend::locates_first(shape)) {
    engine_->locate_async(0, L_, d_tables_.get(), att_->pool_table_entries(), att_->pool_tables(0),
                          nullptr, s_);
    read_bypass_in_place(0, L_);
  }
  for (int l = 0; l < L_; ++l) {
    for (const frontend::ScheduledOp& op : frontend::layer_schedule(shape)) {
      const int joined = l - join.layers_later;
      if (op.op == join.waits_before && joined >= 0 && at_.in_place)
        KVT_CUDA_CHECK(cudaStreamWaitEvent(s_, ev_join_[joined % 2]));
      launch_op(f, l, op);
    }
  }
  // The forward ends after the residency steps still running beside.
  if (at_.in_place) {
    for (int l = std::max(0, L_ - join.layers_later); l < L_; ++l)
      KVT_CUDA_CHECK(cudaStreamWaitEvent(s_, ev_join_[l % 2]));
  }
  GraphExec exec;
  if (graphed) {
    exec = end_capture(s_);
    KVT_CUDA_CHECK(cudaGraphUpload(exec, s_));  // the upload is not the forward's work
    KVT_CUDA_CHECK(cudaEventRecord(ev_a_, s_));
    KVT_CUDA_CHECK(cudaGraphLaunch(exec, s_));
  }
  KVT_CUDA_CHECK(cudaEventRecord(ev_b_, s_));
  if (attend_) {
    // After the timed span: every layer's state is as its ensure left it (one ensure per
    // layer and forward), so translating the whole query (write pages + selection) now
    // counts the pages the layer needed but did not hold.
    if (mirror_) {
      for (int l = 0; l < L_; ++l)
        engine_->translate_async(l, query(l), sf_.query_len, d_physical_.get(), s_);
    }
    att_->digest(s_);
  }
  KVT_CUDA_CHECK(cudaStreamSynchronize(s_));
}

EnsureHooks TraceReplay::hooks(int l) const {
  return EnsureHooks{d_steps_.get() + l, d_counters_.get()->ensure};
}

void TraceReplay::launch_op(const traces::Forward& f, int l, const frontend::ScheduledOp& op) {
  switch (op.op) {
    case frontend::LayerOp::store:
      if (attend_) {
        att_->store(l, at_, d_tables_.get(), s_);
      } else {
        checksum_store(l);
      }
      return;
    case frontend::LayerOp::residency:
      if (op.lane == frontend::Lane::beside) {
        residency_beside(l);
      } else {
        if (prefetch_pending_) {  // the previous layer's prefetch into this layer's pool
          KVT_CUDA_CHECK(cudaStreamWaitEvent(s_, ev_prefetched_));
          prefetch_pending_ = false;
        }
        mirror_residency(f, l,
                         attend_ ? att_->pool_table_target(d_tables_.get(), l)
                                 : TranslateTarget{query(l) + sf_.writes, d_physical_.get(),
                                                   sf_.rows * sf_.width, dummy_slot(slots_)});
      }
      return;
    case frontend::LayerOp::attend:
      if (attend_) {
        att_->attend(l, at_, d_tables_.get(), s_);
      } else {
        if (!mirror_) launch_compact(compact_params(l), s_);
        launch_read(read_params(l), s_);
        if (at_.bypass_rows) launch_read(bypass_read_params(l), s_);
      }
      return;
    case frontend::LayerOp::prefetch:
      if (PrefetchNextLayer::applies(ResidencyUnit::layer_page, l, L_)) prefetch_next(l);
      return;
    case frontend::LayerOp::non_qsa:
    case frontend::LayerOp::index_topk:
    case frontend::LayerOp::output_projection:
      break;
  }
  throw std::logic_error("trace replay: the model forward's op '" +
                         std::string(frontend::to_string(op.op)) + "' has no trace replay launch");
}

void TraceReplay::residency_beside(int l) {
  const int lane = l % forward_.lanes;
  cudaStream_t side = side_[lane];
  KVT_CUDA_CHECK(cudaEventRecord(ev_fork_, s_));
  KVT_CUDA_CHECK(cudaStreamWaitEvent(side, ev_fork_));
  EnsureHooks h = hooks(l);
  if (step_stamps_) h.stamps = step_stamps_->stamps(lane);
  engine_->residency_beside_async(l, compact_params(l), query(l), sf_.query_len, side, h, lane,
                                  forward_.blocks);
  KVT_CUDA_CHECK(cudaEventRecord(ev_join_[l % 2], side));
}

void TraceReplay::mirror_residency(const traces::Forward& f, int l, const TranslateTarget& target) {
  engine_->residency_step_async(l, compact_params(l), query(l), sf_.query_len, target, s_,
                                hooks(l));
  if (attend_) read_bypass_in_place(l, 1);
  if (verifier_) {
    KVT_CUDA_CHECK(cudaStreamSynchronize(s_));
    verifier_->check_layer(fe_, f, l, sf_.width, fi_, demand_stamp(layer_step(fi_, L_, l)),
                           query(l), sf_.query_len, *engine_, res_, cfg_.decisions);
  }
}

void TraceReplay::prefetch_next(int l) {
  KVT_CUDA_CHECK(cudaEventRecord(ev_fork_, s_));
  KVT_CUDA_CHECK(cudaStreamWaitEvent(side_[0], ev_fork_));
  engine_->prefetch_async(l + 1, query(l), sf_.query_len, side_[0],
                          EnsureHooks{d_prefetch_steps_.get() + l, d_counters_.get()->prefetch});
  KVT_CUDA_CHECK(cudaEventRecord(ev_prefetched_, side_[0]));
  prefetch_pending_ = true;
  if (verifier_) {
    KVT_CUDA_CHECK(cudaStreamSynchronize(side_[0]));
    verifier_->check_prefetch(l, fi_, layer_step(fi_, L_, l), *engine_, res_, cfg_.decisions);
  }
}

void TraceReplay::read_bypass_in_place(int first, int layers) {
  if (!at_.bypass_rows) return;
  launch_read_rows_in_place({att_->pool_tables(first), d_tables_.get(), d_in_place_entries_.get(),
                             sf_.rows, sf_.stride, layers},
                            s_);
}

void TraceReplay::checksum_store(int l) {
  FillParams fp{};
  fp.positions = d_store_pos_.get();
  for (int k = 0; k < layout_.banks_per_layer; ++k)
    fp.dst[k] = d_src_[k].get();
  fp.layout = layout_;
  fp.layer = l;
  fp.n = sf_.n_store();
  launch_fill(fp, s_);
  const std::byte* src[4] = {d_src_[0].get(), d_src_[1].get(), d_src_[2].get(), d_src_[3].get()};
  if (mirror_) {
    engine_->store_async(l, d_store_pages_.get(), d_store_tokens_.get(), src, sf_.n_store(), s_);
  } else {
    launch_store(store_params(l, src), s_);
  }
}

StoreParams TraceReplay::store_params(int l, const std::byte* const* src) const {
  StoreParams sp{};
  sp.pages = d_store_pages_.get();
  sp.tokens = d_store_tokens_.get();
  for (int k = 0; k < layout_.banks_per_layer; ++k) {
    const int bk = l * layout_.banks_per_layer + k;
    sp.src[k] = src[k];
    sp.host[k] = bank_ ? bank_->device(bk) : nullptr;
    sp.pool[k] = pool_ ? pool_->bank(bk) : nullptr;
  }
  sp.slot_of_page = nullptr;
  sp.bad = &d_counters_.get()->bad_stores;
  sp.layout = layout_;
  sp.num_pages = num_pages_;
  sp.n = sf_.n_store();
  return sp;
}

ReadParams TraceReplay::read_params(int l) const {
  ReadParams rp{};
  rp.positions = d_read_pos_.get() + std::int64_t{l} * sf_.rows * sf_.max_tokens;
  rp.tables = d_tables_.get();
  rp.table_len = d_tablelen_.get();
  rp.missing = &d_counters_.get()->missing;
  rp.checksum = d_layer_sums_.get() + l;
  rp.layout = layout_;
  rp.layer = l;
  rp.rows = sf_.rows;
  rp.max_tokens = sf_.max_tokens;
  rp.table_stride = sf_.stride;
  rp.num_pages = num_pages_;
  if (mirror_) {
    rp.banks = engine_->pool().device_bank_table();
    rp.slot_of_page = engine_->device_view(l).slot_of_page;
    rp.dummy = dummy_slot(slots_);
  } else if (device_) {
    rp.banks = pool_->device_bank_table();
    rp.slot_of_page = nullptr;
    rp.dummy = num_pages_;
  } else {
    rp.banks = bank_->device_bank_table();
    rp.slot_of_page = nullptr;
    rp.dummy = dummy_page(num_pages_);
  }
  return rp;
}

ReadParams TraceReplay::bypass_read_params(int l) const {
  ReadParams rp = read_params(l);
  rp.positions = d_bypass_read_pos_.get() + std::int64_t{l} * sf_.rows * sf_.max_tokens;
  rp.banks = engine_->host().device_bank_table();  // the mirror's own host bank
  rp.slot_of_page = nullptr;
  rp.dummy = dummy_page(num_pages_);
  return rp;
}

}  // namespace kvtier::cuda::replay_detail
