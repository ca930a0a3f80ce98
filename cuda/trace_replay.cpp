#include "cuda/trace_replay.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/engine.hpp"
#include "cuda/host_bank.hpp"
#include "cuda/kv_banks.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
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
  const bool forced = qsa::attend_variant() != qsa::AttendVariant::automatic;
  std::string name;
  switch (qsa::attend_bf16_kernel(host_banks)) {
    case qsa::AttendVariant::mma_load:
      name = "mma_load (tensor cores, register gather)";
      break;
    case qsa::AttendVariant::mma_async_v1:
      name = "mma_async_v1 (tensor cores, cp.async gather, page lookups per tile)";
      break;
    case qsa::AttendVariant::simt:
      name = "simt (SIMT fp32)";
      break;
    default:
      name = "mma_async (tensor cores, cp.async gather)";
      break;
  }
  return forced ? name + ", forced by KVTIER_QSA_ATTEND" : name;
}

namespace {

template <class T>
void fit(DeviceArray<T>& a, std::size_t n) {
  if (a.size() < n || a.get() == nullptr) a = DeviceArray<T>(std::max<std::size_t>(n, 1) * 2);
}

template <class T>
void upload(DeviceArray<T>& d, const std::vector<T>& v, cudaStream_t s) {
  fit(d, v.size());
  if (!v.empty())
    KVT_CUDA_CHECK(
        cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

// Step counters the device accumulates: hits, misses, evictions, then int counters.
struct DeviceCounters {
  long long ensure[3];
  int dropped;
  int bad_rows;
  int missing;
  int bad_stores;
};

// --- attend mode -----------------------------------------------------------------------
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
  DeviceArray<DeviceCounters> d_counters(1);
  // checksum mode: one sum per layer and forward, so that verify names where bytes differ;
  // attend mode: the digest, accumulated over the whole replay
  DeviceArray<unsigned long long> d_checksum(1);
  KVT_CUDA_CHECK(cudaMemset(d_checksum.get(), 0, sizeof(unsigned long long)));
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

  // --- attend mode: patterns, gather layouts, per-layer events
  const int qh = g.q_heads;
  const std::int64_t q_row = std::int64_t{qh} * qsa::kHeadDim;  // elements of one query row
  const std::int64_t kv_row = std::int64_t{g.kv_heads} * qsa::kHeadDim;
  // One-token "pages": K/V rows [kv_heads][256]; a query row as two halves (K and V banks of
  // a layout of q_heads / 2 heads, written to slots 2r of q and q + half a row).
  const PageLayout kv_gather = PageLayout::make(1, 1, g.kv_heads, g.head_dim, false);
  const PageLayout q_gather = PageLayout::make(1, 1, qh / 2, g.head_dim, false);
  // The digest reads every output row [q_heads][256] fp32 as one "token" of a layout of
  // 2 * q_heads bf16-sized heads (both banks point at the outputs: each row is read twice).
  const PageLayout digest_layout = PageLayout::make(1, 1, 2 * qh, g.head_dim, false);
  DeviceArray<std::uint16_t> d_pat_k, d_pat_v, d_pat_q0, d_pat_q1;
  DeviceArray<std::byte*> d_gen_ptrs(8);  // kv src[2], kv dst[2], q src[2], q dst[2]
  DeviceArray<CopyOp> d_gen_kv, d_gen_q;
  DeviceArray<int> d_ints(4);  // [0] K/V rows, [1] query rows, [2] scratch counter
  DeviceArray<std::int32_t> d_store_req, d_store_pos32, d_row_req, d_rowpos32, d_tokens32;
  DeviceArray<SlotId> d_slot_tables;
  DeviceArray<std::uint16_t> d_stage_k, d_stage_v, d_q;
  DeviceArray<float> d_work, d_o;
  DeviceArray<std::int64_t> d_digest_pos, d_digest_len;
  DeviceArray<PageId> d_digest_table;
  DeviceArray<std::byte*> d_digest_banks(2);
  std::vector<cudaEvent_t> ev_layer;
  if (attend) {
    const auto kv_elems = static_cast<std::size_t>(kKvPatternTokens * kv_row);
    const auto q_elems = static_cast<std::size_t>(kQueryPatternRows * q_row / 2);
    const std::vector<std::uint16_t> pk = bf16_pattern(kv_elems, 1), pv = bf16_pattern(kv_elems, 2),
                                     pq0 = bf16_pattern(q_elems, 3), pq1 = bf16_pattern(q_elems, 4);
    upload(d_pat_k, pk, s);
    upload(d_pat_v, pv, s);
    upload(d_pat_q0, pq0, s);
    upload(d_pat_q1, pq1, s);
    ev_layer.resize(static_cast<std::size_t>(2 * L));
    for (auto& e : ev_layer)
      KVT_CUDA_CHECK(cudaEventCreate(&e));
  }

  sim::FrontEnd fe(g, num_pages);
  const std::int64_t total_forwards =
      cfg.max_forwards >= 0 ? std::min(cfg.max_forwards, stats.forwards) : stats.forwards;
  auto stream = input.open();
  traces::Record rec;
  std::int64_t fi = 0;
  // host staging
  StagedForward sf;
  std::vector<std::int64_t> read_pos;
  // attend staging
  std::vector<std::int32_t> store_pos32, row_req, rowpos32, tokens32;
  std::vector<CopyOp> gen_kv, gen_q;
  std::vector<std::int64_t> digest_pos;
  std::vector<PageId> digest_table;

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
    const auto& rowpos = sf.rowpos;
    const auto& store_pos = sf.store_pos;
    const auto& store_pages = sf.store_pages;
    const auto& store_tokens = sf.store_tokens;
    const auto& per = sf.per;
    if (attend) {
      tokens32.assign(static_cast<std::size_t>(L) * rows * max_tokens, -1);
      for (std::size_t k = 0; k < per.size(); ++k)
        std::transform(per[k].begin(), per[k].end(),
                       tokens32.begin() + static_cast<std::int64_t>(k) * max_tokens,
                       [](std::int64_t p) { return static_cast<std::int32_t>(p); });
    } else {
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
    upload(d_rowpos, rowpos, s);
    upload(d_blocks, sf.blocks, s);
    upload(d_query, sf.qinit, s);
    upload(d_store_pages, store_pages, s);
    upload(d_store_tokens, store_tokens, s);
    fit(d_physical, static_cast<std::size_t>(std::max(qlen, rows * width)));
    int splits = 1;
    if (attend) {
      store_pos32.assign(store_pos.begin(), store_pos.end());
      rowpos32.assign(rowpos.begin(), rowpos.end());
      row_req.resize(static_cast<std::size_t>(rows));
      for (int r = 0; r < rows; ++r)
        row_req[r] = r;
      gen_kv.resize(static_cast<std::size_t>(L) * n_store);
      gen_q.resize(static_cast<std::size_t>(L) * rows);
      for (int l = 0; l < L; ++l) {
        for (int i = 0; i < n_store; ++i)
          gen_kv[static_cast<std::size_t>(l) * n_store + i] = {
              pattern_row(store_pos[i], l, 0, kKvPatternTokens), i, kNoPage};
        for (int r = 0; r < rows; ++r)
          gen_q[static_cast<std::size_t>(l) * rows + r] = {
              pattern_row(rowpos[r], l, 1, kQueryPatternRows), 2 * r, kNoPage};
      }
      const int n_out = L * rows;
      digest_pos.resize(static_cast<std::size_t>(n_out));
      digest_table.resize(static_cast<std::size_t>(n_out));
      for (int i = 0; i < n_out; ++i) {
        digest_pos[i] = i;
        digest_table[i] = i;
      }
      upload(d_store_req, sf.store_req, s);
      upload(d_store_pos32, store_pos32, s);
      upload(d_row_req, row_req, s);
      upload(d_rowpos32, rowpos32, s);
      upload(d_tokens32, tokens32, s);
      upload(d_gen_kv, gen_kv, s);
      upload(d_gen_q, gen_q, s);
      upload(d_digest_pos, digest_pos, s);
      upload(d_digest_table, digest_table, s);
      upload(d_digest_len, std::vector<std::int64_t>{n_out}, s);
      fit(d_slot_tables, static_cast<std::size_t>(rows) * stride);
      fit(d_stage_k, static_cast<std::size_t>(n_store * kv_row));
      fit(d_stage_v, static_cast<std::size_t>(n_store * kv_row));
      fit(d_q, static_cast<std::size_t>(rows * q_row));
      fit(d_o, static_cast<std::size_t>(n_out * q_row));
      splits = qsa::attend_default_splits(rows, g.kv_heads, max_tokens);
      fit(d_work, static_cast<std::size_t>(qsa::attend_workspace_floats(rows, qh, splits)));
      const std::vector<std::byte*> ptrs{reinterpret_cast<std::byte*>(d_pat_k.get()),
                                         reinterpret_cast<std::byte*>(d_pat_v.get()),
                                         reinterpret_cast<std::byte*>(d_stage_k.get()),
                                         reinterpret_cast<std::byte*>(d_stage_v.get()),
                                         reinterpret_cast<std::byte*>(d_pat_q0.get()),
                                         reinterpret_cast<std::byte*>(d_pat_q1.get()),
                                         reinterpret_cast<std::byte*>(d_q.get()),
                                         reinterpret_cast<std::byte*>(d_q.get() + q_row / 2)};
      upload(d_gen_ptrs, ptrs, s);
      const std::vector<std::byte*> dig{reinterpret_cast<std::byte*>(d_o.get()),
                                        reinterpret_cast<std::byte*>(d_o.get())};
      upload(d_digest_banks, dig, s);
      upload(d_ints, std::vector<int>{n_store, rows, 0, 0}, s);
    } else {
      upload(d_store_pos, store_pos, s);
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
    auto compact_layer = [&](int l) {
      PageId* q = d_query.get() + std::int64_t{l} * qlen;
      CompactParams cp{d_blocks.get() + std::int64_t{l} * rows * nb,
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
      launch_compact(cp, s);
    };
    // attend, device and host: compaction only counts the drops (the attention reads the
    // token lists directly), so it runs before the timed spans.
    if (attend && !mirror) {
      for (int l = 0; l < L; ++l)
        compact_layer(l);
    }
    if (!attend) KVT_CUDA_CHECK(cudaEventRecord(ev_a, s));
    for (int l = 0; l < L; ++l) {
      PageId* q = d_query.get() + std::int64_t{l} * qlen;
      const std::int64_t step = (fi * L + l) * 2 + 1;  // the simulator's stamps
      const qsa::PageTable logical_table{d_tables.get(), stride, 0};
      const qsa::Rows store_rows{d_store_req.get(), d_store_pos32.get(), n_store};
      if (attend) {
        // generation (outside the timed span): K/V of the new tokens, the rows' queries
        CopyParams gp{d_gen_kv.get() + std::int64_t{l} * n_store,
                      d_ints.get(),
                      d_gen_ptrs.get(),
                      d_gen_ptrs.get() + 2,
                      kv_gather,
                      0,
                      1};
        launch_copy(gp, s);
        CopyParams gq{d_gen_q.get() + std::int64_t{l} * rows,
                      d_ints.get() + 1,
                      d_gen_ptrs.get() + 4,
                      d_gen_ptrs.get() + 6,
                      q_gather,
                      0,
                      1};
        launch_copy(gq, s);
        KVT_CUDA_CHECK(cudaEventRecord(ev_layer[static_cast<std::size_t>(2 * l)], s));
      } else {
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
      if (mirror || !attend) compact_layer(l);
      if (mirror) {
        engine->ensure_async(l, q, qlen, s, {d_steps.get() + l, dc->ensure});
        if (!attend) engine->translate_async(l, q + writes, rows * width, d_physical.get(), s);
        if (verifier) {
          KVT_CUDA_CHECK(cudaStreamSynchronize(s));
          verifier->check_layer(fe, f, l, width, fi, step, q, qlen, *engine, res, cfg.decisions);
        }
      }
      if (attend) {
        const qsa::Rows att_rows{d_row_req.get(), d_rowpos32.get(), rows};
        const std::int32_t* tokens = d_tokens32.get() + std::int64_t{l} * rows * max_tokens;
        float* o = d_o.get() + std::int64_t{l} * rows * q_row;
        qsa::KvBanks kv;
        qsa::PageTable table = logical_table;
        if (mirror) {
          // the rows' tables through the pool: slot per resident logical page, -1 otherwise
          // (never written, read as the zero dummy slot); the scratch counter counts table
          // entries that are not resident, most of which no row reads.
          TranslateParams tp{
              d_tables.get(),   d_slot_tables.get(), engine->device_view(l).slot_of_page,
              d_ints.get() + 2, num_pages,           kNoSlot,
              rows * stride};
          launch_translate(tp, s);
          kv = layer_kv_banks(layout, l, pool_banks.data(), false);
          table = {d_slot_tables.get(), stride, dummy_slot(slots)};
          const qsa::KvBanks mirror_kv = layer_kv_banks(layout, l, host_banks.data(), true);
          qsa::store_kv(d_stage_k.get(), d_stage_v.get(), store_rows, kv, table, mirror_kv,
                        logical_table, s);
        } else if (device) {
          kv = layer_kv_banks(layout, l, pool_banks.data(), false);
          table.dummy = num_pages;
          const qsa::KvBanks wt = cfg.write_through
                                      ? layer_kv_banks(layout, l, host_banks.data(), true)
                                      : qsa::KvBanks{};
          qsa::store_kv(d_stage_k.get(), d_stage_v.get(), store_rows, kv, table, wt, logical_table,
                        s);
        } else {
          kv = layer_kv_banks(layout, l, host_banks.data(), true);
          table.dummy = dummy_page(num_pages);
          qsa::store_kv(d_stage_k.get(), d_stage_v.get(), store_rows, kv, table, qsa::KvBanks{},
                        qsa::PageTable{}, s);
        }
        qsa::attend(d_q.get(), qh, att_rows, tokens, max_tokens, kv, table, splits, d_work.get(), o,
                    nullptr, s);
        KVT_CUDA_CHECK(cudaEventRecord(ev_layer[static_cast<std::size_t>(2 * l + 1)], s));
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
    if (attend) {
      // After the timed spans: every layer's state is as its ensure left it (one ensure per
      // layer and forward), so translating the whole query (write pages + selection) now
      // counts the pages the layer needed but did not hold.
      if (mirror) {
        for (int l = 0; l < L; ++l)
          engine->translate_async(l, d_query.get() + std::int64_t{l} * qlen, qlen, d_physical.get(),
                                  s);
      }
      ReadParams dp{};
      dp.positions = d_digest_pos.get();
      dp.tables = d_digest_table.get();
      dp.table_len = d_digest_len.get();
      dp.banks = d_digest_banks.get();
      dp.slot_of_page = nullptr;
      dp.missing = d_ints.get() + 3;
      dp.checksum = d_checksum.get();
      dp.layout = digest_layout;
      dp.layer = 0;
      dp.rows = 1;
      dp.max_tokens = L * rows;
      dp.table_stride = 0;
      dp.num_pages = L * rows;
      dp.dummy = 0;
      launch_read(dp, s);
    } else {
      KVT_CUDA_CHECK(cudaEventRecord(ev_b, s));
    }
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    if (attend) {
      double us = 0;
      for (int l = 0; l < L; ++l) {
        float ms = 0;
        KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_layer[static_cast<std::size_t>(2 * l)],
                                            ev_layer[static_cast<std::size_t>(2 * l + 1)]));
        us += static_cast<double>(ms) * 1000.0;
      }
      st.gpu_us = us;
    } else {
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
  if (attend) {
    KVT_CUDA_CHECK(
        cudaMemcpy(&res.checksum, d_checksum.get(), sizeof res.checksum, cudaMemcpyDeviceToHost));
  }
  for (auto& e : ev_layer)
    KVT_CUDA_CHECK(cudaEventDestroy(e));
  KVT_CUDA_CHECK(cudaEventDestroy(ev_a));
  KVT_CUDA_CHECK(cudaEventDestroy(ev_b));
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
