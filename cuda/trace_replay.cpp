#include "cuda/trace_replay.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/device_upload.hpp"
#include "cuda/engine.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/replay_attend.hpp"
#include "cuda/replay_stage.hpp"
#include "cuda/replay_verify.hpp"
#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/ensure.hpp"
#include "sim/front_end.hpp"

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

// Step counters the device accumulates: hits, misses, evictions, then int counters.
struct DeviceCounters {
  long long ensure[3];
  int dropped;
  int bad_rows;
  int missing;
  int bad_stores;
};

}  // namespace

ReplayResult replay_trace(const sim::TraceInput& input, const ReplayConfig& cfg) {
  const Geometry& g = input.header.geometry;
  g.validate();
  const bool mirror = cfg.placement == Placement::mirror;
  const bool host = cfg.placement == Placement::host;
  const bool device = cfg.placement == Placement::device;
  const bool attend = cfg.read == ReadMode::attend;
  if (mirror && cfg.pool_pages <= 0) throw ConfigError("placement mirror needs --pool-pages N");
  if (cfg.write_through && !device)
    throw ConfigError("write-through applies to placement device only");
  if (cfg.pool_pages > INT32_MAX - 1) throw ConfigError("pool pages beyond 2^31 - 2");
  if (attend) check_attend_geometry(g);
  if (device_count() == 0) throw std::runtime_error("no CUDA device found");

  const sim::TraceStats stats = sim::scan_trace(input);
  const int L = g.qsa_layers();
  const PageId num_pages = stats.peak_pages;
  const PageLayout layout =
      PageLayout::make(L, g.page_size, g.kv_heads, g.head_dim, cfg.dtype == KvDtype::fp8);
  for (int k = 0; k < layout.banks_per_layer; ++k) {
    if (layout.token_bytes(PageLayout::kind_of(k)) % 4 != 0)
      throw ConfigError("run: token bytes per bank must be a multiple of 4");
  }
  const std::int64_t token_bytes = layout.layer_page_bytes() / layout.page_size;  // one layer
  const auto slots = static_cast<SlotId>(cfg.pool_pages);

  ReplayResult res;
  res.placement = std::string(to_string(cfg.placement));
  res.dtype = std::string(to_string(cfg.dtype));
  res.read = std::string(to_string(cfg.read));
  res.pool_pages = mirror ? cfg.pool_pages : 0;
  res.num_pages = num_pages;
  res.layers = L;
  res.verified = cfg.verify;
  if (attend) {
    res.attend_kernel = attend_kernel_name(layout.fp8(), host);
    res.q_heads = g.q_heads;
  }

  // --- memory: mirror engine, or pool (device), or host bank (host, write-through)
  std::unique_ptr<MirrorEngine> engine;
  std::unique_ptr<DevicePool> pool;
  std::unique_ptr<HostBank> bank;
  if (mirror) {
    MirrorConfig mc{layout,
                    ResidencyUnit::layer_page,
                    num_pages,
                    slots,
                    static_cast<int>(std::max<std::int64_t>(1, stats.max_step_pages)),
                    cfg.form};
    engine = std::make_unique<MirrorEngine>(mc);
    res.device_bytes = engine->pool().total_bytes();
    res.host_bytes = engine->host().total_bytes();
  } else {
    if (device) {
      pool = std::make_unique<DevicePool>(layout, num_pages);
      res.device_bytes = pool->total_bytes();
    }
    if (host || cfg.write_through) {
      bank = std::make_unique<HostBank>(layout, num_pages);
      res.host_bytes = bank->total_bytes();
    }
  }
  std::optional<MirrorVerifier> verifier;
  if (mirror && cfg.verify) verifier.emplace(L, num_pages, slots);
  // Host addresses of every bank (the pool's, or the host bank's device-mapped ones).
  std::vector<std::byte*> pool_banks, host_banks;
  for (int b = 0; b < layout.banks(); ++b) {
    if (mirror) {
      pool_banks.push_back(engine->pool().bank(b));
      host_banks.push_back(engine->host().device(b));
    } else {
      if (pool) pool_banks.push_back(pool->bank(b));
      if (bank) host_banks.push_back(bank->device(b));
    }
  }

  cudaStream_t s;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev_a, ev_b;
  KVT_CUDA_CHECK(cudaEventCreate(&ev_a));
  KVT_CUDA_CHECK(cudaEventCreate(&ev_b));
  // mirror, in-place reads: the residency step's stream beside s, and the fork / join events
  cudaStream_t side;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t ev_fork, ev_join[2];  // join: a layer's, waited for in the next layer
  KVT_CUDA_CHECK(cudaEventCreateWithFlags(&ev_fork, cudaEventDisableTiming));
  for (cudaEvent_t& e : ev_join)
    KVT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  DeviceArray<DeviceCounters> d_counters(1);
  // checksum mode: one sum per layer and forward, so that verify names where bytes differ
  DeviceArray<unsigned long long> d_layer_sums(static_cast<std::size_t>(L));
  std::vector<unsigned long long> layer_sums(static_cast<std::size_t>(L));
  DeviceArray<std::int32_t> d_blocks;
  DeviceArray<std::int64_t> d_rowpos, d_tablelen, d_store_pos, d_read_pos, d_steps;
  std::vector<std::int64_t> steps(static_cast<std::size_t>(L));
  std::optional<SlotContents> contents;
  if (cfg.verify && !attend) contents.emplace(num_pages, g.page_size);
  DeviceArray<PageId> d_tables, d_query, d_store_pages, d_freed;
  DeviceArray<std::int32_t> d_store_tokens;
  DeviceArray<SlotId> d_physical;
  DeviceArray<std::byte> d_src[4];

  // attend mode: the real attention per layer (cuda/replay_attend)
  std::optional<AttendReplay> att;
  if (attend) att.emplace(g, layout, s);
  AttendPlacement at;
  at.placement = cfg.placement;
  at.pool_banks = pool_banks.data();
  at.host_banks = host_banks.data();
  at.write_through = cfg.write_through;
  at.num_pages = num_pages;
  at.slots = slots;
  // The mirror's attention reads the pages it misses from the host bank in place, beside the
  // ensure (bf16 attention; not with --verify, which checks each ensure as it completes).
  at.in_place = mirror && attend && !layout.fp8() && !cfg.copy_first && !cfg.verify;
  if (mirror) res.mirror_reads = mirror_reads_name(at.in_place);

  sim::FrontEnd fe(g, num_pages);
  const std::int64_t total_forwards =
      cfg.max_forwards >= 0 ? std::min(cfg.max_forwards, stats.forwards) : stats.forwards;
  auto stream = input.open();
  traces::Record rec;
  std::int64_t fi = 0;
  // host staging
  StagedForward sf;
  std::vector<std::int64_t> read_pos;

  while (fi < total_forwards && stream->next(rec)) {
    if (const auto* b = std::get_if<traces::RequestBegin>(&rec)) {
      fe.begin(*b);
      continue;
    }
    if (const auto* e = std::get_if<traces::RequestEnd>(&rec)) {
      const std::vector<PageId> freed = fe.end(*e);
      if (mirror && !freed.empty()) {
        upload(d_freed, freed, s);
        for (int l = 0; l < L; ++l)
          launch_release(engine->device_view(l), d_freed.get(), static_cast<int>(freed.size()), s);
        if (verifier) verifier->release(freed);
        KVT_CUDA_CHECK(cudaStreamSynchronize(s));  // d_freed is reused
      }
      continue;
    }
    const auto& f = std::get<traces::Forward>(rec);
    fe.prepare(f);
    const int rows = static_cast<int>(f.rows.size());
    const int width = fe.row_width(rows, mirror ? cfg.pool_pages : 0);
    ReplayStep st;
    st.forward = fi;
    st.rows = rows;
    st.width = width;
    st.tokens = fe.tokens();
    st.decode_tokens = fe.decode_tokens();

    // --- stage the forward: page tables, selections, store entries, read positions
    stage_forward(g, fe, f, width, sf);
    st.selected_tokens = sf.selected_tokens;
    const int stride = sf.stride, nb = sf.nb, max_tokens = sf.max_tokens, n_store = sf.n_store();
    const int writes = sf.writes, qlen = sf.qlen;
    const auto& tables = sf.tables;
    const auto& per = sf.per;
    if (!attend) {
      read_pos.assign(static_cast<std::size_t>(L) * rows * max_tokens, -1);
      for (std::size_t k = 0; k < per.size(); ++k)
        std::copy(per[k].begin(), per[k].end(),
                  read_pos.begin() + static_cast<std::int64_t>(k) * max_tokens);
    }

    upload(d_tables, tables, s);
    upload(d_tablelen, sf.tablelen, s);
    if (mirror) {
      // every layer's step stamp (the simulator's), read by that layer's ensure
      for (int l = 0; l < L; ++l)
        steps[static_cast<std::size_t>(l)] = (fi * L + l) * 2 + 1;
      upload(d_steps, steps, s);
    }
    upload(d_rowpos, sf.rowpos, s);
    upload(d_blocks, sf.blocks, s);
    upload(d_query, sf.qinit, s);
    upload(d_store_pages, sf.store_pages, s);
    upload(d_store_tokens, sf.store_tokens, s);
    fit(d_physical, static_cast<std::size_t>(std::max(qlen, rows * width)));
    if (attend) {
      att->stage(sf, s);
    } else {
      upload(d_store_pos, sf.store_pos, s);
      upload(d_read_pos, read_pos, s);
      for (int k = 0; k < layout.banks_per_layer; ++k)
        fit(d_src[k],
            static_cast<std::size_t>(n_store * layout.token_bytes(PageLayout::kind_of(k))));
    }
    KVT_CUDA_CHECK(cudaMemsetAsync(d_counters.get(), 0, sizeof(DeviceCounters), s));
    if (!attend) {
      KVT_CUDA_CHECK(cudaMemsetAsync(d_layer_sums.get(), 0,
                                     layer_sums.size() * sizeof(unsigned long long), s));
    }
    if (engine) engine->reset_counters_async(s);
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));

    // --- the forward on the GPU
    DeviceCounters* dc = d_counters.get();
    auto compact_params = [&](int l) {
      PageId* q = d_query.get() + std::int64_t{l} * qlen;
      return CompactParams{d_blocks.get() + std::int64_t{l} * rows * nb,
                           d_rowpos.get(),
                           d_tables.get(),
                           d_tablelen.get(),
                           q + writes,
                           &dc->dropped,
                           &dc->bad_rows,
                           rows,
                           nb,
                           stride,
                           width,
                           g.compress_ratio,
                           g.page_size};
    };
    // attend, device and host: compaction only counts the drops (the attention reads the
    // token lists directly), so it runs before the timed spans.
    if (attend && !mirror) {
      for (int l = 0; l < L; ++l)
        launch_compact(compact_params(l), s);
    }
    // attend: every layer's K/V and queries first (a stand-in for the model's projections), so
    // that the timed part is the layers' store .. attention back to back
    if (attend) att->generate(s);
    // Attend mode without --verify: the forward's layers are captured into one CUDA graph and
    // launched once, so that the time is the GPU's work, not how fast this thread enqueues a
    // dozen launches per layer (the runner replays its decode steps from graphs as well).
    const bool graphed = attend && !verifier;
    if (graphed) {
      KVT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    } else {
      KVT_CUDA_CHECK(cudaEventRecord(ev_a, s));
    }
    // Mirror, in place: every layer's table before any ensure of the forward (each stays valid
    // until its own layer's ensure), one launch.
    if (at.in_place) {
      engine->locate_async(0, L, d_tables.get(), att->pool_table_entries(), att->pool_tables(0),
                           nullptr, s);
    }
    for (int l = 0; l < L; ++l) {
      PageId* q = d_query.get() + std::int64_t{l} * qlen;
      const std::int64_t step = (fi * L + l) * 2 + 1;  // the simulator's stamps
      if (!attend) {
        FillParams fp{};
        fp.positions = d_store_pos.get();
        for (int k = 0; k < layout.banks_per_layer; ++k)
          fp.dst[k] = d_src[k].get();
        fp.layout = layout;
        fp.layer = l;
        fp.n = n_store;
        launch_fill(fp, s);
        const std::byte* src[4] = {d_src[0].get(), d_src[1].get(), d_src[2].get(), d_src[3].get()};
        if (mirror) {
          engine->store_async(l, d_store_pages.get(), d_store_tokens.get(), src, n_store, s);
        } else {
          StoreParams sp{};
          sp.pages = d_store_pages.get();
          sp.tokens = d_store_tokens.get();
          for (int k = 0; k < layout.banks_per_layer; ++k) {
            const int bk = l * layout.banks_per_layer + k;
            sp.src[k] = src[k];
            sp.host[k] = bank ? bank->device(bk) : nullptr;
            sp.pool[k] = pool ? pool->bank(bk) : nullptr;
          }
          sp.slot_of_page = nullptr;
          sp.bad = &dc->bad_stores;
          sp.layout = layout;
          sp.num_pages = num_pages;
          sp.n = n_store;
          launch_store(sp, s);
        }
      }
      const EnsureHooks hooks{d_steps.get() + l, dc->ensure};
      if (at.in_place) {
        // The table located before the ensure (resident pages to slots, the others in place from
        // the host bank), the store, then the attention while the residency step (compaction,
        // ensure and miss copy on a few blocks) runs beside it: every page of the query reads the
        // same bytes either way, and the ensure changes no slot that the attention reads. A
        // layer's residency may run on beside the next layer's work (another state); the
        // forward ends after the last one. (Joining every step only at the forward's end was
        // slower on the H200: 341 - 343 against 309 us per decode forward, run 7.)
        att->store(l, at, d_tables.get(), s);
        KVT_CUDA_CHECK(cudaEventRecord(ev_fork, s));
        KVT_CUDA_CHECK(cudaStreamWaitEvent(side, ev_fork));
        engine->residency_beside_async(l, compact_params(l), q, qlen, side, hooks);
        KVT_CUDA_CHECK(cudaEventRecord(ev_join[l % 2], side));
        att->attend(l, at, d_tables.get(), s);
        if (l > 0) KVT_CUDA_CHECK(cudaStreamWaitEvent(s, ev_join[(l - 1) % 2]));
        if (l == L - 1) KVT_CUDA_CHECK(cudaStreamWaitEvent(s, ev_join[l % 2]));
        continue;
      }
      if (mirror) {
        // compaction, ensure, miss copy and translate (attend: the rows' page tables, which
        // the attention reads through; checksum: the selections) in one launch
        const TranslateTarget tt =
            attend ? att->pool_table_target(d_tables.get(), l)
                   : TranslateTarget{q + writes, d_physical.get(), rows * width, dummy_slot(slots)};
        engine->residency_step_async(l, compact_params(l), q, qlen, tt, s, hooks);
        if (verifier) {
          KVT_CUDA_CHECK(cudaStreamSynchronize(s));
          verifier->check_layer(fe, f, l, width, fi, step, q, qlen, *engine, res, cfg.decisions);
        }
      }
      if (!mirror && !attend) launch_compact(compact_params(l), s);
      if (attend) {
        att->store(l, at, d_tables.get(), s);
        att->attend(l, at, d_tables.get(), s);
      } else {
        ReadParams rp{};
        rp.positions = d_read_pos.get() + std::int64_t{l} * rows * max_tokens;
        rp.tables = d_tables.get();
        rp.table_len = d_tablelen.get();
        rp.missing = &dc->missing;
        rp.checksum = d_layer_sums.get() + l;
        rp.layout = layout;
        rp.layer = l;
        rp.rows = rows;
        rp.max_tokens = max_tokens;
        rp.table_stride = stride;
        rp.num_pages = num_pages;
        if (mirror) {
          rp.banks = engine->pool().device_bank_table();
          rp.slot_of_page = engine->device_view(l).slot_of_page;
          rp.dummy = dummy_slot(slots);
        } else if (device) {
          rp.banks = pool->device_bank_table();
          rp.slot_of_page = nullptr;
          rp.dummy = num_pages;
        } else {
          rp.banks = bank->device_bank_table();
          rp.slot_of_page = nullptr;
          rp.dummy = dummy_page(num_pages);
        }
        launch_read(rp, s);
      }
    }
    cudaGraphExec_t exec = nullptr;
    if (graphed) {
      cudaGraph_t graph = nullptr;
      KVT_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
      KVT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      KVT_CUDA_CHECK(cudaGraphDestroy(graph));
      KVT_CUDA_CHECK(cudaGraphUpload(exec, s));  // the upload is not the forward's work
      KVT_CUDA_CHECK(cudaEventRecord(ev_a, s));
      KVT_CUDA_CHECK(cudaGraphLaunch(exec, s));
    }
    KVT_CUDA_CHECK(cudaEventRecord(ev_b, s));
    if (attend) {
      // After the timed spans: every layer's state is as its ensure left it (one ensure per
      // layer and forward), so translating the whole query (write pages + selection) now
      // counts the pages the layer needed but did not hold.
      if (mirror) {
        for (int l = 0; l < L; ++l)
          engine->translate_async(l, d_query.get() + std::int64_t{l} * qlen, qlen, d_physical.get(),
                                  s);
      }
      att->digest(s);
    }
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    if (exec != nullptr) KVT_CUDA_CHECK(cudaGraphExecDestroy(exec));
    {
      float ms = 0;
      KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_a, ev_b));
      st.gpu_us = static_cast<double>(ms) * 1000.0;
    }
    DeviceCounters c{};
    KVT_CUDA_CHECK(cudaMemcpy(&c, dc, sizeof c, cudaMemcpyDeviceToHost));
    if (engine) {
      const MirrorEngine::Counters ec = engine->read_counters();
      if (ec.ensure_errors != 0) {
        EnsureResult r;
        KVT_CUDA_CHECK(cudaMemcpy(&r, engine->result(), sizeof r, cudaMemcpyDeviceToHost));
        throw CapacityError("forward " + std::to_string(fi) + ": the pool of " +
                            std::to_string(cfg.pool_pages) + " slots cannot take " +
                            std::to_string(r.misses) + " new pages (" +
                            std::to_string(r.evictable) + " evictable)");
      }
      st.missing += ec.missing;  // translate: selected pages not resident after ensure
      c.bad_stores += ec.bad_stores;
    }
    if (c.bad_rows != 0 || c.bad_stores != 0)
      throw std::runtime_error("forward " + std::to_string(fi) + ": " + std::to_string(c.bad_rows) +
                               " rows failed compaction, " + std::to_string(c.bad_stores) +
                               " stores outside the space");
    st.hits = c.ensure[0];
    st.misses = c.ensure[1];
    st.evictions = c.ensure[2];
    st.drops = c.dropped;
    st.missing += c.missing;
    const std::int64_t stored = std::int64_t{n_store} * token_bytes * L;
    st.d2h_bytes = device && !cfg.write_through ? 0 : stored;
    st.h2d_bytes = mirror ? st.misses * layout.layer_page_bytes()
                   : host ? st.selected_tokens * token_bytes
                          : 0;
    if (!attend) {
      KVT_CUDA_CHECK(cudaMemcpy(layer_sums.data(), d_layer_sums.get(),
                                layer_sums.size() * sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost));
      for (int l = 0; l < L; ++l)
        res.checksum += layer_sums[static_cast<std::size_t>(l)];  // wraps like the device sum
    }
    if (contents) {
      contents->record_stores(sf);
      for (int l = 0; l < L; ++l) {
        const unsigned long long sum = contents->expected(layout, l, sf);
        res.expected_checksum += sum;
        if (sum != layer_sums[static_cast<std::size_t>(l)] && res.checksum_mismatches++ == 0)
          res.first_checksum_mismatch = "forward " + std::to_string(fi) + " layer " +
                                        std::to_string(l) + " (" + std::to_string(rows) +
                                        " rows, " + std::to_string(st.drops) + " dropped pages, " +
                                        std::to_string(st.evictions) + " evictions)";
      }
    }
    res.steps.push_back(st);
    ++fi;
    if (cfg.on_forward) cfg.on_forward(fi, total_forwards);
  }
  if (attend) res.checksum = att->checksum();
  att.reset();
  KVT_CUDA_CHECK(cudaEventDestroy(ev_a));
  KVT_CUDA_CHECK(cudaEventDestroy(ev_b));
  KVT_CUDA_CHECK(cudaEventDestroy(ev_fork));
  for (cudaEvent_t e : ev_join)
    KVT_CUDA_CHECK(cudaEventDestroy(e));
  KVT_CUDA_CHECK(cudaStreamDestroy(side));
  KVT_CUDA_CHECK(cudaStreamDestroy(s));
  ReplayStep& t = res.total;
  t.forward = fi;
  for (const ReplayStep& x : res.steps) {
    t.rows += x.rows;
    t.width = t.width == 0 ? x.width : std::min(t.width, x.width);
    t.tokens += x.tokens;
    t.decode_tokens += x.decode_tokens;
    t.gpu_us += x.gpu_us;
    t.hits += x.hits;
    t.misses += x.misses;
    t.evictions += x.evictions;
    t.drops += x.drops;
    t.missing += x.missing;
    t.selected_tokens += x.selected_tokens;
    t.h2d_bytes += x.h2d_bytes;
    t.d2h_bytes += x.d2h_bytes;
  }
  return res;
}

}  // namespace kvtier::cuda
