// The attention (qsa::attend) over device banks (attention, bf16 and fp8) and over mapped host
// banks (zero_copy_read, attention_fp8_host: the host placement's in-place read), the checksum
// gather of device pages (hbm_read), and the store of new tokens (qsa::store_kv: store, store_fp8)
// into the pool, the host bank, or both. Attention rows are decode rows, one request each, reading
// `tokens` selected positions (4-token blocks + the causal tail) of a context whose pages are
// scattered over the bank.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/kernels.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "model/attend_grid.hpp"
#include "model/page_space.hpp"

namespace kvtier::calibrate {
namespace {

constexpr int kStoreRequests = 16;  // the store's rows spread over at most this many requests

// For one count of selected tokens per row: every call's rows' page tables and positions
// ([calls][rows][...]: call c reads its own tables and tokens).
struct Selections {
  int tokens = 0;
  cuda::DeviceArray<std::int32_t> tables;     // [calls][rows][context_pages]
  cuda::DeviceArray<std::int32_t> positions;  // [calls][rows][tokens] (qsa::attend)
  cuda::DeviceArray<std::int64_t> wide;       // the same, 64-bit (launch_read)
};

// What every sweep of the group reads: the selections and the rows' buffers.
struct AttendInputs {
  int max_rows = 0, calls = 0, context_pages = 0;
  std::vector<Selections> sel;
  cuda::DeviceArray<std::int32_t> req, pos;  // [max_rows]: request r, position context - 1
  cuda::DeviceArray<std::int64_t> table_len;
  cuda::DeviceArray<std::uint16_t> q;  // [max_rows][24][256]
  cuda::DeviceArray<float> work, o;

  const Selections& at(int tokens) const {
    for (const auto& s : sel)
      if (s.tokens == tokens) return s;
    throw std::logic_error("calibration: no selections of " + std::to_string(tokens) + " tokens");
  }
  const std::int32_t* table(const Selections& s, int call) const {
    return s.tables.get() + std::int64_t{call} * max_rows * context_pages;
  }
  const std::int32_t* tokens(const Selections& s, int call) const {
    return s.positions.get() + std::int64_t{call} * max_rows * s.tokens;
  }
};

AttendInputs make_inputs(Bench& b) {
  const CalibrationGrid& g = b.grid;
  AttendInputs r;
  r.max_rows = *std::max_element(g.attend_rows.begin(), g.attend_rows.end());
  r.calls = g.max_calls;
  r.context_pages = g.context_pages;
  const std::int64_t context = std::int64_t{g.context_pages} * 64;
  std::int64_t work = 1;
  for (const int tokens : g.attend_tokens) {
    std::vector<std::int32_t> pos;
    for (int i = 0; i < r.calls * r.max_rows; ++i) {
      const std::vector<std::int32_t> p = decode_positions(b.rng, context, tokens);
      pos.insert(pos.end(), p.begin(), p.end());
    }
    Selections s;
    s.tokens = tokens;
    s.tables =
        to_device(scattered_tables(b.rng, r.calls * r.max_rows, g.context_pages, g.bank_pages));
    s.positions = to_device(pos);
    s.wide = to_device(std::vector<std::int64_t>(pos.begin(), pos.end()));
    r.sel.push_back(std::move(s));
    for (const int rows : g.attend_rows)
      work = std::max(work, qsa::attend_workspace_floats(
                                rows, kQHeads, qsa::attend_default_splits(rows, kKvHeads, tokens)));
  }
  std::vector<std::int32_t> req(static_cast<std::size_t>(r.max_rows));
  for (int i = 0; i < r.max_rows; ++i)
    req[static_cast<std::size_t>(i)] = i;
  r.req = to_device(req);
  r.pos = to_device(std::vector<std::int32_t>(static_cast<std::size_t>(r.max_rows),
                                              static_cast<std::int32_t>(context - 1)));
  r.table_len =
      to_device(std::vector<std::int64_t>(static_cast<std::size_t>(r.max_rows), g.context_pages));
  const std::size_t q_elems = static_cast<std::size_t>(r.max_rows) * kQHeads * qsa::kHeadDim;
  r.q = cuda::DeviceArray<std::uint16_t>(q_elems);
  b.filler.fill(r.q.get(), r.q.bytes(), Pattern::bf16, b.stream());
  r.work = cuda::DeviceArray<float>(static_cast<std::size_t>(work));
  r.o = cuda::DeviceArray<float>(q_elems);
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  return r;
}

// One attend point's inputs by the names its series takes: the bytes of KV it reads
// ("hbm_bytes", or "bytes" for the in-place read), its CTAs and its rows.
std::vector<double> attend_point(const Series& s, int rows, int tokens, int splits,
                                 std::int64_t token_bytes, double us) {
  std::vector<double> pt;
  for (const std::string& in : s.inputs) {
    if (in == "hbm_bytes" || in == "bytes") {
      pt.push_back(static_cast<double>(std::int64_t{rows} * tokens * token_bytes));
    } else if (in == "ctas") {
      pt.push_back(static_cast<double>(std::int64_t{rows} * kKvHeads * splits));
    } else if (in == "rows") {
      pt.push_back(rows);
    } else {
      throw std::logic_error("calibration: the attend sweep has no input '" + in + "'");
    }
  }
  pt.push_back(us);
  return pt;
}

// qsa::attend over rows x tokens for every point of the grid, at the split count the backend
// launches with (qsa::attend_default_splits: the CTAs the cost model prices).
void attend_sweep(Bench& b, const AttendInputs& r, const qsa::KvBanks& kv, std::int32_t dummy,
                  std::int64_t token_bytes, Series& s) {
  for (const int rows : b.grid.attend_rows) {
    for (const int tokens : b.grid.attend_tokens) {
      if (stop_sweep(b, s)) return;
      const Selections& sel = r.at(tokens);
      const int splits = qsa::attend_default_splits(rows, kKvHeads, tokens);
      const double us = b.kernel_us(
          [&](int call, cudaStream_t st) {
            const qsa::PageTable pt{r.table(sel, call), r.context_pages, dummy};
            qsa::attend(r.q.get(), kQHeads, qsa::Rows{r.req.get(), r.pos.get(), rows},
                        r.tokens(sel, call), tokens, kv, pt, splits, r.work.get(), r.o.get(),
                        nullptr, st);
          },
          {}, r.calls);
      s.points.push_back(attend_point(s, rows, tokens, splits, token_bytes, us));
    }
  }
}

// Every call's token lists ([calls][rows][wide]): row 0 of `wide` selected positions, the
// others of `narrow`, padded with -1 to the wide row's length (as the trace replay pads its rows).
cuda::DeviceArray<std::int32_t> padded_positions(Bench& b, const AttendInputs& r, int rows,
                                                 int wide, int narrow) {
  const std::int64_t context = std::int64_t{r.context_pages} * 64;
  std::vector<std::int32_t> pos;
  pos.reserve(static_cast<std::size_t>(r.calls) * rows * wide);
  for (int i = 0; i < r.calls * rows; ++i) {
    std::vector<std::int32_t> p = decode_positions(b.rng, context, i % rows == 0 ? wide : narrow);
    p.resize(static_cast<std::size_t>(wide), -1);
    pos.insert(pos.end(), p.begin(), p.end());
  }
  return to_device(pos);
}

// The attend of one wide row beside narrow ones: a prefill chunk's last query beside decode rows,
// as the trace replay's mixed forwards attend. Its CTAs run in one wave, each over about
// wide / splits of its row's tokens (the narrow rows' lists padded to the wide one's), and a CTA
// gathers its tiles one after another: the wide row's CTAs set the kernel's span, however few
// bytes the others add (H200, 2026-12-03: r8's mixed forwards took 36 us a layer whether their
// rows read 27 or 57 MB). x = the tokens of the widest CTA, ceil(wide / splits). The series (bf16:
// attention_span; fp8: none, `s` null) takes the points of kSpanBoundRows rows or more with the
// first of span_narrow_tokens, where the wide row's CTAs bound the attend (with fewer rows its
// CTAs are short and the bytes do: the attention series); `shape` every point, with its shape.
void span_sweep(Bench& b, const AttendInputs& r, const qsa::KvBanks& kv, std::int32_t dummy,
                std::int64_t token_bytes, Series* s, Series& shape) {
  const CalibrationGrid& g = b.grid;
  for (const int narrow : g.span_narrow_tokens) {
    for (const int rows : g.span_rows) {
      if (rows > r.max_rows) continue;
      for (const int wide : g.span_tokens) {
        if (stop_sweep(b, shape)) return;
        const auto d_pos = padded_positions(b, r, rows, wide, narrow);
        const int splits = qsa::attend_default_splits(rows, kKvHeads, wide);
        const cuda::DeviceArray<float> work(
            static_cast<std::size_t>(qsa::attend_workspace_floats(rows, kQHeads, splits)));
        const double us = b.kernel_us(
            [&](int call, cudaStream_t st) {
              const qsa::PageTable pt{r.table(r.sel.front(), call), r.context_pages, dummy};
              qsa::attend(r.q.get(), kQHeads, qsa::Rows{r.req.get(), r.pos.get(), rows},
                          d_pos.get() + std::int64_t{call} * rows * wide, wide, kv, pt, splits,
                          work.get(), r.o.get(), nullptr, st);
            },
            {}, r.calls);
        const double cta_tokens = attend_chunk(wide, splits);
        if (s != nullptr && rows >= kSpanBoundRows && narrow == g.span_narrow_tokens.front())
          s->points.push_back({cta_tokens, us});
        shape.points.push_back(
            {static_cast<double>(rows), static_cast<double>(wide), static_cast<double>(narrow),
             static_cast<double>((wide + std::int64_t{rows - 1} * narrow) * token_bytes),
             static_cast<double>(std::int64_t{rows} * kKvHeads * splits), cta_tokens, us});
      }
    }
  }
}

// Decode attends whose pages the same layer read one forward before (a decode row's selection
// barely moves from one step to the next): a graph of `layers` attends, each over its own
// selection, then the same attends again (the next forward), from a cold L2 cache. Per attend,
// the second pass takes warm = (t(2 layers) - t(layers)) / layers; the working set is layers x
// rows x 2,051 tokens x token bytes. The fitter sets one decode row's saving against the
// attention fit's price of the same attend (hbm_bytes, ctas, cta_tokens): whether the next
// forward finds its pages in L2 decides what a decode's attend costs when a forward's
// selections fit it (attention_l2_reuse_*).
void warm_sweep(Bench& b, const AttendInputs& r, const qsa::KvBanks& kv, std::int32_t dummy,
                std::int64_t token_bytes, Series& s) {
  constexpr int kTokens = 2051;
  const Selections& sel = r.at(kTokens);
  for (const int rows : b.grid.warm_rows) {
    for (const int layers : b.grid.warm_layers) {
      if (rows > r.max_rows || layers > r.calls) continue;
      if (stop_sweep(b, s)) return;
      const int splits = qsa::attend_default_splits(rows, kKvHeads, kTokens);
      auto layer = [&](int call, cudaStream_t st) {
        const int c = call % layers;
        const qsa::PageTable pt{r.table(sel, c), r.context_pages, dummy};
        qsa::attend(r.q.get(), kQHeads, qsa::Rows{r.req.get(), r.pos.get(), rows}, r.tokens(sel, c),
                    kTokens, kv, pt, splits, r.work.get(), r.o.get(), nullptr, st);
      };
      const double one = b.timer.graph_us(layers, layer) * layers;
      const double two = b.timer.graph_us(2 * layers, layer) * 2 * layers;
      const std::int64_t bytes = std::int64_t{rows} * kTokens * token_bytes;
      s.points.push_back({static_cast<double>(rows), static_cast<double>(layers),
                          static_cast<double>(layers * bytes), static_cast<double>(bytes),
                          static_cast<double>(std::int64_t{rows} * kKvHeads * splits),
                          static_cast<double>(attend_chunk(kTokens, splits)),
                          (two - one) / layers});
    }
  }
}

// launch_read (the trace replay's checksum read) of the same selections from a device pool.
void read_sweep(Bench& b, const AttendInputs& r, const cuda::DevicePool& pool, Series& s) {
  const cuda::DeviceArray<int> missing(1);
  const cuda::DeviceArray<unsigned long long> checksum(1);
  const PageLayout& l = pool.layout();
  for (const int rows : b.grid.attend_rows) {
    for (const int tokens : b.grid.attend_tokens) {
      if (stop_sweep(b, s)) return;
      const Selections& sel = r.at(tokens);
      const double us = b.kernel_us(
          [&](int call, cudaStream_t st) {
            cuda::ReadParams rp{};
            rp.positions = sel.wide.get() + std::int64_t{call} * r.max_rows * tokens;
            rp.tables = r.table(sel, call);
            rp.table_len = r.table_len.get();
            rp.banks = pool.device_bank_table();
            rp.slot_of_page = nullptr;  // device placement: slot = page
            rp.missing = missing.get();
            rp.checksum = checksum.get();
            rp.layout = l;
            rp.layer = 0;
            rp.rows = rows;
            rp.max_tokens = tokens;
            rp.table_stride = r.context_pages;
            rp.num_pages = pool.num_slots();
            rp.dummy = dummy_slot(pool.num_slots());
            cuda::launch_read(rp, st);
          },
          {}, r.calls);
      s.points.push_back(
          {static_cast<double>(std::int64_t{rows} * tokens * layer_token_bytes(l)), us});
    }
  }
}

// The store's inputs for up to max_n tokens a call: distinct pages for every request of every
// call (no two rows write the same token) as far as the pool holds them, the staged K/V, and the
// banks of the pool and the host bank. The largest stores (a prefill chunk of 32 requests writes
// 256 MiB a layer) need more pages over a graph's calls than the pool has: those calls write
// pages an earlier call wrote, long evicted from the L2 by then.
struct StoreInputs {
  int pages_per_request = 0;
  cuda::DeviceArray<std::int32_t> tables;
  cuda::DeviceArray<std::uint16_t> k, v;
  qsa::KvBanks pool_kv, host_kv;
  std::int32_t pool_dummy = 0, host_dummy = 0;
};

StoreInputs make_store_inputs(Bench& b, const cuda::DevicePool& pool, const cuda::HostBank& host,
                              int max_n) {
  const PageLayout& l = pool.layout();
  StoreInputs in;
  in.pages_per_request = (max_n / kStoreRequests + l.page_size - 1) / l.page_size + 1;
  const std::int64_t need = std::int64_t{b.grid.max_calls} * kStoreRequests * in.pages_per_request;
  const auto distinct = static_cast<int>(std::min<std::int64_t>(need, pool.num_slots()));
  std::vector<std::int32_t> tables = scattered_tables(b.rng, 1, distinct, pool.num_slots());
  tables.reserve(static_cast<std::size_t>(need));
  for (std::int64_t i = distinct; i < need; ++i)
    tables.push_back(tables[static_cast<std::size_t>(i % distinct)]);
  in.tables = to_device(tables);
  const std::size_t kv_elems = static_cast<std::size_t>(max_n) * kKvHeads * qsa::kHeadDim;
  in.k = cuda::DeviceArray<std::uint16_t>(kv_elems);
  in.v = cuda::DeviceArray<std::uint16_t>(kv_elems);
  b.filler.fill(in.k.get(), in.k.bytes(), Pattern::bf16, b.stream());
  b.filler.fill(in.v.get(), in.v.bytes(), Pattern::bf16, b.stream());
  in.pool_kv = layer_banks(pool);
  in.host_kv = layer_banks(host);
  in.pool_dummy = dummy_slot(pool.num_slots());
  in.host_dummy = dummy_page(host.num_pages());
  return in;
}

// The rows of a store of n tokens: decode rows for n <= 16, else prefill chunks of 16 requests.
struct StoreRows {
  cuda::DeviceArray<std::int32_t> req, pos;
  int n = 0;
};
StoreRows store_rows(int n) {
  const int requests = std::min(n, kStoreRequests);
  std::vector<std::int32_t> req, pos;
  const std::vector<int> per = spread(n, requests);
  for (int j = 0; j < requests; ++j)
    for (int t = 0; t < per[static_cast<std::size_t>(j)]; ++t) {
      req.push_back(j);
      pos.push_back(t);
    }
  return {to_device(req), to_device(pos), n};
}

// Where a store writes the new tokens: the pool (device placement), the host bank (host
// placement), or both (the mirror's write-through).
enum class StoreTarget { pool, host, both };

// Call `call` of a timed graph: qsa::store_kv of the rows into `target`, other pages each call.
void store_call(const StoreInputs& in, const StoreRows& rows, StoreTarget target, int call,
                cudaStream_t st) {
  const std::int32_t* t =
      in.tables.get() + std::int64_t{call} * kStoreRequests * in.pages_per_request;
  const qsa::PageTable pool_table{t, in.pages_per_request, in.pool_dummy};
  const qsa::PageTable host_table{t, in.pages_per_request, in.host_dummy};
  const qsa::Rows r{rows.req.get(), rows.pos.get(), rows.n};
  if (target == StoreTarget::both) {
    qsa::store_kv(in.k.get(), in.v.get(), r, in.pool_kv, pool_table, in.host_kv, host_table, st);
  } else {
    const bool to_pool = target == StoreTarget::pool;
    qsa::store_kv(in.k.get(), in.v.get(), r, to_pool ? in.pool_kv : in.host_kv,
                  to_pool ? pool_table : host_table, qsa::KvBanks{}, qsa::PageTable{}, st);
  }
}

// qsa::store_kv of n tokens into `target` (as the trace replay and the runner call it). Each call
// of a timed graph writes other pages. x = bytes written (n x token bytes).
void store_sweep(Bench& b, const StoreInputs& in, std::int64_t token_bytes, StoreTarget target,
                 Series& s) {
  for (const int n : b.grid.store_tokens) {
    if (stop_sweep(b, s)) return;
    const StoreRows rows = store_rows(n);
    const double us =
        b.kernel_us([&](int call, cudaStream_t st) { store_call(in, rows, target, call, st); }, {},
                    b.grid.max_calls);
    s.points.push_back({static_cast<double>(std::int64_t{n} * token_bytes), us});
  }
}

// A layer of the trace replay's device placement, reported: the store of n tokens into the pool,
// then one row's attend of `tokens` (a prefill chunk's last query reads what the chunk just
// wrote, the store's lines still being written back). Against the store and the attend alone
// (store, attention_span's shapes).
// `in_forward` (store_in_forward) gets, for each point of a decode row's width (attend_tokens),
// the store's bytes and what the store adds to the attend timed alone the same way: the store's
// part of a decode forward's layer (before the wider attends of a prefill chunk's last query it
// adds 0.3 - 0.6 us more on the H200, 2026-12-03: store_then_attend reports them).
void store_attend_sweep(Bench& b, const AttendInputs& r, const StoreInputs& in, std::int32_t dummy,
                        std::int64_t token_bytes, Series& s, Series& in_forward) {
  const CalibrationGrid& g = b.grid;
  std::vector<int> widths = g.attend_tokens;
  widths.insert(widths.end(), g.span_tokens.begin(), g.span_tokens.end());
  // the attend alone of each decode row's width (attend_tokens, the first widths), timed once
  std::vector<double> alone(g.attend_tokens.size(), 0.0);
  for (const int n : g.store_attend_tokens) {
    const StoreRows rows = store_rows(n);
    for (std::size_t w = 0; w < widths.size(); ++w) {
      const int tokens = widths[w];
      if (stop_sweep(b, s)) return;
      const auto d_pos = padded_positions(b, r, 1, tokens, tokens);
      const int splits = qsa::attend_default_splits(1, kKvHeads, tokens);
      const cuda::DeviceArray<float> work(
          static_cast<std::size_t>(qsa::attend_workspace_floats(1, kQHeads, splits)));
      const auto attend = [&](int call, cudaStream_t st) {
        const qsa::PageTable pt{r.table(r.sel.front(), call), r.context_pages, dummy};
        qsa::attend(r.q.get(), kQHeads, qsa::Rows{r.req.get(), r.pos.get(), 1},
                    d_pos.get() + std::int64_t{call} * tokens, tokens, in.pool_kv, pt, splits,
                    work.get(), r.o.get(), nullptr, st);
      };
      const bool decode_width = w < alone.size();
      if (decode_width && alone[w] == 0.0) alone[w] = b.kernel_us(attend, {}, r.calls);
      const double us = b.kernel_us(
          [&](int call, cudaStream_t st) {
            store_call(in, rows, StoreTarget::pool, call, st);
            attend(call, st);
          },
          {}, r.calls);
      s.points.push_back({static_cast<double>(n), static_cast<double>(tokens), us});
      if (decode_width)
        in_forward.points.push_back(
            {static_cast<double>(std::int64_t{n} * token_bytes), us - alone[w]});
    }
  }
}

const char* kGraphTiming = "graph of calls reading other pages each, after a pad; per call";

// One dtype: the pool (attention, and for bf16 hbm_read), the host bank (in-place reads), the
// store into each and into both.
void dtype_sweeps(Bench& b, const Emit& emit, const AttendInputs& r, bool fp8) {
  const CalibrationGrid& g = b.grid;
  const PageLayout l = qsa_layer_layout(fp8);
  const std::string dt = fp8 ? "fp8" : "bf16";
  const cuda::DevicePool pool(l, g.bank_pages);
  b.filler.fill(pool, b.stream());
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  Series att =
      file_series(fp8 ? "attention_fp8" : "attention",
                  "qsa::attend, device banks, " + dt +
                      (fp8 ? " (SIMT kernel)" : " (tensor cores)") + ", rows x selected tokens",
                  kGraphTiming);
  const qsa::KvBanks pool_banks = layer_banks(pool);
  attend_sweep(b, r, pool_banks, dummy_slot(g.bank_pages), layer_token_bytes(l), att);
  emit(std::move(att));
  {
    // bf16: the series and its shapes; fp8 (the SIMT attend, priced by its grid's bytes): the
    // shapes, reported
    std::optional<Series> span;
    if (!fp8)
      span = file_series("attention_span",
                         "qsa::attend, device banks, bf16, one wide row beside narrow ones "
                         "(512 tokens), 4 - 32 rows x the wide row's tokens",
                         kGraphTiming);
    Series shape = extra_series(
        fp8 ? "attention_fp8_span_shapes" : "attention_span_shapes",
        {"rows", "wide_tokens", "narrow_tokens", "hbm_bytes", "ctas", "cta_tokens"},
        "qsa::attend, device banks, " + dt + ", one wide row beside narrow ones (reported)",
        kGraphTiming);
    span_sweep(b, r, pool_banks, dummy_slot(g.bank_pages), layer_token_bytes(l),
               span ? &*span : nullptr, shape);
    if (span) emit(std::move(*span));
    emit(std::move(shape));
  }
  if (!fp8) {
    Series warm = file_series("attention_warm",
                              "qsa::attend, device banks, bf16, decode rows of 2,051 tokens: a "
                              "forward's layers, then the next forward's over the same pages "
                              "(y: the second pass per attend)",
                              "graph of the layers' attends twice, after a pad; the second "
                              "pass per attend");
    warm_sweep(b, r, pool_banks, dummy_slot(g.bank_pages), layer_token_bytes(l), warm);
    emit(std::move(warm));
    Series rd =
        file_series("hbm_read", "launch_read (checksum gather), device pool, bf16", kGraphTiming);
    read_sweep(b, r, pool, rd);
    emit(std::move(rd));
  }
  const cuda::HostBank host(l, g.bank_pages);
  b.filler.fill(host, b.stream());
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  // bf16 in-place reads are link-bound (zero_copy_read); the fp8 SIMT kernel over host banks is
  // not: its own term (attention_fp8_host), over the bytes it reads and its rows
  Series in_place = fp8 ? file_series("attention_fp8_host",
                                      "qsa::attend, host banks in place, fp8 (SIMT kernel; the "
                                      "host placement's fp8 decode read)",
                                      kGraphTiming)
                        : file_series("zero_copy_read",
                                      "qsa::attend, host banks in place, bf16 (the host "
                                      "placement's decode read)",
                                      kGraphTiming);
  attend_sweep(b, r, layer_banks(host), dummy_page(g.bank_pages), layer_token_bytes(l), in_place);
  emit(std::move(in_place));
  // The store into the pool alone (store*) and into the host bank alone (store_host*): each
  // its own series (the link's noise on a large write stays out of the pool's rate, and the
  // host bank's knee, where the link starts to limit, shows). The mirror's store into both is
  // priced as the host bank's plus the pool's bytes; its points are reported beside.
  const char* store_timing = "graph of calls writing other pages each, after a pad; per call";
  const int max_store =
      std::max(*std::max_element(g.store_tokens.begin(), g.store_tokens.end()),
               *std::max_element(g.store_attend_tokens.begin(), g.store_attend_tokens.end()));
  const StoreInputs in = make_store_inputs(b, pool, host, max_store);
  const std::int64_t token_bytes = layer_token_bytes(l);
  Series st = file_series(fp8 ? "store_fp8" : "store", "qsa::store_kv, " + dt + ", into the pool",
                          store_timing);
  store_sweep(b, in, token_bytes, StoreTarget::pool, st);
  emit(std::move(st));
  if (!fp8) {
    Series sa = extra_series("store_then_attend", {"store_tokens", "tokens"},
                             "qsa::store_kv of n tokens into the pool, then qsa::attend of one "
                             "row (reported)",
                             store_timing);
    Series in_forward =
        file_series("store_in_forward",
                    "qsa::store_kv of n tokens into the pool before qsa::attend of one row, less "
                    "the attend alone: the store's part of a forward's layer",
                    store_timing);
    store_attend_sweep(b, r, in, dummy_slot(g.bank_pages), token_bytes, sa, in_forward);
    emit(std::move(sa));
    emit(std::move(in_forward));
  }
  const std::string host_term = fp8 ? "store_host_fp8" : "store_host";
  Series sh = file_series(host_term, "qsa::store_kv, " + dt + ", into the host bank", store_timing);
  store_sweep(b, in, token_bytes, StoreTarget::host, sh);
  emit(std::move(sh));
  Series both = extra_series(host_term, term_inputs(host_term),
                             "qsa::store_kv, " + dt +
                                 ", into the pool and the host bank together (the mirror; "
                                 "reported, not in the file)",
                             store_timing);
  store_sweep(b, in, token_bytes, StoreTarget::both, both);
  emit(std::move(both));
}

}  // namespace

void run_attention(Bench& b, const Emit& emit) {
  const AttendInputs r = make_inputs(b);
  dtype_sweeps(b, emit, r, false);
  dtype_sweeps(b, emit, r, true);
}

}  // namespace kvtier::calibrate
