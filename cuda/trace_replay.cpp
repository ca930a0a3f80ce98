#include "cuda/trace_replay.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/device_counters.hpp"
#include "cuda/device_upload.hpp"
#include "cuda/engine.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/replay_attend.hpp"
#include "cuda/replay_stage.hpp"
#include "cuda/replay_verify.hpp"
#include "cuda/stream_handles.hpp"
#include "frontend/forward_schedule.hpp"
#include "frontend/front_end.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/ensure.hpp"
#include "model/step_stamp.hpp"

namespace kvtier::cuda {

std::string_view to_string(ReadMode m) {
  return m == ReadMode::attend ? "attend" : "checksum";
}

ReadMode parse_read_mode(std::string_view text, std::string_view what) {
  if (text == "attend") return ReadMode::attend;
  if (text == "checksum") return ReadMode::checksum;
  throw ConfigError(std::string(what) + ": expected attend or checksum, got '" + std::string(text) +
                    "'");
}

std::string attend_kernel_name(bool fp8, bool host_banks) {
  if (fp8) return "simt (fp8 codes + scales, SIMT fp32)";
  return qsa::attend_bf16_kernel(host_banks) == qsa::AttendVariant::mma_load
             ? "mma_load (tensor cores, register gather)"
             : "mma_async (tensor cores, cp.async gather)";
}

namespace {

// One replay of a trace through one placement. Phases: allocate() once; per record
// end_request() or, per forward, stage() -> launch_layers() -> finish_forward(); totals() at
// the end. Streams, events and graphs are owned, so an exception on any path (a CapacityError
// from a pool that cannot take a step, say) gives them all back.
class TraceReplay {
 public:
  TraceReplay(const traces::TraceInput& input, const ReplayConfig& cfg,
              const frontend::TraceBounds& stats)
      : g_(input.header.geometry),
        cfg_(cfg),
        L_(g_.qsa_layers()),
        num_pages_(stats.peak_pages),
        layout_(PageLayout::make(L_, g_.page_size, g_.kv_heads, g_.head_dim,
                                 cfg.dtype == KvDtype::fp8)),
        token_bytes_(layout_.layer_page_bytes() / layout_.page_size),
        slots_(static_cast<SlotId>(cfg.pool_pages)),
        mirror_(cfg.placement == Placement::mirror),
        prefetch_(mirror_ && cfg.policy == MirrorPolicy::prefetch),
        host_(cfg.placement == Placement::host),
        device_(cfg.placement == Placement::device),
        attend_(cfg.read == ReadMode::attend),
        fe_(g_, num_pages_),
        s_(make_stream()),
        side_{make_stream(), make_stream()},
        ev_a_(make_event()),
        ev_b_(make_event()),
        ev_fork_(make_event(false)),
        ev_join_{make_event(false), make_event(false)},
        ev_prefetched_(make_event(false)),
        d_counters_(1),
        d_layer_sums_(static_cast<std::size_t>(L_)),
        layer_sums_(static_cast<std::size_t>(L_)),
        steps_(static_cast<std::size_t>(L_)) {
    for (int k = 0; k < layout_.banks_per_layer; ++k) {
      if (layout_.token_bytes(PageLayout::kind_of(k)) % 4 != 0)
        throw ConfigError("run: token bytes per bank must be a multiple of 4");
    }
    res_.placement = std::string(to_string(cfg.placement));
    res_.dtype = std::string(to_string(cfg.dtype));
    res_.read = std::string(to_string(cfg.read));
    res_.pool_pages = mirror_ ? cfg.pool_pages : 0;
    res_.num_pages = num_pages_;
    res_.layers = L_;
    res_.verified = cfg.verify;
    if (attend_) {
      res_.attend_kernel = attend_kernel_name(layout_.fp8(), host_);
      res_.q_heads = g_.q_heads;
    }
    allocate(stats);
  }

  // Replays up to `total_forwards` forwards of `stream`.
  ReplayResult run(traces::RecordStream& stream, std::int64_t total_forwards) {
    traces::Record rec;
    while (fi_ < total_forwards && stream.next(rec)) {
      if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
        fe_.begin(*b);
      } else if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
        end_request(*e);
      } else {
        const auto& f = std::get<traces::Forward>(rec);
        ReplayStep st = stage(f);
        launch_layers(f);
        st.beside_lanes = at_.in_place && mirror_ ? forward_.lanes : 0;
        st.beside_blocks = at_.in_place && mirror_ ? forward_.blocks : 0;
        finish_forward(st);
        last_ = frontend::LastForward{st.tokens == st.rows, st.misses, std::int64_t{st.rows} * L_};
        res_.steps.push_back(st);
        ++fi_;
        if (cfg_.on_forward) cfg_.on_forward(fi_, total_forwards);
      }
    }
    if (attend_) res_.checksum = att_->checksum();
    if (step_stamps_) res_.step_phases = step_stamps_->read();
    totals();
    return std::move(res_);
  }

 private:
  // Memory: the mirror engine, or the pool (device), or the host bank (host, write-through).
  void allocate(const frontend::TraceBounds& stats) {
    if (mirror_) {
      // A query is the write pages + rows x the select width, which the pool bounds (the
      // width is what the slots leave the rows), as does every row's widest reach: a prefill
      // row that does not bypass the pool queries up to its context's pages.
      const std::int64_t reach =
          std::int64_t{stats.max_write_pages} +
          std::int64_t{stats.max_rows} * g_.pages_for_context(stats.max_context);
      const std::int64_t max_query =
          std::max<std::int64_t>({1, stats.max_step_pages, std::min<std::int64_t>(slots_, reach)});
      MirrorConfig mc{layout_, ResidencyUnit::layer_page,   num_pages_,
                      slots_,  static_cast<int>(max_query), cfg_.form};
      // The steps beside on as many lanes as a forward's schedule may give (the simulator
      // prices the same); engines of the other forms run one step at a time.
      lanes_ = cfg_.form == EnsureForm::block ? frontend::kMaxBesideLanes : 1;
      mc.beside_lanes = lanes_;
      engine_ = std::make_unique<MirrorEngine>(mc);
      if (cfg_.step_phases) step_stamps_.emplace(kStepPhaseLaunches, lanes_);
      res_.device_bytes = engine_->pool().total_bytes();
      res_.host_bytes = engine_->host().total_bytes();
    } else {
      if (device_) {
        pool_ = std::make_unique<DevicePool>(layout_, num_pages_);
        res_.device_bytes = pool_->total_bytes();
      }
      if (host_ || cfg_.write_through) {
        bank_ = std::make_unique<HostBank>(layout_, num_pages_);
        res_.host_bytes = bank_->total_bytes();
      }
    }
    if (mirror_ && cfg_.verify) verifier_.emplace(L_, num_pages_, slots_);
    if (cfg_.verify && !attend_) contents_.emplace(num_pages_, g_.page_size);
    // Device addresses of every bank (the pool's, or the host bank's device-mapped ones).
    for (int b = 0; b < layout_.banks(); ++b) {
      if (mirror_) {
        pool_banks_.push_back(engine_->pool().bank(b));
        host_banks_.push_back(engine_->host().device(b));
      } else {
        if (pool_) pool_banks_.push_back(pool_->bank(b));
        if (bank_) host_banks_.push_back(bank_->device(b));
      }
    }
    if (attend_) att_.emplace(g_, layout_, s_);
    at_.placement = cfg_.placement;
    at_.pool_banks = pool_banks_.data();
    at_.host_banks = host_banks_.data();
    at_.write_through = cfg_.write_through;
    at_.num_pages = num_pages_;
    at_.slots = slots_;
    // The mirror's attention may read the pages it misses from the host bank in place, beside
    // the ensure (bf16 attention; not with --verify, which checks each ensure as it completes):
    // in the decode forwards that frontend::decode_reads_in_place picks, as the runner does.
    may_read_in_place_ =
        mirror_ && attend_ && !layout_.fp8() && !cfg_.copy_first && !cfg_.verify && !prefetch_;
    if (mirror_) res_.mirror_reads = mirror_reads_rule(may_read_in_place_);
  }

  void end_request(const traces::RequestEnd& e) {
    const std::vector<PageId> freed = fe_.end(e);
    if (!mirror_ || freed.empty()) return;
    upload(d_freed_, freed, s_);
    for (int l = 0; l < L_; ++l)
      launch_release(engine_->device_view(l), d_freed_.get(), static_cast<int>(freed.size()), s_);
    if (verifier_) verifier_->release(freed);
    KVT_CUDA_CHECK(cudaStreamSynchronize(s_));  // d_freed_ is reused
  }

  // Page tables, selections, store entries and read positions of the forward, uploaded.
  ReplayStep stage(const traces::Forward& f) {
    fe_.prepare(f);
    const int rows = static_cast<int>(f.rows.size());
    const int width = fe_.plan_rows(mirror_ ? cfg_.pool_pages : 0);
    ReplayStep st;
    st.forward = fi_;
    st.rows = rows;
    st.width = width;
    st.tokens = fe_.tokens();
    st.decode_tokens = fe_.decode_tokens();
    stage_forward(g_, fe_, f, width, sf_);
    st.selected_tokens = sf_.selected_tokens;
    at_.bypass_rows = sf_.bypassed_rows > 0;
    at_.in_place =
        may_read_in_place_ && st.tokens == rows && frontend::decode_reads_in_place(last_);
    st.reads_in_place = at_.in_place;
    if (!attend_) {
      // rows that bypass the pool are read from the host bank: their positions go to a second
      // read (bypass_read_pos_), -1 in the pool's
      const std::size_t n = static_cast<std::size_t>(L_) * rows * sf_.max_tokens;
      read_pos_.assign(n, -1);
      bypass_read_pos_.assign(at_.bypass_rows ? n : 0, -1);
      for (std::size_t k = 0; k < sf_.read_positions.size(); ++k) {
        const bool bypass = fe_.bypass()[k % static_cast<std::size_t>(rows)] != 0;
        std::copy(sf_.read_positions[k].begin(), sf_.read_positions[k].end(),
                  (bypass ? bypass_read_pos_ : read_pos_).begin() +
                      static_cast<std::int64_t>(k) * sf_.max_tokens);
      }
    }
    if (at_.bypass_rows) upload(d_in_place_entries_, sf_.in_place_entries, s_);
    upload(d_tables_, sf_.tables, s_);
    upload(d_tablelen_, sf_.table_len, s_);
    if (mirror_) {
      // every layer's step stamp (the simulator's), read by that layer's ensure
      for (int l = 0; l < L_; ++l)
        steps_[static_cast<std::size_t>(l)] = demand_stamp(layer_step(fi_, L_, l));
      upload(d_steps_, steps_, s_);
      if (prefetch_) {
        // the prefetch each layer issues into the next layer's pool takes its prefetch stamp
        prefetch_steps_.resize(static_cast<std::size_t>(L_));
        for (int l = 0; l < L_; ++l)
          prefetch_steps_[static_cast<std::size_t>(l)] = prefetch_stamp(layer_step(fi_, L_, l));
        upload(d_prefetch_steps_, prefetch_steps_, s_);
      }
    }
    upload(d_rowpos_, sf_.row_last_pos, s_);
    upload(d_blocks_, sf_.blocks, s_);
    upload(d_query_, sf_.layer_queries, s_);
    upload(d_store_pages_, sf_.store_pages, s_);
    upload(d_store_tokens_, sf_.store_tokens, s_);
    fit(d_physical_, static_cast<std::size_t>(std::max(sf_.query_len, rows * width)));
    if (attend_) {
      att_->stage(sf_, s_);
    } else {
      upload(d_store_pos_, sf_.store_pos, s_);
      upload(d_read_pos_, read_pos_, s_);
      if (at_.bypass_rows) upload(d_bypass_read_pos_, bypass_read_pos_, s_);
      for (int k = 0; k < layout_.banks_per_layer; ++k)
        fit(d_src_[k],
            static_cast<std::size_t>(sf_.n_store() * layout_.token_bytes(PageLayout::kind_of(k))));
    }
    KVT_CUDA_CHECK(cudaMemsetAsync(d_counters_.get(), 0, sizeof(DeviceCounters), s_));
    if (!attend_) {
      KVT_CUDA_CHECK(cudaMemsetAsync(d_layer_sums_.get(), 0,
                                     layer_sums_.size() * sizeof(unsigned long long), s_));
    }
    if (engine_) engine_->reset_counters_async(s_);
    KVT_CUDA_CHECK(cudaStreamSynchronize(s_));
    return st;
  }

  PageId* query(int l) const { return d_query_.get() + std::int64_t{l} * sf_.query_len; }

  CompactParams compact_params(int l) const {
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

  // The forward on the GPU, from ev_a_ to ev_b_. Attend mode without --verify captures the
  // layers into one CUDA graph launched once, so that the time is the GPU's work, not how fast
  // this thread enqueues a dozen launches per layer (the runner replays its decode steps from
  // graphs as well).
  void launch_layers(const traces::Forward& f) {
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
      engine_->locate_async(0, L_, d_tables_.get(), att_->pool_table_entries(),
                            att_->pool_tables(0), nullptr, s_);
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

  EnsureHooks hooks(int l) const {
    return EnsureHooks{d_steps_.get() + l, d_counters_.get()->ensure};
  }

  // One op of the schedule for layer l. Attend mode: the store and the attention through the
  // rows' page tables (mirror: located before the forward, or translated to the pool's slots by
  // the residency step first). Checksum mode: the store of generated bytes, then every
  // selected token read and folded into the layer's sum.
  void launch_op(const traces::Forward& f, int l, const frontend::ScheduledOp& op) {
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
                           std::string(frontend::to_string(op.op)) +
                           "' has no trace replay launch");
  }

  // Mirror, in place: the residency step (compaction, ensure and miss copy on a few blocks)
  // on the stream beside, forked after the layer's store: every page of the query reads the
  // same bytes either way, and the ensure changes no slot that the attention reads. A layer's
  // step may run on beside the next layer's work (another state), and beside the next layer's
  // step where the forward takes two lanes, on the blocks frontend::beside_steps gives; the main
  // stream joins it where frontend::beside_join says.
  void residency_beside(int l) {
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

  // Mirror: compaction, ensure, miss copy and translate in one launch, into `target`; with
  // --verify the core checks the layer's query and copies as soon as they are done.
  void mirror_residency(const traces::Forward& f, int l, const TranslateTarget& target) {
    engine_->residency_step_async(l, compact_params(l), query(l), sf_.query_len, target, s_,
                                  hooks(l));
    if (attend_) read_bypass_in_place(l, 1);
    if (verifier_) {
      KVT_CUDA_CHECK(cudaStreamSynchronize(s_));
      verifier_->check_layer(fe_, f, l, sf_.width, fi_, demand_stamp(layer_step(fi_, L_, l)),
                             query(l), sf_.query_len, *engine_, res_, cfg_.decisions);
    }
  }

  // Mirror, prefetch policy: layer l's query ensured into layer l + 1's pool and its misses
  // copied, on the stream beside, forked after layer l's step; layer l + 1's step waits for it.
  // With --verify the core checks its copies as soon as they are done.
  void prefetch_next(int l) {
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

  // Attend, mirror: the tables of rows that bypass the pool read the host bank in place in
  // layers [first, first + layers) (after those tables were located or translated).
  void read_bypass_in_place(int first, int layers) {
    if (!at_.bypass_rows) return;
    launch_read_rows_in_place({att_->pool_tables(first), d_tables_.get(), d_in_place_entries_.get(),
                               sf_.rows, sf_.stride, layers},
                              s_);
  }

  // Checksum: the new tokens' bytes generated and stored where the placement keeps pages.
  void checksum_store(int l) {
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

  StoreParams store_params(int l, const std::byte* const* src) const {
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

  ReadParams read_params(int l) const {
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

  // Checksum, mirror: the rows that bypass the pool, read from the host bank.
  ReadParams bypass_read_params(int l) const {
    ReadParams rp = read_params(l);
    rp.positions = d_bypass_read_pos_.get() + std::int64_t{l} * sf_.rows * sf_.max_tokens;
    rp.banks = engine_->host().device_bank_table();  // the mirror's own host bank
    rp.slot_of_page = nullptr;
    rp.dummy = dummy_page(num_pages_);
    return rp;
  }

  // The forward's time, counters and (checksum mode) sums; throws on a failed ensure,
  // compaction or store.
  void finish_forward(ReplayStep& st) {
    float ms = 0;
    KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_a_, ev_b_));
    st.gpu_us = static_cast<double>(ms) * 1000.0;
    DeviceCounters c{};
    KVT_CUDA_CHECK(cudaMemcpy(&c, d_counters_.get(), sizeof c, cudaMemcpyDeviceToHost));
    if (engine_) {
      const MirrorEngine::Counters ec = engine_->read_counters();
      if (ec.ensure_errors != 0) {
        EnsureResult r;
        KVT_CUDA_CHECK(cudaMemcpy(&r, engine_->result(), sizeof r, cudaMemcpyDeviceToHost));
        throw CapacityError("forward " + std::to_string(fi_) + ": the pool of " +
                            std::to_string(cfg_.pool_pages) + " slots cannot take " +
                            std::to_string(r.misses) + " new pages (" +
                            std::to_string(r.evictable) + " evictable)");
      }
      st.missing += ec.missing;  // translate: selected pages not resident after ensure
      c.bad_stores += ec.bad_stores;
    }
    if (c.bad_rows != 0 || c.bad_stores != 0)
      throw std::runtime_error("forward " + std::to_string(fi_) + ": " +
                               std::to_string(c.bad_rows) + " rows failed compaction, " +
                               std::to_string(c.bad_stores) + " stores outside the space");
    st.prefetched = c.prefetch[1];
    st.hits = c.ensure[0];
    st.misses = c.ensure[1];
    st.evictions = c.ensure[2];
    st.drops = c.dropped;
    st.missing += c.missing;
    const std::int64_t stored = std::int64_t{sf_.n_store()} * token_bytes_ * L_;
    st.d2h_bytes = device_ && !cfg_.write_through ? 0 : stored;
    st.h2d_bytes = mirror_ ? (st.misses + st.prefetched) * layout_.layer_page_bytes()
                   : host_ ? st.selected_tokens * token_bytes_
                           : 0;
    if (!attend_) check_sums(st);
  }

  // Checksum mode: the layers' sums into the result, and with --verify against what every
  // slot holds.
  void check_sums(const ReplayStep& st) {
    KVT_CUDA_CHECK(cudaMemcpy(layer_sums_.data(), d_layer_sums_.get(),
                              layer_sums_.size() * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost));
    for (int l = 0; l < L_; ++l)
      res_.checksum += layer_sums_[static_cast<std::size_t>(l)];  // wraps like the device sum
    if (!contents_) return;
    contents_->record_stores(sf_);
    for (int l = 0; l < L_; ++l) {
      const unsigned long long sum = contents_->expected(layout_, l, sf_);
      res_.expected_checksum += sum;
      if (sum != layer_sums_[static_cast<std::size_t>(l)] && res_.checksum_mismatches++ == 0)
        res_.first_checksum_mismatch = "forward " + std::to_string(fi_) + " layer " +
                                       std::to_string(l) + " (" + std::to_string(st.rows) +
                                       " rows, " + std::to_string(st.drops) + " dropped pages, " +
                                       std::to_string(st.evictions) + " evictions)";
    }
  }

  void totals() {
    ReplayStep& t = res_.total;
    t.forward = fi_;
    for (const ReplayStep& x : res_.steps) {
      t.rows += x.rows;
      t.width = t.width == 0 ? x.width : std::min(t.width, x.width);
      t.tokens += x.tokens;
      t.decode_tokens += x.decode_tokens;
      t.gpu_us += x.gpu_us;
      t.hits += x.hits;
      t.misses += x.misses;
      t.prefetched += x.prefetched;
      t.evictions += x.evictions;
      t.drops += x.drops;
      t.missing += x.missing;
      t.selected_tokens += x.selected_tokens;
      t.h2d_bytes += x.h2d_bytes;
      t.d2h_bytes += x.d2h_bytes;
    }
  }

  const Geometry& g_;
  const ReplayConfig& cfg_;
  const int L_;
  const PageId num_pages_;
  const PageLayout layout_;
  const std::int64_t token_bytes_;  // one layer's K/V of one token
  const SlotId slots_;
  const bool mirror_, prefetch_, host_, device_, attend_;
  frontend::FrontEnd fe_;
  ReplayResult res_;
  std::int64_t fi_ = 0;
  StagedForward sf_;
  std::vector<std::int64_t> read_pos_;         // checksum: [layers][rows][max_tokens]
  std::vector<std::int64_t> bypass_read_pos_;  // the same for rows that bypass the pool

  std::unique_ptr<MirrorEngine> engine_;
  static constexpr int kStepPhaseLaunches = 65536;
  std::optional<StepStampRecorder> step_stamps_;  // cfg_.step_phases
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<HostBank> bank_;
  std::optional<MirrorVerifier> verifier_;
  std::optional<SlotContents> contents_;
  std::vector<std::byte*> pool_banks_, host_banks_;
  AttendPlacement at_;

  Stream s_;
  // mirror, in place: the residency steps beside s_ (layer l's on side_[l % forward_.lanes]);
  // the prefetch policy's on side_[0]
  Stream side_[frontend::kMaxBesideLanes];
  int lanes_ = 1;                  // the engine's
  frontend::BesideSteps forward_;  // this forward's lanes and blocks
  Event ev_a_, ev_b_;
  Event ev_fork_, ev_join_[2];       // join: a layer's, waited for in the next layer
  Event ev_prefetched_;              // prefetch: the last one issued, done
  bool prefetch_pending_ = false;    // the next residency step waits for ev_prefetched_
  std::optional<AttendReplay> att_;  // after s_: it is built on s_ and destroyed first
  DeviceArray<DeviceCounters> d_counters_;
  // checksum mode: one sum per layer and forward, so that verify names where bytes differ
  DeviceArray<unsigned long long> d_layer_sums_;
  std::vector<unsigned long long> layer_sums_;
  std::vector<std::int64_t> steps_;           // [layers] demand stamps of the forward
  std::vector<std::int64_t> prefetch_steps_;  // [layers] the prefetch stamps of its layer-steps
  DeviceArray<std::int64_t> d_prefetch_steps_;
  DeviceArray<std::int32_t> d_blocks_;
  DeviceArray<std::int64_t> d_rowpos_, d_tablelen_, d_store_pos_, d_read_pos_, d_steps_,
      d_bypass_read_pos_;
  DeviceArray<std::int32_t> d_in_place_entries_;  // mirror: StagedForward::in_place_entries
  bool may_read_in_place_ = false;                // mirror: at_.in_place is this forward's choice
  frontend::LastForward last_;                    // the forward before, for decode_reads_in_place
  DeviceArray<PageId> d_tables_, d_query_, d_store_pages_, d_freed_;
  DeviceArray<std::int32_t> d_store_tokens_;
  DeviceArray<SlotId> d_physical_;
  DeviceArray<std::byte> d_src_[4];
};

}  // namespace

ReplayResult replay_trace(const traces::TraceInput& input, const ReplayConfig& cfg) {
  const Geometry& g = input.header.geometry;
  g.validate();
  const bool mirror = cfg.placement == Placement::mirror;
  if (mirror && cfg.pool_pages <= 0) throw ConfigError("placement mirror needs --pool-pages N");
  if (cfg.write_through && cfg.placement != Placement::device)
    throw ConfigError("write-through applies to placement device only");
  if (cfg.pool_pages > INT32_MAX - 1) throw ConfigError("pool pages beyond 2^31 - 2");
  if (cfg.policy == MirrorPolicy::hybrid)
    throw ConfigError(
        "policy hybrid: the GPU trace replay runs the lru and prefetch policies (kvtier sim "
        "--policy hybrid simulates it)");
  if (cfg.policy != MirrorPolicy::lru && !mirror)
    throw ConfigError("policy " + std::string(to_string(cfg.policy)) +
                      ": only the mirror placement has a pool to fill");
  if (cfg.read == ReadMode::attend) check_attend_geometry(g);
  if (device_count() == 0) throw std::runtime_error("no CUDA device found");

  const frontend::TraceBounds stats = frontend::scan_trace(input);
  const std::int64_t total_forwards =
      cfg.max_forwards >= 0 ? std::min(cfg.max_forwards, stats.forwards) : stats.forwards;
  TraceReplay replay(input, cfg, stats);
  auto stream = input.open();
  return replay.run(*stream, total_forwards);
}

}  // namespace kvtier::cuda
