#include "cuda/trace_replay.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "cuda/device_upload.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/trace_replay_detail.hpp"
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

namespace replay_detail {

TraceReplay::TraceReplay(const traces::TraceInput& input, const ReplayConfig& cfg,
                         const frontend::TraceBounds& stats)
    : g_(input.header.geometry),
      cfg_(cfg),
      L_(g_.qsa_layers()),
      num_pages_(stats.peak_pages),
      layout_(
          PageLayout::make(L_, g_.page_size, g_.kv_heads, g_.head_dim, cfg.dtype == KvDtype::fp8)),
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

ReplayResult TraceReplay::run(traces::RecordStream& stream, std::int64_t total_forwards) {
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

void TraceReplay::allocate(const frontend::TraceBounds& stats) {
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

void TraceReplay::end_request(const traces::RequestEnd& e) {
  const std::vector<PageId> freed = fe_.end(e);
  if (!mirror_ || freed.empty()) return;
  upload(d_freed_, freed, s_);
  for (int l = 0; l < L_; ++l)
    launch_release(engine_->device_view(l), d_freed_.get(), static_cast<int>(freed.size()), s_);
  if (verifier_) verifier_->release(freed);
  KVT_CUDA_CHECK(cudaStreamSynchronize(s_));  // d_freed_ is reused
}

ReplayStep TraceReplay::stage(const traces::Forward& f) {
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
  at_.in_place = may_read_in_place_ && st.tokens == rows && frontend::decode_reads_in_place(last_);
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

void TraceReplay::finish_forward(ReplayStep& st) {
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
                          std::to_string(r.misses) + " new pages (" + std::to_string(r.evictable) +
                          " evictable)");
    }
    st.missing += ec.missing;  // translate: selected pages not resident after ensure
    c.bad_stores += ec.bad_stores;
  }
  if (c.bad_rows != 0 || c.bad_stores != 0)
    throw std::runtime_error("forward " + std::to_string(fi_) + ": " + std::to_string(c.bad_rows) +
                             " rows failed compaction, " + std::to_string(c.bad_stores) +
                             " stores outside the space");
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

void TraceReplay::check_sums(const ReplayStep& st) {
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

void TraceReplay::totals() {
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

}  // namespace replay_detail

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
  replay_detail::TraceReplay replay(input, cfg, stats);
  auto stream = input.open();
  return replay.run(*stream, total_forwards);
}

}  // namespace kvtier::cuda
