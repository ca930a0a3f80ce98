// GPU tests of the QSA kernels one by one (label gpu; skipped without a device): the attend's
// variants, placements and in-place rows, folded windows, index scores, top-k, the mirror's
// store and the partials' merge. Part of qsa_gpu_test, with test_qsa_gpu.cpp.
//
// KVTIER_QSA_TEST_SMALL=1 (set by the compute-sanitizer runs, which are too slow at full size):
// AttendVariantsAgree runs fewer rows and one shape (see the test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/qsa/qsa_gpu_checks.hpp"
#include "tests/qsa/qsa_gpu_runner.hpp"

namespace kvtier::qsa::testing {
namespace {

using qsa_ref::Mat;
using qsa_ref::Vec;

// The tensor-core attend gives the same bits with either gather: device banks (cp.async) and
// host banks (register loads) read the same bytes, at the shape's split count (on the H200 a
// grid of fewer CTAs than SMs, launched plainly) and at one whose grid exceeds the SMs (device
// banks then launch early, after the selection kernels, so the attend's wait must hold them back);
// and the outputs match fp64 attention over the same selection and stored bytes within the
// fp32-path tolerance (2e-5). Shapes: a slice of several tiles with a partial last one (3
// splits of 259 tokens), and a slice longer than one map segment (1 split of 2083 tokens >
// 2048). KVTIER_QSA_TEST_SMALL=1 (sanitizers): 4 rows instead of 16, the first shape only (the
// second one's prefill of 2200 rows is too slow under racecheck).
TEST(QsaGpu, AttendVariantsAgree) {
  REQUIRE_GPU();
  const bool small = std::getenv("KVTIER_QSA_TEST_SMALL") != nullptr;
  struct Shape {
    int block_topk, n, splits;
  };
  std::vector<Shape> shapes = {{64, 1200, 3}, {520, 2200, 1}};
  if (small) shapes.resize(1);
  const int rows = small ? 4 : 16;
  for (const Shape& cs : shapes) {
    const qsa_ref::Dims d = gpu_dims(cs.block_topk);
    qsa_ref::LayerInput in = qsa_ref::random_input(cs.n, d, 77);
    // More CTAs than SMs: rows x KV heads x splits > sm_count().
    const int many = sm_count() / (rows * d.kv_heads) + 1;
    const int first = cs.n - rows;
    LayerConfig cfg;
    cfg.dims = d;
    cfg.splits = cs.splits;  // the prefill's; its workspace holds the last rows at `many`
    LayerConfig host_cfg = cfg;
    host_cfg.host_banks = true;
    GpuLayer dev(in, cfg), host(in, host_cfg);
    dev.run_chunks({});
    host.run_chunks({});
    const Mat q_gpu = GpuLayer::bf16_mat(dev.q_.download(), cs.n);
    const Mat k_gpu = dev.stored(false), v_gpu = dev.stored(true);
    for (const int splits : {cs.splits, many}) {
      auto run = [&](GpuLayer& g) {
        g.o_.zero();
        g.select_and_attend(first, rows, nullptr, splits);
        KVT_CUDA_CHECK(cudaDeviceSynchronize());
        return g.o_.download();
      };
      const std::vector<float> od = run(dev), oh = run(host);
      EXPECT_EQ(std::memcmp(od.data(), oh.data(), od.size() * 4), 0)
          << "splits " << splits << " width " << dev.width();
      const std::vector<std::int32_t> tokens = dev.tokens_.download();
      for (int t = first; t < cs.n; ++t) {
        const Mat qt = Eigen::Map<const Mat>(q_gpu.row(t).data(), d.q_heads, d.head_dim);
        const qsa_ref::AttnOut ra =
            qsa_ref::attend(qt, k_gpu, v_gpu, row_ints(tokens, t, dev.width()), d);
        const Mat ot = row_of(od, t, d.q_heads, d.head_dim);
        ASSERT_FALSE(ot.hasNaN()) << t;
        EXPECT_LT(rel(ot, ra.o), 2e-5) << "row " << t << " splits " << splits;
      }
    }
  }
}

// Device pool, mirror slots (other physical ids) and the host bank read in place give the same
// output bits for the same selections.
TEST(QsaGpu, PlacementsAreBitIdentical) {
  REQUIRE_GPU();
  for (bool fp8 : {false, true}) {
    const qsa_ref::Dims d = gpu_dims(16);
    const int n = 257;
    qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 23);
    LayerConfig dev;
    dev.dims = d;
    dev.fp8 = fp8;
    LayerConfig mirror = dev;
    mirror.page_offset = 7;
    LayerConfig host = dev;
    host.host_banks = true;
    GpuLayer a(in, dev), b(in, mirror), c(in, host);
    a.run_chunks({});
    b.run_chunks({});
    c.run_chunks({});
    const auto oa = a.o_.download();
    for (GpuLayer* x : {&b, &c}) {
      EXPECT_EQ(x->blocks_.download(), a.blocks_.download()) << fp8;
      const auto ox = x->o_.download();
      EXPECT_EQ(std::memcmp(ox.data(), oa.data(), oa.size() * 4), 0) << fp8;
    }
  }
}

// The mirror's reads before its ensure: rows through a table whose entries name pool pages or
// (<= -2) pages of the host bank read in place give the bits of the same rows read all from
// the pool, whichever pages are in place (none, some, all). fp8 banks are refused.
TEST(QsaGpu, InPlaceRowsEqualPoolRows) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(128);
  const int n = 1500;
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 41);
  LayerConfig dev;
  dev.dims = d;
  LayerConfig host = dev;
  host.host_banks = true;
  GpuLayer a(in, dev), c(in, host);  // the same bytes at the same physical pages
  a.run_chunks({});
  c.run_chunks({});
  const int rows = 8, first = n - rows, W = a.width();
  const Rows r{a.req_.get() + first, a.pos_.get() + first, rows};
  const std::uint16_t* q = a.q_.get() + std::int64_t{first} * d.q_heads * d.head_dim;
  const std::int32_t* toks = a.tokens_.get() + std::int64_t{first} * W;
  const std::size_t out = std::size_t(rows) * d.q_heads * d.head_dim;
  Buf<float> want(out), got(out), lse_want(std::size_t(rows) * d.q_heads),
      lse_got(std::size_t(rows) * d.q_heads);
  attend(q, d.q_heads, r, toks, W, a.banks(), a.table(), dev.splits, a.work_.get(), want.get(),
         lse_want.get(), nullptr);
  const std::vector<std::int32_t> table = a.table_.download();
  Buf<std::int32_t> mixed(table.size());
  // no page in place, every third, all; gathered by cp.async and (mostly in place) by register
  // loads
  for (const bool registers : {false, true}) {
    for (int every : {0, 3, 1}) {
      std::vector<std::int32_t> t = table;
      for (std::size_t i = 0; i < t.size(); ++i)
        if (every > 0 && i % every == 0) t[i] = -2 - t[i];
      mixed.upload(t);
      PageTable pt = a.table();
      pt.pages = mixed.get();
      pt.in_place = c.banks();
      pt.mostly_in_place = registers;
      attend(q, d.q_heads, r, toks, W, a.banks(), pt, dev.splits, a.work_.get(), got.get(),
             lse_got.get(), nullptr);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto w = want.download(), g = got.download();
      EXPECT_EQ(std::memcmp(w.data(), g.data(), w.size() * 4), 0)
          << "every " << every << ", register gather " << registers;
      const auto lw = lse_want.download(), lg = lse_got.download();
      EXPECT_EQ(std::memcmp(lw.data(), lg.data(), lw.size() * 4), 0)
          << "every " << every << ", register gather " << registers;
    }
  }
  // in-place banks must have the table's dtype (fp8 rows read fp8 banks in place too)
  KvBanks fp8 = a.banks();
  fp8.fp8 = true;
  PageTable pt = a.table();
  pt.in_place = a.banks();
  EXPECT_THROW(attend(q, d.q_heads, r, toks, W, fp8, pt, dev.splits, a.work_.get(), got.get(),
                      nullptr, nullptr),
               std::exception);
}

// Windows folded by LSE equal one pass within fp32 rounding, for 2 to 40 windows.
TEST(QsaGpu, FoldedWindowsEqualOnePass) {
  REQUIRE_GPU();
  const qsa_ref::Dims d = gpu_dims(128);
  const int n = 700;
  qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 31);
  LayerConfig cfg;
  cfg.dims = d;
  GpuLayer g(in, cfg);
  g.run_chunks({});
  const int rows = 8, first = n - rows, W = g.width();
  const std::vector<std::int32_t> tokens = g.tokens_.download();
  const std::vector<float> o_all = g.o_.download(), lse_all = g.lse_.download();
  const std::size_t ho = std::size_t(d.q_heads) * d.head_dim;
  const Rows r{g.req_.get() + first, g.pos_.get() + first, rows};
  const std::uint16_t* q = g.q_.get() + std::int64_t{first} * d.q_heads * d.head_dim;
  Buf<std::int32_t> win(std::size_t(rows) * W);
  Buf<float> acc_o(rows * ho), acc_lse(std::size_t(rows) * d.q_heads), po(rows * ho),
      plse(std::size_t(rows) * d.q_heads);
  for (int windows : {2, 3, 7, 40}) {
    fold_reset(acc_o.get(), acc_lse.get(), rows, d.q_heads, nullptr);
    for (int w = 0; w < windows; ++w) {
      // Window w: positions [w * n / windows, (w + 1) * n / windows) of each row's list.
      std::vector<std::int32_t> t(std::size_t(rows) * W, -1);
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < W; ++j) {
          const std::int32_t p = tokens[std::size_t(first + i) * W + j];
          if (p >= w * n / windows && p < (w + 1) * n / windows) t[std::size_t(i) * W + j] = p;
        }
      win.upload(t);
      attend(q, d.q_heads, r, win.get(), W, g.banks(), g.table(), cfg.splits, g.work_.get(),
             po.get(), plse.get(), nullptr);
      fold(acc_o.get(), acc_lse.get(), po.get(), plse.get(), rows, d.q_heads, nullptr);
    }
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto ao = acc_o.download(), al = acc_lse.download();
    for (int i = 0; i < rows; ++i) {
      const Mat a = row_of(ao, i, d.q_heads, d.head_dim);
      const Mat b = row_of(o_all, first + i, d.q_heads, d.head_dim);
      ASSERT_FALSE(a.hasNaN());
      EXPECT_LT(rel(a, b), 1e-5) << windows;
      for (int h = 0; h < d.q_heads; ++h)
        EXPECT_NEAR(al[std::size_t(i) * d.q_heads + h],
                    lse_all[std::size_t(first + i) * d.q_heads + h], 1e-4);
    }
  }
}

// Index scores against exact sums (fp64 over the bf16 inputs) for a batch of three requests:
// a prefill chunk deep in its context, one decode row, a prefill from position 0; CTAs of one
// request (tensor cores) and of several (CUDA cores); logit rows 16-byte aligned or not. Entries
// at or beyond a row's visible blocks keep their poison. 4 index heads run the mma.sync kernel
// with the queries in registers, 3 heads the general WMMA kernel.
TEST(QsaGpu, IndexScoresMatchExactSums) {
  REQUIRE_GPU();
  const int dim = kIndexDim;
  struct Req {
    int rows, pos0;
  };
  const std::vector<Req> reqs = {{300, 1000}, {1, 77}, {200, 0}};
  const std::int64_t slab_stride = 400;  // >= (1299 + 1) / 4 = 325 visible blocks
  std::vector<std::int32_t> req, pos;
  for (int q = 0; q < static_cast<int>(reqs.size()); ++q)
    for (int i = 0; i < reqs[q].rows; ++i) {
      req.push_back(q);
      pos.push_back(reqs[q].pos0 + i);
    }
  const int rows = static_cast<int>(req.size());
  std::mt19937 rng(606);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<std::uint16_t> slab(std::size_t(reqs.size()) * slab_stride * dim);
  for (auto& x : slab)
    x = qsa_ref::bf16_bits(normal(rng));
  Buf<std::uint16_t> dslab(slab.size());
  dslab.upload(slab);
  Buf<std::int32_t> dreq(req.size()), dpos(pos.size());
  dreq.upload(req);
  dpos.upload(pos);
  const std::int64_t max_blocks = 325;
  auto vis = [&](int r) { return (std::int64_t{pos[r]} + 1) / 4; };
  for (const int heads : {4, 3}) {
    std::vector<std::uint16_t> iq(std::size_t(rows) * heads * dim);
    for (auto& x : iq)
      x = qsa_ref::bf16_bits(normal(rng));
    Buf<std::uint16_t> diq(iq.size());
    diq.upload(iq);
    for (const std::int64_t stride : {std::int64_t{327}, std::int64_t{328}}) {
      Buf<float> logits(static_cast<std::size_t>(rows * stride));  // poisoned (0xff bytes)
      index_scores(diq.get(), heads, Rows{dreq.get(), dpos.get(), rows}, dslab.get(), slab_stride,
                   logits.get(), stride, max_blocks, nullptr);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<float> out = logits.download();
      int bad = 0, unwritten_changed = 0;
      for (int r = 0; r < rows; ++r)
        for (std::int64_t b = 0; b < stride; ++b) {
          const float got = out[std::size_t(r * stride + b)];
          std::uint32_t bits;
          std::memcpy(&bits, &got, 4);
          if (b >= vis(r)) {
            unwritten_changed += bits != 0xffffffffu;
            continue;
          }
          double score = 0.0, mag = 0.0;
          for (int h = 0; h < heads; ++h) {
            double dot = 0.0;
            for (int i = 0; i < dim; ++i) {
              const double x = qsa_ref::bf16_value(iq[(std::size_t(r) * heads + h) * dim + i]) *
                               qsa_ref::bf16_value(slab[(req[r] * slab_stride + b) * dim + i]);
              dot += x;
              mag += std::fabs(x);
            }
            score += std::max(dot, 0.0);
          }
          score /= std::sqrt(double(dim));
          mag /= std::sqrt(double(dim));
          if (!(std::fabs(got - score) <= 2e-5 * mag + 1e-30)) {
            if (++bad < 5)
              ADD_FAILURE() << heads << " heads, row " << r << " block " << b << ": " << got
                            << " vs " << score;
          }
        }
      EXPECT_EQ(bad, 0) << heads << " heads, stride " << stride;
      EXPECT_EQ(unwritten_changed, 0) << heads << " heads, stride " << stride;
    }
  }
}

// top-k equals the reference set on random, tied, ragged, -inf and NaN inputs.
TEST(QsaGpu, TopkEqualsReference) {
  REQUIRE_GPU();
  const int k = 512;
  const std::vector<int> n_valid = {0,    1,     511,    512,    513,    1000,
                                    5000, 70001, 262144, 262144, 262144, 3000};
  const int rows = static_cast<int>(n_valid.size());
  const std::int64_t stride = 262144;
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(0, 3);
  std::vector<float> x(std::size_t(rows) * stride);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < stride; ++i) {
      float v = normal(rng);
      if (r == 8) v = static_cast<float>(small(rng));                   // heavy ties
      if (r == 9) v = 1.0f;                                             // all equal
      if (r == 10) v = small(rng) == 0 ? v : ninf;                      // mostly -inf
      if (r == 11) v = small(rng) == 0 ? std::nanf("") : std::fabs(v);  // NaN, +-0
      if (r == 11 && small(rng) == 1) v = -0.0f;
      x[std::size_t(r) * stride + i] = v;
    }
  Buf<float> dx(x.size());
  dx.upload(x);
  Buf<std::int32_t> dn(n_valid.size()), dout(std::size_t(rows) * k), dpos(rows), dreq(rows);
  dn.upload(n_valid);
  topk(dx.get(), stride, dn.get(), Rows{dreq.get(), dpos.get(), rows}, 4, k, dout.get(), nullptr);
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = dout.download();
  // The multi-CTA form (chunks of 8192 keys) gives the same lists; run it twice on one workspace.
  Buf<std::int32_t> work(static_cast<std::size_t>(topk_workspace_bytes(rows, stride) / 4)),
      dout_mc(std::size_t(rows) * k);
  for (int rep = 0; rep < 2; ++rep) {
    dout_mc.upload(std::vector<std::int32_t>(std::size_t(rows) * k, 12345));
    topk(dx.get(), stride, dn.get(), Rows{dreq.get(), dpos.get(), rows}, 4, k, dout_mc.get(),
         work.get(), stride, nullptr);
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(dout_mc.download(), out) << rep;
  }
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row(x.begin() + std::int64_t{r} * stride,
                           x.begin() + std::int64_t{r + 1} * stride);
    // -0 and +0 are equal scores; the reference's sort keeps them tied, so do the GPU's keys.
    for (float& v : row)
      if (v == 0.0f) v = 0.0f;
    EXPECT_EQ(row_ints(out, r, k), qsa_ref::topk_blocks(row, n_valid[r], k)) << "row " << r;
  }
}

// The store writes the mirror with exactly the pool's bytes (codes and scales), never
// re-quantised, and leaves -1 pages untouched.
TEST(QsaGpu, StoreMirrorWriteThroughIsBitIdentical) {
  REQUIRE_GPU();
  for (bool fp8 : {false, true}) {
    const qsa_ref::Dims d = gpu_dims(16);
    const int n = 50, ps = 7, pages = (n + ps - 1) / ps;
    qsa_ref::LayerInput in = qsa_ref::random_input(n, d, 41);
    const std::size_t elems = std::size_t(pages + 1) * ps * d.kv_heads * d.head_dim;
    const std::size_t bytes = elems * (fp8 ? 1 : 2), scales = std::size_t(pages + 1) * ps * 2;
    Buf<std::uint8_t> pk(bytes), pv(bytes), mk(bytes, true), mv(bytes, true);
    Buf<float> pks(scales), pvs(scales), mks(scales, true), mvs(scales, true);
    std::vector<std::int32_t> pool_t(pages), mirror_t(pages);
    for (int p = 0; p < pages; ++p) {
      pool_t[p] = (p * 3) % pages;
      mirror_t[p] = p;
    }
    Buf<std::int32_t> dpt(pages), dmt(pages), req(n), pos(n);
    dpt.upload(pool_t);
    dmt.upload(mirror_t);
    std::vector<std::int32_t> z(n, 0), ps_(n);
    std::iota(ps_.begin(), ps_.end(), 0);
    req.upload(z);
    pos.upload(ps_);
    Buf<std::uint16_t> k(in.k.size()), v(in.v.size());
    k.upload(to_bf16(in.k));
    v.upload(to_bf16(in.v));
    const KvBanks pool{pk.get(), pv.get(), pks.get(), pvs.get(), fp8, ps, d.kv_heads, false};
    const KvBanks mirror{mk.get(), mv.get(), mks.get(), mvs.get(), fp8, ps, d.kv_heads, true};
    store_kv(k.get(), v.get(), Rows{req.get(), pos.get(), n}, pool, {dpt.get(), pages, pages},
             mirror, {dmt.get(), pages, pages}, nullptr);
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto a = pk.download(), b = mk.download();
    const auto as = pks.download(), bs = mks.download();
    const std::size_t tb = std::size_t(d.kv_heads) * d.head_dim * (fp8 ? 1 : 2);
    for (int t = 0; t < n; ++t) {
      const std::size_t at = std::size_t(pool_t[t / ps]) * ps + t % ps;
      const std::size_t bt = std::size_t(t);
      EXPECT_EQ(std::memcmp(&a[at * tb], &b[bt * tb], tb), 0) << t;
      if (fp8) {
        EXPECT_EQ(std::memcmp(&as[at * 2], &bs[bt * 2], 8), 0) << t;
      } else {
        std::uint16_t first;
        std::memcpy(&first, &a[at * tb], 2);
        EXPECT_EQ(first, qsa_ref::bf16_bits(static_cast<float>(in.k(t, 0))));
      }
    }
    // The spare page (never in a table) still holds the poison: nothing wrote it.
    EXPECT_EQ(b[std::size_t(pages) * ps * tb], 0xff);
  }
}

// The merge of an attend's partials gives the same bits in one block per (row, head) and in four
// slices of its dims (attend takes four for fewer (row, head) pairs than SMs), on both sides of
// each form's held limit (72 and 136 splits), with splits and whole heads that saw no token
// (m = -inf); and it matches the fp64 log-sum-exp merge of the same partials.
TEST(QsaGpu, MergeSlicesGiveTheSameBits) {
  REQUIRE_GPU();
  const int q_heads = 24;
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f), mlog(-12.0f, 12.0f), lsum(0.5f, 40.0f);
  for (const int rows : {1, 3}) {
    for (const int splits : {1, 5, 64, 72, 73, 132, 136, 137, 264}) {
      const std::size_t heads = std::size_t(rows) * q_heads;
      std::vector<float> work(
          static_cast<std::size_t>(attend_workspace_floats(rows, q_heads, splits)));
      float* acc = work.data();
      float* ml = work.data() + heads * splits * kHeadDim;
      for (std::size_t i = 0; i < heads * splits * kHeadDim; ++i)
        acc[i] = val(rng);
      for (std::size_t h = 0; h < heads; ++h)
        for (int sp = 0; sp < splits; ++sp) {
          // head 1 saw nothing; elsewhere every 7th split is empty
          const bool empty = h == 1 || (sp % 7 == 3 && splits > 1);
          ml[(h * splits + sp) * 2] = empty ? -inf : mlog(rng);
          ml[(h * splits + sp) * 2 + 1] = empty ? 0.0f : lsum(rng);
        }
      Buf<float> dwork(work.size());
      dwork.upload(work);
      std::vector<std::vector<float>> outs, lses;
      for (const int slices : {1, 4}) {
        Buf<float> o(heads * kHeadDim), lse(heads);
        merge(dwork.get(), rows, q_heads, splits, o.get(), lse.get(), slices, nullptr);
        KVT_CUDA_CHECK(cudaDeviceSynchronize());
        outs.push_back(o.download());
        lses.push_back(lse.download());
      }
      const std::string at = "rows " + std::to_string(rows) + " splits " + std::to_string(splits);
      EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4), 0) << at;
      EXPECT_EQ(std::memcmp(lses[0].data(), lses[1].data(), lses[0].size() * 4), 0) << at;
      for (std::size_t h = 0; h < heads; ++h) {
        double mx = -inf;
        for (int sp = 0; sp < splits; ++sp)
          mx = std::max(mx, double(ml[(h * splits + sp) * 2]));
        if (std::isinf(mx)) {
          EXPECT_TRUE(std::isinf(lses[1][h]) && lses[1][h] < 0) << at << " head " << h;
          EXPECT_EQ(outs[1][h * kHeadDim], 0.0f) << at << " head " << h;
          continue;
        }
        double l = 0;
        std::vector<double> want(kHeadDim, 0.0);
        for (int sp = 0; sp < splits; ++sp) {
          const double m = ml[(h * splits + sp) * 2];
          if (std::isinf(m)) continue;
          const double w = std::exp2(m - mx);
          l += ml[(h * splits + sp) * 2 + 1] * w;
          for (int d = 0; d < kHeadDim; ++d)
            want[d] += acc[(h * splits + sp) * kHeadDim + d] * w;
        }
        double err = 0, norm = 0;
        for (int d = 0; d < kHeadDim; ++d) {
          const double e = outs[1][h * kHeadDim + d] - want[d] / l;
          err += e * e;
          norm += (want[d] / l) * (want[d] / l);
        }
        EXPECT_LT(std::sqrt(err / std::max(norm, 1e-30)), 1e-5) << at << " head " << h;
        EXPECT_NEAR(lses[1][h], mx + std::log2(l), 1e-4) << at << " head " << h;
      }
    }
  }
  EXPECT_EQ(merge_default_slices(1, q_heads, 132), sm_count() > q_heads ? 4 : 1);
  EXPECT_EQ(merge_default_slices(1, q_heads, 72), 1);
  EXPECT_EQ(merge_default_slices(64, q_heads, 132), 1);
  std::vector<float> none(static_cast<std::size_t>(attend_workspace_floats(1, q_heads, 2)));
  Buf<float> dnone(none.size()), o(std::size_t(q_heads) * kHeadDim);
  EXPECT_THROW(merge(dnone.get(), 1, q_heads, 2, o.get(), nullptr, 2, nullptr), std::exception);
}

}  // namespace
}  // namespace kvtier::qsa::testing
