// GPU tests of the decode-sized paths of the QSA indexer (label gpu; skipped without a device):
// the top-k of up to 16 rows (the shared-memory kernel, in clusters of 1 .. 16 CTAs per row)
// against the CPU reference, and the decode index kernel (up to 16 rows) against the prefill
// tensor-core kernel (the same bits per row) and exact fp64 sums. 1, 2, 3, 5 and 16 rows over
// 2k .. 262k blocks; the multi-CTA top-k chain and the one-CTA kernel where the entry points take
// them (17 rows, or rows too long for the clusters).
//
// KVTIER_QSA_TEST_SMALL=1 (set by the compute-sanitizer runs, which are too slow at full size):
// DecodeTopkSmall.EveryForm runs its tied rows only (one CTA a row and clusters of 6).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/qsa/qsa_gpu_runner.hpp"

namespace kvtier::qsa::testing {
namespace {

#define REQUIRE_GPU() \
  if (!have_device()) GTEST_SKIP() << "no CUDA device"

// ---- top-k ---------------------------------------------------------------------------------

enum class Kind { random, ties, all_equal, mostly_ninf, nan_zero };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::random:
      return "random";
    case Kind::ties:
      return "ties";
    case Kind::all_equal:
      return "all_equal";
    case Kind::mostly_ninf:
      return "mostly_ninf";
    case Kind::nan_zero:
      return "nan_zero";
  }
  return "?";
}

std::vector<float> topk_input(Kind kind, int rows, std::int64_t stride, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(0, 3);
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> x(static_cast<std::size_t>(rows * stride));
  for (auto& v : x) {
    switch (kind) {
      case Kind::random:
        v = normal(rng);
        break;
      case Kind::ties:
        v = static_cast<float>(small(rng));
        break;
      case Kind::all_equal:
        v = 1.0f;
        break;
      case Kind::mostly_ninf:  // fewer than k finite values in short rows: -inf ties decide
        v = small(rng) == 0 && small(rng) == 0 ? normal(rng) : ninf;
        break;
      case Kind::nan_zero:
        v = small(rng) == 0 ? std::nanf("") : std::fabs(normal(rng));
        if (small(rng) == 1) v = small(rng) < 2 ? -0.0f : 0.0f;
        break;
    }
  }
  return x;
}

// n_valid per row: the full length, then ragged lengths around k and the row length.
std::vector<std::int32_t> ragged(int rows, std::int64_t n) {
  const std::vector<std::int64_t> pick = {n, 0, 1, 511, 512, 513, n - 1, 1000, n / 2 + 3, n - 4093};
  std::vector<std::int32_t> v(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r)
    v[r] = static_cast<std::int32_t>(std::max<std::int64_t>(0, pick[r % pick.size()]));
  return v;
}

// The k picks of each row, from the entry without a workspace (every row's n_valid as given).
std::vector<std::int32_t> topk_no_work(const Buf<float>& x, std::int64_t stride,
                                       const Buf<std::int32_t>& n_valid, int rows, int k) {
  Buf<std::int32_t> pos(rows), req(rows), out(static_cast<std::size_t>(rows) * k);
  topk(x.get(), stride, n_valid.get(), Rows{req.get(), pos.get(), rows}, 4, k, out.get(), nullptr);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

// The same from the entry with a workspace (rows clamped to max_n; the cluster size grows with
// max_n: ceil(max_n / 2048) CTAs, at most 16 and at most 64 CTAs over the rows).
std::vector<std::int32_t> topk_with_work(const Buf<float>& x, std::int64_t stride,
                                         const Buf<std::int32_t>& n_valid, int rows,
                                         std::int64_t max_n, int k) {
  Buf<std::int32_t> pos(rows), req(rows), out(static_cast<std::size_t>(rows) * k),
      work(static_cast<std::size_t>(topk_workspace_bytes(rows, max_n) / 4 + 1));
  out.upload(std::vector<std::int32_t>(out.size(), 12345));
  topk(x.get(), stride, n_valid.get(), Rows{req.get(), pos.get(), rows}, 4, k, out.get(),
       work.get(), max_n, nullptr);
  KVT_CUDA_CHECK(cudaPeekAtLastError());
  KVT_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

// The k picks of every row from one entry point, and what to call them in a failure.
struct Picks {
  std::string what;
  std::vector<std::int32_t> got;
};

// Row r's picks in every `outs` equal the reference's top-k of its first n[r] logits of `x`.
void expect_reference(const std::vector<float>& x, std::int64_t stride,
                      const std::vector<std::int64_t>& n, int k, const std::vector<Picks>& outs) {
  for (std::size_t r = 0; r < n.size(); ++r) {
    std::vector<float> row(x.begin() + std::int64_t(r) * stride,
                           x.begin() + std::int64_t(r) * stride + n[r]);
    // The kernels order -0 below +0 (their keys are the float bits); the reference ties them.
    // Only the NaN / +-0 rows hold -0, and no negative finite value, so -0 -> the largest
    // negative float (-denorm_min) gives the reference the kernels' order and changes no other.
    for (float& v : row)
      if (v == 0.0f && std::signbit(v)) v = -std::numeric_limits<float>::denorm_min();
    const std::vector<std::int32_t> want = qsa_ref::topk_blocks(row, n[r], k);
    for (const Picks& o : outs) {
      const std::vector<std::int32_t> mine(o.got.begin() + std::int64_t(r) * k,
                                           o.got.begin() + std::int64_t(r + 1) * k);
      EXPECT_EQ(mine, want) << o.what << " row " << r << " n " << n[r];
    }
  }
}

// n_valid clamped to max_n, as the workspace entry reads it.
std::vector<std::int64_t> clamped(const std::vector<std::int32_t>& nv, std::int64_t max_n) {
  std::vector<std::int64_t> n(nv.size());
  for (std::size_t r = 0; r < nv.size(); ++r)
    n[r] = std::min<std::int64_t>(nv[r], max_n);
  return n;
}

struct TopkCase {
  int rows;
  std::int64_t n;
  bool aligned;  // 16-byte aligned logit rows (stride % 4 == 0)
};

class DecodeTopk : public ::testing::TestWithParam<TopkCase> {};

// Both entry points equal the CPU reference for random, tied, all-equal, -inf and NaN / +-0 rows
// with ragged lengths. With a workspace, rows of up to 32k keys a CTA take the clusters (the
// size from max_n and the rows), longer ones the multi-CTA chain; without one, clusters of up to
// 16 CTAs (4 at 16 rows), whose slices of 16 rows x 262k keys exceed the keys a CTA's shared
// memory holds: the rest is read from global memory in every pass.
TEST_P(DecodeTopk, MatchesReference) {
  REQUIRE_GPU();
  const TopkCase c = GetParam();
  const int k = 512;
  const std::int64_t stride = c.aligned ? c.n : c.n + 1;
  const std::vector<std::int32_t> nv = ragged(c.rows, c.n);
  Buf<std::int32_t> dn(nv.size());
  dn.upload(nv);
  for (const Kind kind :
       {Kind::random, Kind::ties, Kind::all_equal, Kind::mostly_ninf, Kind::nan_zero}) {
    const std::uint32_t seed = 7000u + static_cast<std::uint32_t>(kind) * 31u +
                               static_cast<std::uint32_t>(c.rows * 3 + c.n % 1009);
    SCOPED_TRACE(std::string(kind_name(kind)) + " seed " + std::to_string(seed));
    const std::vector<float> x = topk_input(kind, c.rows, stride, seed);
    Buf<float> dx(x.size());
    dx.upload(x);
    const std::vector<std::int64_t> n = clamped(nv, c.n);
    expect_reference(x, stride, n, k,
                     {{"no workspace", topk_no_work(dx, stride, dn, c.rows, k)},
                      {"workspace", topk_with_work(dx, stride, dn, c.rows, c.n, k)}});
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, DecodeTopk,
                         ::testing::Values(TopkCase{1, 2048, true}, TopkCase{2, 2048, false},
                                           TopkCase{16, 2048, true}, TopkCase{1, 32768, true},
                                           TopkCase{2, 32768, true}, TopkCase{16, 32768, false},
                                           TopkCase{1, 65536, true}, TopkCase{2, 65536, false},
                                           TopkCase{16, 65536, true}, TopkCase{16, 100000, false},
                                           TopkCase{1, 262144, true}, TopkCase{2, 262144, false},
                                           TopkCase{16, 262144, true}),
                         [](const auto& tp) {
                           return std::to_string(tp.param.rows) + "rows_" +
                                  std::to_string(tp.param.n) +
                                  (tp.param.aligned ? "_aligned" : "_unaligned");
                         });

// Short rows under a large max_n: clusters of up to 12 CTAs (64 CTAs over the 5 rows) whose
// slices hold a few dozen to a few hundred keys each (some rows at most k), and heavy ties
// across the slices. Small enough for the sanitizers.
TEST(DecodeTopkCluster, ShortRowsLargeMaxN) {
  REQUIRE_GPU();
  const int k = 512, rows = 5;
  const std::int64_t stride = 3001, max_n = 262144;
  const std::vector<std::int32_t> nv = {513, 1000, 3001, 2048, 200};
  Buf<std::int32_t> dn(nv.size());
  dn.upload(nv);
  for (const Kind kind : {Kind::random, Kind::ties, Kind::all_equal}) {
    const std::vector<float> x = topk_input(kind, rows, stride, 31u + static_cast<unsigned>(kind));
    Buf<float> dx(x.size());
    dx.upload(x);
    const std::vector<std::int64_t> n = clamped(nv, max_n);
    expect_reference(
        x, stride, n, k,
        {{std::string(kind_name(kind)) + " workspace",
          topk_with_work(dx, stride, dn, rows, max_n, k)},
         {std::string(kind_name(kind)) + " no workspace", topk_no_work(dx, stride, dn, rows, k)}});
  }
}

// Small rows for the sanitizers: the shared-memory kernel with one CTA a row (max_n 2048, the
// longest row clamped to it), clusters of 2 (max_n 3000) and 6 (max_n 12000: slices of 500 keys
// and fewer), and without a workspace (clusters of up to 16), against the reference.
// KVTIER_QSA_TEST_SMALL=1 (racecheck, about 5 s per top-k launch there): the tied rows only, one
// CTA and clusters of 6.
TEST(DecodeTopkSmall, EveryForm) {
  REQUIRE_GPU();
  const int k = 512, rows = 3;
  const std::int64_t stride = 3000;
  const std::vector<std::int32_t> nv = {3000, 1500, 700};
  Buf<std::int32_t> dn(nv.size());
  dn.upload(nv);
  const bool small = std::getenv("KVTIER_QSA_TEST_SMALL") != nullptr;
  std::vector<Kind> kinds = {Kind::random, Kind::ties, Kind::nan_zero};
  std::vector<std::int64_t> max_ns = {2048, 3000, 12000};
  if (small) {
    kinds = {Kind::ties};
    max_ns = {2048, 12000};
  }
  for (const Kind kind : kinds) {
    const std::vector<float> x = topk_input(kind, rows, stride, 77u + static_cast<unsigned>(kind));
    Buf<float> dx(x.size());
    dx.upload(x);
    for (const std::int64_t max_n : max_ns)
      expect_reference(x, stride, clamped(nv, max_n), k,
                       {{std::string(kind_name(kind)) + " max_n " + std::to_string(max_n),
                         topk_with_work(dx, stride, dn, rows, max_n, k)}});
    if (!small)
      expect_reference(x, stride, clamped(nv, stride), k,
                       {{std::string(kind_name(kind)) + " no workspace",
                         topk_no_work(dx, stride, dn, rows, k)}});
  }
}

// n from the positions (n_valid null) and rows clamped to max_n by the workspace entry, by every
// form: 3 rows (clusters) and 17 rows (the one-CTA kernel without a workspace, the multi-CTA
// chain with one); among them a row whose position sees more blocks than max_n.
TEST(DecodeTopkClamp, PositionsAndMaxN) {
  REQUIRE_GPU();
  const int k = 512, most_rows = 17;
  const std::int64_t stride = 40000;
  const std::vector<float> x = topk_input(Kind::random, most_rows, stride, 99);
  Buf<float> dx(x.size());
  dx.upload(x);
  const std::vector<std::int32_t> shapes = {4 * 30000 + 2, 4 * 39999 + 3, 4 * 100};
  std::vector<std::int32_t> pos(most_rows);
  for (int r = 0; r < most_rows; ++r)
    pos[r] = shapes[r % shapes.size()];
  Buf<std::int32_t> dpos(pos.size()), dreq(pos.size());
  dpos.upload(pos);
  dreq.upload(std::vector<std::int32_t>(pos.size(), 0));
  for (const int rows : {3, most_rows})
    for (const std::int64_t max_n : {std::int64_t{0}, std::int64_t{40000}, std::int64_t{35000}}) {
      // max_n 0: the entry without a workspace
      Buf<std::int32_t> out(static_cast<std::size_t>(rows) * k),
          work(static_cast<std::size_t>(topk_workspace_bytes(rows, max_n) / 4 + 1));
      const Rows r{dreq.get(), dpos.get(), rows};
      if (max_n > 0)
        topk(dx.get(), stride, nullptr, r, 4, k, out.get(), work.get(), max_n, nullptr);
      else
        topk(dx.get(), stride, nullptr, r, 4, k, out.get(), nullptr);
      KVT_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<std::int64_t> n(rows);
      for (int i = 0; i < rows; ++i) {
        n[i] = (std::int64_t{pos[i]} + 1) / 4;
        if (max_n > 0) n[i] = std::min(n[i], max_n);
      }
      expect_reference(
          x, stride, n, k,
          {{std::to_string(rows) + " rows, max_n " + std::to_string(max_n), out.download()}});
    }
}

// ---- index scoring -------------------------------------------------------------------------

struct IndexCase {
  std::vector<int> rows_per_req;  // consecutive rows of each request (decode: one row each)
  std::int64_t blocks;            // visible blocks of the last row of each request
  bool aligned;                   // logit rows 16-byte aligned
};

struct IndexSetup {
  int rows = 0, requests = 0;
  int rows_per_request = 0;  // the most rows of a request (index_scores' kernel choice)
  std::int64_t slab_stride = 0, logit_stride = 0, max_blocks = 0;
  std::vector<std::int32_t> req, pos;
  std::vector<std::uint16_t> iq, slab;
  Buf<std::uint16_t> diq, dslab;
  Buf<std::int32_t> dreq, dpos;

  explicit IndexSetup(const IndexCase& c, std::uint64_t seed) {
    requests = static_cast<int>(c.rows_per_req.size());
    max_blocks = c.blocks;
    slab_stride = c.blocks + 64;
    logit_stride = c.aligned ? c.blocks + 8 : c.blocks + 5;
    for (int q = 0; q < requests; ++q) {
      // The last row of request q sees c.blocks blocks, minus q (requests differ in depth);
      // earlier rows of the request one position less each.
      const int n = c.rows_per_req[q];
      const std::int64_t last = 4 * (c.blocks - q) - 1 + (q % 4);
      for (int i = 0; i < n; ++i) {
        req.push_back(q);
        pos.push_back(static_cast<std::int32_t>(last - (n - 1 - i)));
      }
    }
    rows = static_cast<int>(req.size());
    rows_per_request = *std::max_element(c.rows_per_req.begin(), c.rows_per_req.end());
    iq.resize(static_cast<std::size_t>(rows) * 4 * kIndexDim);
    for (std::size_t i = 0; i < iq.size(); ++i)
      iq[i] = hashed_bf16(i, seed);
    slab.resize(static_cast<std::size_t>(requests * slab_stride) * kIndexDim);
    for (std::size_t i = 0; i < slab.size(); ++i)
      slab[i] = hashed_bf16(i, seed + 1);
    diq = Buf<std::uint16_t>(iq.size());
    diq.upload(iq);
    dslab = Buf<std::uint16_t>(slab.size());
    dslab.upload(slab);
    dreq = Buf<std::int32_t>(req.size());
    dreq.upload(req);
    dpos = Buf<std::int32_t>(pos.size());
    dpos.upload(pos);
  }
  std::int64_t vis(int r) const { return (std::int64_t{pos[r]} + 1) / 4; }

  // Scores of rows [r0, r0 + n) into a poisoned [n][logit_stride] buffer (the decode kernel
  // for up to 16 rows, or for requests of up to 16 rows each; the prefill kernel beyond).
  std::vector<float> run(int r0, int n) const {
    Buf<float> logits(static_cast<std::size_t>(n * logit_stride));  // 0xff bytes
    index_scores(diq.get() + std::int64_t{r0} * 4 * kIndexDim, 4,
                 Rows{dreq.get() + r0, dpos.get() + r0, n}, dslab.get(), slab_stride, logits.get(),
                 logit_stride, max_blocks, nullptr, rows_per_request);
    KVT_CUDA_CHECK(cudaPeekAtLastError());
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    return logits.download();
  }

  // The same rows, all of one request, by the prefill tensor-core kernel: fewer than 17 rows are
  // scored after as many rows of the request's earlier positions (with the first row's queries)
  // as make 17, whose scores are dropped. A row's scores do not depend on the other rows of its
  // tile, so these are the bits the prefill kernel gives the rows in any batch of one request.
  std::vector<float> run_prefill(int r0, int n) const {
    const int pad = std::max(0, 17 - n), total = pad + n;
    const std::size_t q_elems = std::size_t{4} * kIndexDim;
    std::vector<std::int32_t> preq(static_cast<std::size_t>(total), req[r0]), ppos(preq.size());
    std::vector<std::uint16_t> piq(static_cast<std::size_t>(total) * q_elems);
    for (int i = 0; i < total; ++i) {
      ppos[i] = pos[r0] - pad + i;
      const std::size_t src = static_cast<std::size_t>(r0 + std::max(0, i - pad)) * q_elems;
      std::copy(iq.begin() + src, iq.begin() + src + q_elems, piq.begin() + i * q_elems);
    }
    Buf<std::uint16_t> dpiq(piq.size());
    Buf<std::int32_t> dpreq(preq.size()), dppos(ppos.size());
    dpiq.upload(piq);
    dpreq.upload(preq);
    dppos.upload(ppos);
    Buf<float> logits(static_cast<std::size_t>(total * logit_stride));
    index_scores(dpiq.get(), 4, Rows{dpreq.get(), dppos.get(), total}, dslab.get(), slab_stride,
                 logits.get(), logit_stride, max_blocks, nullptr);
    KVT_CUDA_CHECK(cudaPeekAtLastError());
    KVT_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> all = logits.download();
    return {all.begin() + pad * logit_stride, all.end()};
  }
};

int bit_differences(const std::vector<float>& a, const std::vector<float>& b) {
  int bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    bad += std::memcmp(&a[i], &b[i], 4) != 0;
  return bad;
}

class DecodeIndex : public ::testing::TestWithParam<IndexCase> {};

// The decode kernel (up to 16 rows, or requests of up to 16 rows each) gives, for every row, the
// bits the prefill tensor-core kernel gives it (run_prefill); every visible entry matches the exact
// fp64 sum within the tolerance of the existing index test (2e-5 x the sum of |products|); entries
// at or beyond a row's visible blocks keep their poison.
TEST_P(DecodeIndex, SameBitsAsPrefillKernelAndExactSums) {
  REQUIRE_GPU();
  const IndexCase c = GetParam();
  const std::uint64_t seed = 4242 + static_cast<std::uint64_t>(c.blocks);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const IndexSetup s(c, seed);
  const std::vector<float> got = s.run(0, s.rows);
  // Per request, the prefill kernel on that request's rows alone.
  int r0 = 0;
  for (const int n : c.rows_per_req) {
    const std::vector<float> ref = s.run_prefill(r0, n);
    const std::vector<float> mine(got.begin() + r0 * s.logit_stride,
                                  got.begin() + (r0 + n) * s.logit_stride);
    EXPECT_EQ(bit_differences(mine, ref), 0) << "rows " << r0 << " .. " << r0 + n - 1;
    r0 += n;
  }
  // Exact sums (every block for short rows, a stride of blocks for long ones) and poison.
  const std::int64_t step = c.blocks <= 4096 ? 1 : 7;
  int bad = 0, unwritten_changed = 0;
  for (int r = 0; r < s.rows; ++r)
    for (std::int64_t b = 0; b < s.logit_stride; ++b) {
      const float v = got[static_cast<std::size_t>(r * s.logit_stride + b)];
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (b >= s.vis(r)) {
        unwritten_changed += bits != 0xffffffffu;
        continue;
      }
      if (b % step != 0 && b != s.vis(r) - 1) continue;
      double score = 0.0, mag = 0.0;
      for (int h = 0; h < 4; ++h) {
        double dot = 0.0;
        for (int i = 0; i < kIndexDim; ++i) {
          const double x =
              double(qsa_ref::bf16_value(s.iq[(std::size_t(r) * 4 + h) * kIndexDim + i])) *
              qsa_ref::bf16_value(s.slab[(s.req[r] * s.slab_stride + b) * kIndexDim + i]);
          dot += x;
          mag += std::fabs(x);
        }
        score += std::max(dot, 0.0);
      }
      score /= std::sqrt(double(kIndexDim));
      mag /= std::sqrt(double(kIndexDim));
      if (!(std::fabs(v - score) <= 2e-5 * mag + 1e-30) && ++bad < 5)
        ADD_FAILURE() << "row " << r << " block " << b << ": " << v << " vs " << score;
    }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(unwritten_changed, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeIndex,
    ::testing::Values(IndexCase{{1}, 2048, true}, IndexCase{{1}, 32768, true},
                      IndexCase{{1}, 65536, false}, IndexCase{{1, 1}, 2048, false},
                      IndexCase{{2}, 32768, true},
                      IndexCase{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2048, true},
                      IndexCase{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 32768, false},
                      IndexCase{{16}, 65536, true}, IndexCase{{5, 1, 10}, 32768, true},
                      IndexCase{{3, 13}, 2048, false},
                      // batched decode past 16 rows: one row per request (issue 17: 32 x 128k
                      // and 64 x 32k scored on the CUDA cores took 13-27 ms per step)
                      IndexCase{std::vector<int>(32, 1), 32768, true},
                      IndexCase{std::vector<int>(64, 1), 8192, false},
                      IndexCase{{16, 16, 3, 1, 9}, 4096, true}),
    [](const auto& tp) {
      int rows = 0;
      for (const int n : tp.param.rows_per_req)
        rows += n;
      return std::to_string(rows) + "rows_" + std::to_string(tp.param.rows_per_req.size()) +
             "req_" + std::to_string(tp.param.blocks) +
             (tp.param.aligned ? "_aligned" : "_unaligned");
    });

// index + top-k of one decode row captured in a CUDA graph: replays equal the eager results.
TEST(DecodeSelectGraph, ReplayEqualsEager) {
  REQUIRE_GPU();
  const IndexSetup s(IndexCase{{1, 1}, 32768, true}, 77);
  const int k = 512;
  Buf<float> logits(static_cast<std::size_t>(s.rows * s.logit_stride));
  Buf<std::int32_t> out(static_cast<std::size_t>(s.rows) * k),
      work(static_cast<std::size_t>(topk_workspace_bytes(s.rows, s.max_blocks) / 4 + 1));
  const Rows r{s.dreq.get(), s.dpos.get(), s.rows};
  cudaStream_t st;
  KVT_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto step = [&] {
    index_scores(s.diq.get(), 4, r, s.dslab.get(), s.slab_stride, logits.get(), s.logit_stride,
                 s.max_blocks, st);
    topk(logits.get(), s.logit_stride, nullptr, r, 4, k, out.get(), work.get(), s.max_blocks, st);
  };
  step();
  KVT_CUDA_CHECK(cudaStreamSynchronize(st));
  const std::vector<std::int32_t> eager = out.download();
  const std::vector<float> eager_logits = logits.download();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  KVT_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  step();
  KVT_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
  KVT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 3; ++rep) {
    KVT_CUDA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.size() * 4, st));
    KVT_CUDA_CHECK(cudaGraphLaunch(exec, st));
    KVT_CUDA_CHECK(cudaStreamSynchronize(st));
    EXPECT_EQ(out.download(), eager) << rep;
    EXPECT_EQ(bit_differences(logits.download(), eager_logits), 0) << rep;
  }
  // The selection is the reference's on the row's own logits.
  for (int row = 0; row < s.rows; ++row) {
    std::vector<float> x(eager_logits.begin() + row * s.logit_stride,
                         eager_logits.begin() + row * s.logit_stride + s.vis(row));
    EXPECT_EQ(std::vector<std::int32_t>(eager.begin() + row * k, eager.begin() + (row + 1) * k),
              qsa_ref::topk_blocks(x, s.vis(row), k))
        << row;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
}

}  // namespace
}  // namespace kvtier::qsa::testing
