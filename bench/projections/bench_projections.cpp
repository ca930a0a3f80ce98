// The runner's projections for 1..64 rows on the reference geometry (Flash-Next, the Geometry
// defaults): the six that read the normed hidden state as one grouped call (q, k, v, index q,
// index k, gate: 2,560 -> 6,144 + 512 + 512 + 512 + 128 + 6,144), the output projection
// (6,144 -> 2,560, fp32 +=), and the stand-in MLP of the figures runs (width 6,912: gate and up
// grouped, down fp32 +=). Each row: the old path (skinny_gemm up to 8 rows, then cublasGemmEx
// with CUBLAS_OP_T, COMPUTE_32F and the default algorithm, one call per matrix, as gemm.cpp had
// it), the new one (runner::Gemm's rule) and the tensor-core kernel alone, as microseconds per
// call and GB/s of weight bytes, against a device-to-device copy measured here (bytes read +
// written: the practical HBM bound) and the H200's 4.8 TB/s.
//
// Each figure: the median over replays of a CUDA graph of 12 calls (one a layer, as in a
// decode step), the calls rotating over copies of the weights that together are several times
// the 50 MB L2, so that the weights come from HBM. Random bf16 data, never zero. Modes:
//   (none)  why, sweep, table
//   why     cuBLAS on the largest matrices: the first call (module loading) and the steady
//           state of cublasGemmEx against every algorithm cublasLt's heuristic offers; a
//           step's projections eager (as --profile-phases runs them) and as a graph
//   sweep   mma_gemm's tilings (column tiles x K split) at 9..64 rows
//   table   the old and new paths for every row count 1..64, then a short table
// Prints tables; never fails on speed.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/qsa/graph_timing.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/runner/gemm.hpp"
#include "cuda/runner/mma_gemm.hpp"
#include "cuda/runner/skinny_gemm.hpp"
#include "model/geometry.hpp"

namespace {

using kvtier::cuda::DeviceArray;
namespace rn = kvtier::runner;

constexpr double kSpecGBs = 4800.0;  // H200 datasheet
constexpr int kCallsPerGraph = 12;   // a decode step's 12 QSA layers
constexpr int kReplays = 15;
constexpr int kMaxRows = rn::kMmaMaxRows;
constexpr int kStandInWidth = 6912;  // scripts/gpu.sh figures: --stand-in-width 6912

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error ") + cublasGetStatusName(st) + " in " +
                             what);
}

// Random bf16 of magnitude 2^-7 .. 1, either sign: never zero.
void fill_random(std::vector<std::uint16_t>& v, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& e : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const auto r = static_cast<std::uint32_t>(s >> 16);
    e = static_cast<std::uint16_t>((r & 0x8000u) | ((120u + (r >> 7) % 7u) << 7) | (r & 0x7fu));
  }
}

// Median microseconds of one call among kCallsPerGraph calls replayed as one graph
// (bench/qsa/graph_timing.hpp), after two eager calls (first launches, attributes).
double graph_us(const std::function<void(int, cudaStream_t)>& call, cudaStream_t s) {
  for (int i = 0; i < 2; ++i)
    call(i, s);
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
  return kvtier::qsa::bench::graph_us_per_call(call, kCallsPerGraph, kReplays);
}

// Device-to-device copy of 2 GiB: GB/s of bytes read + written, median of 10.
double copy_gbs(cudaStream_t s) {
  const std::size_t bytes = std::size_t{2} << 30;
  DeviceArray<char> a(bytes), b(bytes);
  KVT_CUDA_CHECK(cudaMemsetAsync(a.get(), 1, bytes, s));
  cudaEvent_t e0, e1;
  KVT_CUDA_CHECK(cudaEventCreate(&e0));
  KVT_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> gbs;
  for (int i = 0; i < 12; ++i) {
    KVT_CUDA_CHECK(cudaEventRecord(e0, s));
    KVT_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s));
    KVT_CUDA_CHECK(cudaEventRecord(e1, s));
    KVT_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 2) gbs.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e6));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

// One projection call of the runner: matrices of `outs` columns reading x [rows][in]; grouped
// bf16 outputs, or (f32) one matrix added onto an fp32 y.
struct Shape {
  std::string name;
  int in;
  std::vector<int> outs;
  bool f32;
};

std::vector<Shape> runner_shapes() {
  const kvtier::Geometry g;
  const int H = g.hidden_size, qd = g.q_heads * g.head_dim, kvd = g.kv_heads * g.head_dim;
  const int iqd = g.index_q_heads * g.index_head_dim, ikd = g.index_head_dim;
  return {{"q k v iq ik gate (grouped)", H, {qd, kvd, kvd, iqd, ikd, qd}, false},
          {"o (fp32 +=)", qd, {H}, true},
          {"MLP gate up (grouped)", H, {kStandInWidth, kStandInWidth}, false},
          {"MLP down (fp32 +=)", kStandInWidth, {H}, true}};
}

// The weights of a shape in enough copies to defeat the L2, x of kMaxRows rows, the outputs.
struct Problem {
  const Shape& sh;
  std::int64_t weight_bytes = 0;  // one call's
  int copies = 0;
  DeviceArray<std::uint16_t> w, x, yb;
  DeviceArray<float> yf;
  std::vector<std::int64_t> w_off;  // element offset of matrix j in a copy
  std::vector<std::int64_t> y_off;
  std::int64_t copy_elems = 0;

  explicit Problem(const Shape& s) : sh(s) {
    std::int64_t cols = 0;
    for (int o : s.outs) {
      w_off.push_back(cols * s.in);
      y_off.push_back(cols * kMaxRows);
      cols += o;
    }
    copy_elems = cols * s.in;
    weight_bytes = copy_elems * 2;
    copies =
        static_cast<int>(std::max<std::int64_t>(2, (std::int64_t{256} << 20) / weight_bytes + 1));
    std::vector<std::uint16_t> h(static_cast<std::size_t>(copy_elems) * copies);
    fill_random(h, 7);
    w = DeviceArray<std::uint16_t>(h.size());
    KVT_CUDA_CHECK(cudaMemcpy(w.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    std::vector<std::uint16_t> hx(static_cast<std::size_t>(kMaxRows) * s.in);
    fill_random(hx, 8);
    x = DeviceArray<std::uint16_t>(hx.size());
    KVT_CUDA_CHECK(cudaMemcpy(x.get(), hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    yb = DeviceArray<std::uint16_t>(static_cast<std::size_t>(cols) * kMaxRows);
    yf = DeviceArray<float>(static_cast<std::size_t>(cols) * kMaxRows);
    KVT_CUDA_CHECK(cudaMemset(yf.get(), 0, yf.bytes()));
  }
  const std::uint16_t* weights(int copy, std::size_t j) const {
    return w.get() + static_cast<std::int64_t>(copy % copies) * copy_elems + w_off[j];
  }
  std::vector<rn::ProjectionOutput> outputs(int copy) const {
    std::vector<rn::ProjectionOutput> o;
    for (std::size_t j = 0; j < sh.outs.size(); ++j)
      o.push_back({weights(copy, j), sh.outs[j], yb.get() + y_off[j]});
    return o;
  }
};

// cublasGemmEx as gemm.cpp called it before the tensor-core path (row-major y = x . W^T as
// column-major y' = W' x'), with its 32 MiB workspace.
class OldCublas {
 public:
  OldCublas() {
    check(cublasCreate(&h_), "cublasCreate");
    ws_ = DeviceArray<char>(kWorkspace);
  }
  ~OldCublas() { cublasDestroy(h_); }
  OldCublas(const OldCublas&) = delete;
  OldCublas& operator=(const OldCublas&) = delete;
  void call(const std::uint16_t* x, const std::uint16_t* w, int rows, int in, int out, void* y,
            bool f32, cudaStream_t s) {
    check(cublasSetStream(h_, s), "cublasSetStream");
    check(cublasSetWorkspace(h_, ws_.get(), kWorkspace), "cublasSetWorkspace");
    const float alpha = 1.0f, beta = f32 ? 1.0f : 0.0f;
    check(cublasGemmEx(h_, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w, CUDA_R_16BF, in, x,
                       CUDA_R_16BF, in, &beta, y, f32 ? CUDA_R_32F : CUDA_R_16BF, out,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }

 private:
  static constexpr std::size_t kWorkspace = std::size_t{32} << 20;
  cublasHandle_t h_ = nullptr;
  DeviceArray<char> ws_;
};

// One call of the old path (skinny up to 8 rows, else cuBLAS per matrix).
void old_call(OldCublas& cb, const Problem& p, int rows, int copy, cudaStream_t s) {
  const Shape& sh = p.sh;
  if (rn::skinny_gemm_fits(rows, sh.in)) {
    if (sh.f32)
      return rn::skinny_gemm(p.x.get(), p.weights(copy, 0), rows, sh.in, sh.outs[0], p.yf.get(),
                             true, true, s);
    return rn::skinny_gemm_group(p.x.get(), rows, sh.in, p.outputs(copy), s);
  }
  for (std::size_t j = 0; j < sh.outs.size(); ++j)
    cb.call(p.x.get(), p.weights(copy, j), rows, sh.in, sh.outs[j],
            sh.f32 ? static_cast<void*>(p.yf.get()) : p.yb.get() + p.y_off[j], sh.f32, s);
}

void new_call(rn::Gemm& gemm, const Problem& p, int rows, int copy, cudaStream_t s) {
  gemm.set_stream(s);
  const Shape& sh = p.sh;
  if (sh.f32)
    return gemm.f32_out(p.x.get(), p.weights(copy, 0), rows, sh.in, sh.outs[0], p.yf.get(), true);
  const auto o = p.outputs(copy);
  gemm.bf16_out_group(p.x.get(), rows, sh.in, o);
}

void mma_call(const Problem& p, int rows, rn::MmaTiling t, int copy, cudaStream_t s) {
  const Shape& sh = p.sh;
  if (sh.f32) {
    const rn::ProjectionOutput o{p.weights(copy, 0), sh.outs[0], p.yf.get()};
    return rn::mma_gemm_tiled(p.x.get(), rows, sh.in, {&o, 1}, true, true, t, s);
  }
  const auto o = p.outputs(copy);
  rn::mma_gemm_tiled(p.x.get(), rows, sh.in, o, false, false, t, s);
}

rn::MmaTiling rule(const Problem& p, int rows) {
  return rn::mma_gemm_tiling(rows, p.sh.in, p.outputs(0));
}

const char* path_name(int rows, int in) {
  if (rn::skinny_gemm_fits(rows, in)) return "skinny";
  if (rn::mma_gemm_fits(rows, in)) return "mma";
  return "cublas";
}

double gbs(std::int64_t bytes, double us) {
  return static_cast<double>(bytes) / (us * 1e3);
}

// ---- why: cuBLAS's first call and its algorithms ----------------------------------------------

void why(cudaStream_t s) {
  const kvtier::Geometry g;
  const int H = g.hidden_size, qd = g.q_heads * g.head_dim;
  std::printf("\n== why: cuBLAS on the projections' largest matrices\n");
  // The first call of a process loads the kernel's module (CUDA's lazy loading): once per
  // kernel, but a decode run of 16 steps averages it into every step.
  {
    const Shape q{"q", H, {qd}, false};
    Problem p(q);
    OldCublas cb;
    for (int rows : {16, 16, 33, 33}) {
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
      const auto t0 = std::chrono::steady_clock::now();
      cb.call(p.x.get(), p.weights(0, 0), rows, H, qd, p.yb.get(), false, s);
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("cublasGemmEx q (%d x %d), %d rows, call and wait: %.3f ms\n", qd, H, rows, ms);
    }
    for (int rows : {16, 16}) {
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
      const auto t0 = std::chrono::steady_clock::now();
      rn::mma_gemm(p.x.get(), p.weights(0, 0), rows, H, qd, p.yb.get(), false, false, s);
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("mma_gemm     q (%d x %d), %d rows, call and wait: %.3f ms\n", qd, H, rows, ms);
    }
  }
  cublasLtHandle_t lt;
  check(cublasLtCreate(&lt), "cublasLtCreate");
  const std::size_t ws_bytes = std::size_t{32} << 20;
  DeviceArray<char> ws(ws_bytes);
  std::printf("%-10s %4s %10s %10s %10s %10s  %s\n", "matrix", "rows", "GemmEx us", "Lt best us",
              "Lt worst", "mma us", "Lt algorithms (us each, heuristic order)");
  for (const Shape& sh : {Shape{"q", H, {qd}, false}, Shape{"o", qd, {H}, true}}) {
    Problem p(sh);
    OldCublas cb;
    const int out = sh.outs[0], in = sh.in;
    for (int rows : {9, 16, 32, 64}) {
      const double ex = graph_us(
          [&](int i, cudaStream_t st) {
            cb.call(p.x.get(), p.weights(i, 0), rows, in, out,
                    sh.f32 ? static_cast<void*>(p.yf.get()) : p.yb.get(), sh.f32, st);
          },
          s);
      cublasLtMatmulDesc_t op;
      check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "ta");
      check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "tb");
      const cudaDataType_t yt = sh.f32 ? CUDA_R_32F : CUDA_R_16BF;
      cublasLtMatrixLayout_t la, lb, lc;
      check(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, in, out, in), "la");
      check(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, in, rows, in), "lb");
      check(cublasLtMatrixLayoutCreate(&lc, yt, out, rows, out), "lc");
      cublasLtMatmulPreference_t pref;
      check(cublasLtMatmulPreferenceCreate(&pref), "pref");
      check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws_bytes, sizeof(ws_bytes)),
            "pref ws");
      cublasLtMatmulHeuristicResult_t res[8];
      int n = 0;
      check(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, res, &n), "heuristic");
      std::string each;
      double best = 1e30, worst = 0;
      for (int a = 0; a < n; ++a) {
        const float alpha = 1.0f, beta = sh.f32 ? 1.0f : 0.0f;
        const double us = graph_us(
            [&](int i, cudaStream_t st) {
              void* y = sh.f32 ? static_cast<void*>(p.yf.get()) : p.yb.get();
              check(cublasLtMatmul(lt, op, &alpha, p.weights(i, 0), la, p.x.get(), lb, &beta, y, lc,
                                   y, lc, &res[a].algo, ws.get(), ws_bytes, st),
                    "cublasLtMatmul");
            },
            s);
        best = std::min(best, us);
        worst = std::max(worst, us);
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s%.1f", a ? " " : "", us);
        each += buf;
      }
      const double mma =
          graph_us([&](int i, cudaStream_t st) { mma_call(p, rows, rule(p, rows), i, st); }, s);
      std::printf("%-10s %4d %10.1f %10.1f %10.1f %10.1f  %s\n",
                  (sh.name + " " + std::to_string(out) + "x" + std::to_string(in)).c_str(), rows,
                  ex, best, worst, mma, each.c_str());
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
    }
  }
  cublasLtDestroy(lt);
}

// A decode step's projections as the runner issues them, 12 layers of the grouped six and the
// output projection: eagerly (GPU time between two events, with any gaps the host leaves, and
// the host's time to enqueue them; --profile-phases runs so) and replayed as one graph.
void step_eager_vs_graph(cudaStream_t s) {
  const auto shapes = runner_shapes();
  Problem six(shapes[0]), o(shapes[1]);
  OldCublas cb;
  rn::Gemm gemm;
  cudaEvent_t a, b;
  KVT_CUDA_CHECK(cudaEventCreate(&a));
  KVT_CUDA_CHECK(cudaEventCreate(&b));
  std::printf(
      "\na step's attention projections (12 x (grouped six + o)), ms: GPU eager / host "
      "enqueue eager / graph replay\n");
  for (int rows : {8, 16, 33, 64}) {
    for (int path = 0; path < 2; ++path) {
      auto layer = [&](int i, cudaStream_t st) {
        if (path == 0) {
          old_call(cb, six, rows, i, st);
          old_call(cb, o, rows, i, st);
        } else {
          new_call(gemm, six, rows, i, st);
          new_call(gemm, o, rows, i, st);
        }
      };
      std::vector<double> gpu, host;
      for (int rep = 0; rep < 7; ++rep) {
        KVT_CUDA_CHECK(cudaStreamSynchronize(s));
        const auto t0 = std::chrono::steady_clock::now();
        KVT_CUDA_CHECK(cudaEventRecord(a, s));
        for (int l = 0; l < 12; ++l)
          layer(l, s);
        KVT_CUDA_CHECK(cudaEventRecord(b, s));
        const auto t1 = std::chrono::steady_clock::now();
        KVT_CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        if (rep >= 2) {
          gpu.push_back(ms);
          host.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
      }
      std::sort(gpu.begin(), gpu.end());
      std::sort(host.begin(), host.end());
      const double graph = graph_us(layer, s) * 12 / 1e3;
      std::printf("  %2d rows, %s: %.3f / %.3f / %.3f\n", rows, path ? "new" : "old",
                  gpu[gpu.size() / 2], host[host.size() / 2], graph);
    }
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

// ---- sweep: mma_gemm's tilings -----------------------------------------------------------------

void sweep(cudaStream_t s, double copy) {
  std::printf("\n== sweep: mma_gemm us per call (GB/s of weights) by column tiles x K split\n");
  const auto shapes = runner_shapes();
  for (std::size_t k = 0; k < 2; ++k) {
    Problem p(shapes[k]);
    std::printf("%s, %.1f MB of weights\n", p.sh.name.c_str(),
                static_cast<double>(p.weight_bytes) / 1e6);
    std::printf("%4s", "rows");
    for (int ct : {1, 2})
      for (int ks : {1, 2, 4, 8})
        std::printf("  %5s", ("c" + std::to_string(ct) + "k" + std::to_string(ks)).c_str());
    std::printf("   best %% of copy  rule\n");
    for (int rows : {9, 16, 24, 32, 40, 48, 56, 64}) {
      std::printf("%4d", rows);
      double best = 1e30;
      for (int ct : {1, 2}) {
        for (int ks : {1, 2, 4, 8}) {
          const double us = graph_us(
              [&](int i, cudaStream_t st) {
                mma_call(p, rows, {ct, ks}, i, st);
              },
              s);
          best = std::min(best, us);
          std::printf("  %5.1f", us);
        }
      }
      const rn::MmaTiling r = rule(p, rows);
      std::printf("   %5.1f            c%dk%d\n", 100.0 * gbs(p.weight_bytes, best) / copy,
                  r.col_tiles, r.k_split);
    }
  }
}

// ---- table: old and new for 1..64 rows ----------------------------------------------------------

struct Row {
  double old_us, new_us, mma_us;
};

void table(cudaStream_t s, double copy) {
  const auto shapes = runner_shapes();
  std::vector<std::vector<Row>> all(shapes.size());
  rn::Gemm gemm;
  OldCublas cb;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    Problem p(shapes[k]);
    std::printf("\n== %s: in %d, %.1f MB of weights a call (%d copies rotate)\n", p.sh.name.c_str(),
                p.sh.in, static_cast<double>(p.weight_bytes) / 1e6, p.copies);
    std::printf("%4s %7s %10s %9s %10s %9s %8s %8s %9s\n", "rows", "path", "old us", "old GB/s",
                "new us", "new GB/s", "% copy", "% 4.8T", "mma us");
    for (int rows = 1; rows <= kMaxRows; ++rows) {
      Row r{};
      r.old_us = graph_us([&](int i, cudaStream_t st) { old_call(cb, p, rows, i, st); }, s);
      r.new_us = graph_us([&](int i, cudaStream_t st) { new_call(gemm, p, rows, i, st); }, s);
      r.mma_us =
          graph_us([&](int i, cudaStream_t st) { mma_call(p, rows, rule(p, rows), i, st); }, s);
      all[k].push_back(r);
      const double ng = gbs(p.weight_bytes, r.new_us);
      std::printf("%4d %7s %10.1f %9.0f %10.1f %9.0f %8.1f %8.1f %9.1f\n", rows,
                  path_name(rows, p.sh.in), r.old_us, gbs(p.weight_bytes, r.old_us), r.new_us, ng,
                  100.0 * ng / copy, 100.0 * ng / kSpecGBs, r.mma_us);
    }
  }
  // The short table: a decode step's projections (12 layers x (grouped six + o)) and GB/s.
  std::printf("\n== summary (copy bound %.0f GB/s, datasheet %.0f): GB/s of weights, old -> new\n",
              copy, kSpecGBs);
  std::printf("%4s", "rows");
  for (const Shape& sh : shapes)
    std::printf(" | %-26s", sh.name.c_str());
  std::printf(" | step's attn projections ms old -> new\n");
  for (int rows : {1, 8, 9, 16, 17, 24, 32, 33, 48, 64}) {
    std::printf("%4d", rows);
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      std::int64_t bytes = 0;
      for (int o : shapes[k].outs)
        bytes += std::int64_t{2} * o * shapes[k].in;
      const Row& r = all[k][static_cast<std::size_t>(rows - 1)];
      char cell[64];
      std::snprintf(cell, sizeof(cell), "%5.0f -> %5.0f (%3.0f%%)", gbs(bytes, r.old_us),
                    gbs(bytes, r.new_us), 100.0 * gbs(bytes, r.new_us) / copy);
      std::printf(" | %-26s", cell);
    }
    const Row& a = all[0][static_cast<std::size_t>(rows - 1)];
    const Row& b = all[1][static_cast<std::size_t>(rows - 1)];
    std::printf(" | %.3f -> %.3f\n", 12 * (a.old_us + b.old_us) / 1e3,
                12 * (a.new_us + b.new_us) / 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  if (mode != "all" && mode != "why" && mode != "sweep" && mode != "table") {
    std::fprintf(stderr, "usage: bench_projections [why|sweep|table]\n");
    return 2;
  }
  try {
    int dev = 0, driver = 0;
    KVT_CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    KVT_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    KVT_CUDA_CHECK(cudaDriverGetVersion(&driver));
    cudaStream_t s;
    KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const double copy = copy_gbs(s);
    std::printf(
        "%s, %d SMs, %.0f MB L2, driver API %d; device-to-device copy %.0f GB/s "
        "(read + written)\n",
        prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6, driver, copy);
    if (mode == "all" || mode == "why") {
      why(s);
      step_eager_vs_graph(s);
    }
    if (mode == "all" || mode == "sweep") sweep(s, copy);
    if (mode == "all" || mode == "table") table(s, copy);
    cudaStreamDestroy(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_projections: %s\n", e.what());
    return 1;
  }
  return 0;
}
