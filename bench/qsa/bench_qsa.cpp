// QSA kernel figures on the GPU: time (median of CUDA-event timings after warm-up) and bytes or
// FLOPs over time against the ceilings (HBM 4.3 TB/s, bf16 tensor ~790 TFLOP/s, zero-copy
// 51 GB/s). Prints a table; never fails on speed. Random data (never zeros). Each call runs the
// kernels the entry points pick (bench/results/kernel-choices.md says why those).
//
// Modes: none (attend bf16 and fp8, index, the small kernels), `b2b` (the two attend targets
// timed eager, back to back and in a graph), `link` (SM reads over PCIe by grid shape),
// `profile` (a few launches of the kernels that miss their targets, for ncu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/qsa/graph_timing.hpp"
#include "bench/qsa/link_read.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "tests/qsa/qsa_gpu_runner.hpp"

namespace {

using kvtier::qsa::testing::Buf;
namespace q = kvtier::qsa;

int g_max_reps = 1000;  // "profile" mode: a few launches per figure (for ncu)

double median_us(const std::function<void()>& f, int reps = 30) {
  reps = std::min(reps, g_max_reps);
  cudaEvent_t a, b;
  KVT_CUDA_CHECK(cudaEventCreate(&a));
  KVT_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    KVT_CUDA_CHECK(cudaEventRecord(a));
    f();
    KVT_CUDA_CHECK(cudaEventRecord(b));
    KVT_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  KVT_CUDA_CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

template <class T>
void fill_random(Buf<T>& b, std::uint32_t seed, std::function<T(std::mt19937&)> gen) {
  std::mt19937 rng(seed);
  std::vector<T> v(b.size());
  for (auto& x : v)
    x = gen(rng);
  b.upload(v);
}

std::uint16_t rand_bf16(std::mt19937& r) {
  std::normal_distribution<float> n(0.0f, 0.5f);
  return kvtier::qsa_ref::bf16_bits(n(r));
}

struct Row {
  std::string what, size;
  double us;
  std::string rate, target;
};
std::vector<Row> g_rows;

void print_table() {
  std::printf("\n%-34s %-26s %10s  %-30s %s\n", "kernel", "size", "time_us", "rate", "target");
  for (const Row& r : g_rows)
    std::printf("%-34s %-26s %10.2f  %-30s %s\n", r.what.c_str(), r.size.c_str(), r.us,
                r.rate.c_str(), r.target.c_str());
}

std::string gbs(double bytes, double us, double ceiling_gbs) {
  const double g = bytes / us / 1e3;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.0f GB/s (%.0f%% of %.0f)", g, 100 * g / ceiling_gbs,
                ceiling_gbs);
  return buf;
}

// Bytes r() % 0x70 would give, 8 at a time (splitmix64; 1 GiB in well under a second).
void fill_bank_bytes(Buf<std::uint8_t>& b, std::uint64_t seed) {
  std::vector<std::uint8_t> v(b.size());
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < v.size(); i += 8) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (std::size_t j = 0; j < 8 && i + j < v.size(); ++j)
      v[i + j] = static_cast<std::uint8_t>((z >> (8 * j)) & 0x6f);
  }
  b.upload(v);
}

// One decode attend figure: `rows` rows, each 2051 random distinct tokens of a 64k-token
// context whose pages sit in a pool of `context` tokens per row (device or mapped host memory).
struct AttendRun {
  int rows = 1;
  bool fp8 = false;
  bool host = false;  // the banks in mapped host memory, read in place over the link
  int splits = 0;     // 0: attend_default_splits
  // Eager timing: calls launched back to back between the two events (the figure is per call);
  // 1: one call from an idle GPU, so its launch latency is in the figure.
  int eager_calls = 1;
  // 10 calls captured in one CUDA graph on a stream, the GPU time of a replay / 10 (as a decode
  // step's graph runs them; graph_timing.hpp), instead of eager calls.
  bool graph = false;
  int repeats = 1;  // figures of the same inputs (the spread between them is the noise)
};

// Each row's page table (its pages shuffled over the pool) and its sorted token list.
struct Selection {
  std::vector<std::int32_t> table, tokens;
};
Selection random_selection(int rows, int pages, int context, int width) {
  Selection sel;
  sel.table.resize(static_cast<std::size_t>(rows) * pages);
  std::mt19937 rng(7);
  for (int r = 0; r < rows; ++r) {
    std::vector<std::int32_t> perm(pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int p = 0; p < pages; ++p)
      sel.table[std::size_t(r) * pages + p] = r * pages + perm[p];
    std::vector<std::int32_t> all(context);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(width);
    std::sort(all.begin(), all.end());
    sel.tokens.insert(sel.tokens.end(), all.begin(), all.end());
  }
  return sel;
}

void bench_attend(const AttendRun& run) {
  const int rows = run.rows, width = 2051, heads = 24, kv_heads = 2, ps = 64, context = 65536;
  const bool fp8 = run.fp8, host = run.host;
  const int pages = context / ps;
  const std::int64_t phys = std::int64_t{rows} * pages + 1;
  const std::int64_t elems = phys * ps * kv_heads * q::kHeadDim;
  // Host banks as the residency backend maps them: 2 MiB-aligned, huge pages, registered.
  Buf<std::uint8_t> k(static_cast<std::size_t>(elems * (fp8 ? 1 : 2)), host, true),
      v(static_cast<std::size_t>(elems * (fp8 ? 1 : 2)), host, true);
  Buf<float> ks, vs;
  fill_bank_bytes(k, 1);
  fill_bank_bytes(v, 2);
  if (fp8) {
    ks = Buf<float>(static_cast<std::size_t>(phys * ps * kv_heads), host, true);
    vs = Buf<float>(static_cast<std::size_t>(phys * ps * kv_heads), host, true);
    fill_random<float>(ks, 3, [](std::mt19937&) { return 0.01f; });
    fill_random<float>(vs, 4, [](std::mt19937&) { return 0.01f; });
  }
  const Selection sel = random_selection(rows, pages, context, width);
  std::vector<std::int32_t> req(rows), pos(rows, context - 1);
  std::iota(req.begin(), req.end(), 0);
  Buf<std::int32_t> dt(sel.table.size()), dtok(sel.tokens.size()), dreq(rows), dpos(rows);
  dt.upload(sel.table);
  dtok.upload(sel.tokens);
  dreq.upload(req);
  dpos.upload(pos);
  Buf<std::uint16_t> dq(std::size_t(rows) * heads * q::kHeadDim);
  fill_random<std::uint16_t>(dq, 5, rand_bf16);
  const int splits = run.splits > 0 ? run.splits : q::attend_default_splits(rows, kv_heads, width);
  Buf<float> work(static_cast<std::size_t>(q::attend_workspace_floats(rows, heads, splits)));
  Buf<float> o(std::size_t(rows) * heads * q::kHeadDim), lse(std::size_t(rows) * heads);
  const q::KvBanks kv{k.get(), v.get(), ks.get(), vs.get(), fp8, ps, kv_heads, host};
  const q::PageTable pt{dt.get(), pages, static_cast<std::int32_t>(phys - 1)};
  const q::Rows rr{dreq.get(), dpos.get(), rows};
  auto call = [&](cudaStream_t st) {
    q::attend(dq.get(), heads, rr, dtok.get(), width, kv, pt, splits, work.get(), o.get(),
              lse.get(), st);
  };
  for (int rep = 0; rep < run.repeats; ++rep) {
    const double us =
        run.graph ? kvtier::qsa::bench::graph_us_per_call([&](int, cudaStream_t st) { call(st); },
                                                          10, std::min(30, g_max_reps))
                  : median_us(
                        [&] {
                          for (int i = 0; i < run.eager_calls; ++i)
                            call(nullptr);
                        },
                        100) /
                        run.eager_calls;
    const double token_bytes = kv_heads * q::kHeadDim * (fp8 ? 1.0 : 2.0) * 2 + (fp8 ? 16 : 0);
    const double bytes = double(rows) * width * token_bytes;
    char size[64];
    std::snprintf(size, sizeof size, "%d row%s x 2051 tok, %s, %d sp", rows, rows > 1 ? "s" : "",
                  fp8 ? "fp8" : "bf16", splits);
    const char* kernel = fp8 ? "simt" : host ? "mma_load" : "mma_async";
    const char* timing = run.graph ? "graph " : run.eager_calls > 1 ? "b2b " : "";
    g_rows.push_back({std::string("attend ") + (host ? "host " : "HBM ") + timing + kernel, size,
                      us, gbs(bytes, us, host ? 51.0 : 4300.0),
                      host ? (fp8 ? "" : "<= 90 us") : (rows >= 16 && !fp8 ? ">= 50% HBM" : "")});
  }
}

// Index scoring of the last `rows` rows of a prefill of `context` tokens (one request).
void bench_index(int context, int rows) {
  const int heads = 4;
  const std::int64_t blocks = context / 4;
  Buf<std::uint16_t> iq(std::size_t(rows) * heads * q::kIndexDim),
      slab(static_cast<std::size_t>(blocks) * q::kIndexDim);
  fill_random<std::uint16_t>(iq, 11, rand_bf16);
  fill_random<std::uint16_t>(slab, 12, rand_bf16);
  std::vector<std::int32_t> req(rows, 0), pos(rows);
  std::iota(pos.begin(), pos.end(), context - rows);
  Buf<std::int32_t> dreq(rows), dpos(rows);
  dreq.upload(req);
  dpos.upload(pos);
  Buf<float> logits(static_cast<std::size_t>(rows) * blocks);
  const q::Rows rr{dreq.get(), dpos.get(), rows};
  double flops = 0;
  for (int p : pos)
    flops += double((p + 1) / 4) * heads * q::kIndexDim * 2;
  const double us = median_us(
      [&] {
        q::index_scores(iq.get(), heads, rr, slab.get(), blocks, logits.get(), blocks, blocks,
                        nullptr);
      },
      20);
  char rate[96], size[64];
  std::snprintf(rate, sizeof rate, "%.1f TFLOP/s (%.0f%% of 790)", flops / us / 1e6,
                100 * flops / us / 1e6 / 790);
  std::snprintf(size, sizeof size, "%d rows at %dk ctx", rows, context / 1024);
  g_rows.push_back({"index", size, us, rate, ">= 40% of bf16 peak"});
}

void bench_topk(int rows, int n, int k, bool multi) {
  Buf<float> x(std::size_t(rows) * n);
  fill_random<float>(
      x, 21, [](std::mt19937& r) { return std::normal_distribution<float>(0.0f, 1.0f)(r); });
  std::vector<std::int32_t> nv(rows, n);
  Buf<std::int32_t> dn(rows), out(std::size_t(rows) * k), dreq(rows), dpos(rows);
  dn.upload(nv);
  Buf<std::int32_t> work(static_cast<std::size_t>(q::topk_workspace_bytes(rows, n) / 4));
  const double us = median_us(
      [&] {
        if (multi)
          q::topk(x.get(), n, dn.get(), q::Rows{dreq.get(), dpos.get(), rows}, 4, k, out.get(),
                  work.get(), n, nullptr);
        else
          q::topk(x.get(), n, dn.get(), q::Rows{dreq.get(), dpos.get(), rows}, 4, k, out.get(),
                  nullptr);
      },
      100);
  char size[64];
  std::snprintf(size, sizeof size, "%d of %d, %d row%s", k, n, rows, rows > 1 ? "s" : "");
  g_rows.push_back({multi ? "topk multi-CTA" : "topk 1 CTA/row", size, us,
                    gbs(double(rows) * n * 4, us, 4300.0),
                    rows == 1 && n == 262144 ? "<= 50 us" : ""});
}

// The small per-row kernels of one decode forward of `rows` rows (launch-bound).
void bench_small(int rows) {
  const int heads = 24, kv_heads = 2, ps = 64, pages = 64;
  std::vector<std::int32_t> req(rows), pos(rows), table(std::size_t(rows) * pages), fwd_rb(rows),
      fwd_rc(rows, 1), fwd_pb(rows);
  for (int r = 0; r < rows; ++r) {
    req[r] = r;
    pos[r] = 4000 + 4 * r + 3;  // every row closes a group
    fwd_rb[r] = r;
    fwd_pb[r] = pos[r];
    for (int p = 0; p < pages; ++p)
      table[std::size_t(r) * pages + p] = r * pages + p;
  }
  Buf<std::int32_t> dreq(rows), dpos(rows), dt(table.size()), rb(rows), rc(rows), pb(rows);
  dreq.upload(req);
  dpos.upload(pos);
  dt.upload(table);
  rb.upload(fwd_rb);
  rc.upload(fwd_rc);
  pb.upload(fwd_pb);
  const q::Rows rr{dreq.get(), dpos.get(), rows};
  const q::Rope rope = q::make_rope(64, 1e7, false);
  Buf<std::uint16_t> qb(std::size_t(rows) * heads * q::kHeadDim), k(std::size_t(rows) * 512),
      v(std::size_t(rows) * 512), ik(std::size_t(rows) * 128), iq(std::size_t(rows) * 512),
      iqo(std::size_t(rows) * 512), slab(std::size_t(rows) * 1100 * 128);
  for (Buf<std::uint16_t>* b : {&qb, &k, &v, &ik, &iq})
    fill_random<std::uint16_t>(*b, 31, rand_bf16);
  Buf<float> w(256), ring(std::size_t(rows) * 4 * 128);
  fill_random<float>(w, 32, [](std::mt19937&) { return 0.05f; });
  fill_random<float>(ring, 33, [](std::mt19937&) { return 0.3f; });
  const std::int64_t elems = std::int64_t{rows} * pages * ps * kv_heads * q::kHeadDim;
  Buf<std::uint8_t> kb(static_cast<std::size_t>(elems * 2)),
      vb(static_cast<std::size_t>(elems * 2));
  const q::KvBanks kv{kb.get(), vb.get(), nullptr, nullptr, false, ps, kv_heads, false};
  const q::PageTable pt{dt.get(), pages, 0};
  char size[32];
  std::snprintf(size, sizeof size, "%d rows", rows);
  g_rows.push_back({"rope q (24 heads)", size, median_us([&] {
                      q::rope_inplace(qb.get(), heads, q::kHeadDim, rr, rope, nullptr);
                    }),
                    "", ""});
  g_rows.push_back({"index queries norm+rope", size, median_us([&] {
                      q::index_queries(iq.get(), w.get(), 4, 1e-6f, rr, rope, iqo.get(), nullptr);
                    }),
                    "", ""});
  g_rows.push_back({"store K/V bf16", size, median_us([&] {
                      q::store_kv(k.get(), v.get(), rr, kv, pt, q::KvBanks{}, q::PageTable{},
                                  nullptr);
                    }),
                    "", ""});
  g_rows.push_back({"compress (+ring)", size, median_us([&] {
                      q::compress(ik.get(), rr,
                                  q::CompressRequests{rb.get(), rc.get(), pb.get(), rows}, w.get(),
                                  1e-6f, rope, ring.get(), slab.get(), 1100, nullptr);
                    }),
                    "", ""});
  Buf<std::int32_t> blocks(std::size_t(rows) * 512), toks(std::size_t(rows) * 2051);
  fill_random<std::int32_t>(blocks, 34, [](std::mt19937& r) { return std::int32_t(r() % 900); });
  g_rows.push_back(
      {"expand", size,
       median_us([&] { q::expand(blocks.get(), 512, rr, 4, toks.get(), 2051, nullptr); }), "", ""});
  Buf<float> ao(std::size_t(rows) * heads * 256), al(std::size_t(rows) * heads),
      po(std::size_t(rows) * heads * 256), pl(std::size_t(rows) * heads);
  fill_random<float>(po, 35, [](std::mt19937& r) { return float(r() % 100) / 50.0f; });
  fill_random<float>(pl, 36, [](std::mt19937& r) { return float(r() % 100) / 10.0f; });
  q::fold_reset(ao.get(), al.get(), rows, heads, nullptr);
  g_rows.push_back({"fold", size, median_us([&] {
                      q::fold(ao.get(), al.get(), po.get(), pl.get(), rows, heads, nullptr);
                    }),
                    "", ""});
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "" && mode != "profile" && mode != "link" && mode != "b2b") {
    std::fprintf(stderr, "bench_qsa: unknown mode '%s' (modes: none, b2b, link, profile)\n",
                 mode.c_str());
    return 2;
  }
  if (!kvtier::qsa::testing::have_device()) {
    std::printf("bench_qsa: no CUDA device, nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  KVT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  if (mode == "profile") {  // the kernels that miss their targets, a few launches each
    g_max_reps = 2;
    bench_attend({.rows = 16});
    bench_attend({.rows = 16, .splits = 4});
    bench_attend({.rows = 1, .host = true});
    bench_topk(1, 262144, 512, true);
    bench_index(131072, 4096);
    print_table();
    return 0;
  }
  if (mode == "link") {
    kvtier::qsa::bench::bench_link_reads();
    return 0;
  }
  if (mode == "b2b") {
    for (const int calls : {1, 10}) {
      bench_attend({.rows = 16, .eager_calls = calls, .repeats = 2});
      bench_attend({.rows = 1, .host = true, .eager_calls = calls, .repeats = 2});
    }
    bench_attend({.rows = 16, .graph = true, .repeats = 2});
    bench_attend({.rows = 1, .host = true, .graph = true, .repeats = 2});
    print_table();
    return 0;
  }
  for (const int rows : {1, 16, 64})
    bench_attend({.rows = rows});
  bench_attend({.rows = 1, .host = true});
  bench_attend({.rows = 16, .fp8 = true});
  bench_attend({.rows = 1, .fp8 = true, .host = true});
  bench_index(131072, 4096);
  bench_index(32768, 4096);
  bench_small(16);
  print_table();
  return 0;
}
