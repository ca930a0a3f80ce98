// GPU tests of the decode-sized paths of the QSA indexer (label gpu; skipped without a device):
// the shared-memory top-k (one CTA per row, keys kept in shared memory) against the previous
// kernels and the CPU reference, and the decode index kernel against the prefill tensor-core
// kernel (the same bits) and exact fp64 sums. 1, 2 and 16 rows over 2k / 32k / 64k blocks.
#include <gtest/gtest.h>

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

// Sets an environment variable for a scope (the kernel choice knobs), restoring "unset".
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;
  ~EnvScope() { unsetenv(name_); }

 private:
  const char* name_;
};

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

struct TopkOut {
  std::vector<std::int32_t> single, multi;  // the entry without / with a workspace
};

TopkOut run_topk(const Buf<float>& x, std::int64_t stride, const Buf<std::int32_t>& n_valid,
                 int rows, std::int64_t max_n, int k) {
  Buf<std::int32_t> pos(rows), req(rows), out(static_cast<std::size_t>(rows) * k),
      work(static_cast<std::size_t>(topk_workspace_bytes(rows, max_n) / 4 + 1));
  const Rows r{req.get(), pos.get(), rows};
  TopkOut o;
  topk(x.get(), stride, n_valid.get(), r, 4, k, out.get(), nullptr);
  QSA_CHECK(cudaPeekAtLastError());
  QSA_CHECK(cudaDeviceSynchronize());
  o.single = out.download();
  out.upload(std::vector<std::int32_t>(out.size(), 12345));
  topk(x.get(), stride, n_valid.get(), r, 4, k, out.get(), work.get(), max_n, nullptr);
  QSA_CHECK(cudaPeekAtLastError());
  QSA_CHECK(cudaDeviceSynchronize());
  o.multi = out.download();
  return o;
}

struct TopkCase {
  int rows;
  std::int64_t n;
  bool aligned;  // 16-byte aligned logit rows (stride % 4 == 0)
};

class DecodeTopk : public ::testing::TestWithParam<TopkCase> {};

// The shared-memory kernel (chosen automatically for these few rows, in clusters of 1 .. 16
// CTAs from max_n and the rows) equals the previous kernels (KVTIER_QSA_TOPK=old) and the CPU
// reference, for random, tied, all-equal, -inf and NaN / +-0 rows with ragged lengths. Forced
// to one CTA per row (KVTIER_QSA_TOPK=smem), rows of 64k blocks and more exceed the keys its
// shared memory holds: the rest is read from global memory in every pass.
TEST_P(DecodeTopk, EqualsOldKernelsAndReference) {
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
    const TopkOut now = run_topk(dx, stride, dn, c.rows, c.n, k);
    TopkOut old;
    {
      EnvScope env("KVTIER_QSA_TOPK", "old");
      old = run_topk(dx, stride, dn, c.rows, c.n, k);
    }
    TopkOut forced;
    {
      EnvScope env("KVTIER_QSA_TOPK", "smem");  // one CTA per row (longer rows partly global)
      forced = run_topk(dx, stride, dn, c.rows, c.n, k);
    }
    // Clusters (the size from max_n and the rows; without a workspace from the rows), each way
    // of adding to the histograms.
    for (const char* mode : {"match", "plain", "uniform"}) {
      EnvScope env("KVTIER_QSA_TOPK", "cluster");
      EnvScope hist("KVTIER_QSA_TOPK_HIST", mode);
      const TopkOut clustered = run_topk(dx, stride, dn, c.rows, c.n, k);
      EXPECT_EQ(clustered.multi, old.single) << mode;
      EXPECT_EQ(clustered.single, old.single) << mode;
    }
    EXPECT_EQ(old.single, old.multi);
    EXPECT_EQ(now.single, old.single);
    EXPECT_EQ(now.multi, old.single);
    EXPECT_EQ(forced.single, old.single);
    EXPECT_EQ(forced.multi, old.single);
    for (int r = 0; r < c.rows; ++r) {
      std::vector<float> row(x.begin() + r * stride, x.begin() + r * stride + c.n);
      // The kernels order -0 below +0 (their keys are the float bits); the reference ties
      // them. These inputs hold no negative finite value, so -0 -> the largest negative float
      // (-denorm_min) gives the reference the kernels' order without changing any other.
      for (float& v : row)
        if (v == 0.0f && std::signbit(v)) v = -std::numeric_limits<float>::denorm_min();
      const std::vector<std::int32_t> want = qsa_ref::topk_blocks(row, nv[r], k);
      const std::vector<std::int32_t> got(now.multi.begin() + std::int64_t{r} * k,
                                          now.multi.begin() + std::int64_t{r + 1} * k);
      EXPECT_EQ(got, want) << "row " << r << " n_valid " << nv[r];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, DecodeTopk,
                         ::testing::Values(TopkCase{1, 2048, true}, TopkCase{2, 2048, false},
                                           TopkCase{16, 2048, true}, TopkCase{1, 32768, true},
                                           TopkCase{2, 32768, true}, TopkCase{16, 32768, false},
                                           TopkCase{1, 65536, true}, TopkCase{2, 65536, false},
                                           TopkCase{16, 65536, true}, TopkCase{16, 100000, false},
                                           TopkCase{1, 262144, true}, TopkCase{2, 262144, false}),
                         [](const auto& tp) {
                           return std::to_string(tp.param.rows) + "rows_" +
                                  std::to_string(tp.param.n) +
                                  (tp.param.aligned ? "_aligned" : "_unaligned");
                         });

// Short rows under a large max_n: clusters of 8 CTAs whose slices hold a few dozen keys each
// (some rows at most k), and heavy ties across the slices. Small enough for the sanitizers.
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
    const TopkOut now = run_topk(dx, stride, dn, rows, max_n, k);
    EnvScope env("KVTIER_QSA_TOPK", "old");
    const TopkOut old = run_topk(dx, stride, dn, rows, max_n, k);
    EXPECT_EQ(now.multi, old.multi) << kind_name(kind);
    EXPECT_EQ(now.single, old.single) << kind_name(kind);
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row(x.begin() + r * stride, x.begin() + (r + 1) * stride);
      EXPECT_EQ(
          std::vector<std::int32_t>(now.multi.begin() + r * k, now.multi.begin() + (r + 1) * k),
          qsa_ref::topk_blocks(row, nv[r], k))
          << kind_name(kind) << " row " << r;
    }
  }
}

// Small rows for the sanitizers: every form of the shared-memory kernel (one CTA; clusters of
// 6 CTAs through KVTIER_QSA_TOPK_KEYS = 512, 2 with 2048; the three histogram modes) equals the
// previous kernels and the reference. KVTIER_QSA_TEST_SMALL=1 (racecheck, about 5 s per top-k
// launch there): the tied rows only, one CTA (4096 keys) and clusters of 6 (512).
TEST(DecodeTopkSmall, EveryForm) {
  REQUIRE_GPU();
  const int k = 512, rows = 3;
  const std::int64_t stride = 3000;
  const std::vector<std::int32_t> nv = {3000, 1500, 700};
  Buf<std::int32_t> dn(nv.size());
  dn.upload(nv);
  std::vector<Kind> kinds = {Kind::random, Kind::ties, Kind::nan_zero};
  if (std::getenv("KVTIER_QSA_TEST_SMALL") != nullptr) kinds = {Kind::ties};
  for (const Kind kind : kinds) {
    const std::vector<float> x = topk_input(kind, rows, stride, 77u + static_cast<unsigned>(kind));
    Buf<float> dx(x.size());
    dx.upload(x);
    TopkOut old;
    {
      EnvScope env("KVTIER_QSA_TOPK", "old");
      old = run_topk(dx, stride, dn, rows, stride, k);
    }
    EXPECT_EQ(old.multi, old.single);
    for (const char* mode : {"match", "plain", "uniform"})
      for (const char* keys : {"4096", "2048", "512"}) {
        if (kinds.size() == 1 && std::strcmp(keys, "2048") == 0) continue;
        EnvScope env("KVTIER_QSA_TOPK", "cluster");
        EnvScope hist("KVTIER_QSA_TOPK_HIST", mode);
        EnvScope per("KVTIER_QSA_TOPK_KEYS", keys);
        const TopkOut now = run_topk(dx, stride, dn, rows, stride, k);
        EXPECT_EQ(now.multi, old.single) << kind_name(kind) << " " << mode << " " << keys;
        EXPECT_EQ(now.single, old.single) << kind_name(kind) << " " << mode << " " << keys;
      }
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row(x.begin() + r * stride, x.begin() + (r + 1) * stride);
      for (float& v : row)
        if (v == 0.0f && std::signbit(v)) v = -std::numeric_limits<float>::denorm_min();
      EXPECT_EQ(
          std::vector<std::int32_t>(old.single.begin() + r * k, old.single.begin() + (r + 1) * k),
          qsa_ref::topk_blocks(row, nv[r], k))
          << kind_name(kind) << " row " << r;
    }
  }
}

// n from the positions (n_valid null) and rows clamped to max_n by the workspace entry, as the
// multi-CTA chain clamps them: a row whose position sees more blocks than max_n.
TEST(DecodeTopkClamp, PositionsAndMaxN) {
  REQUIRE_GPU();
  const int k = 512, rows = 3;
  const std::int64_t stride = 40000;
  const std::vector<float> x = topk_input(Kind::random, rows, stride, 99);
  Buf<float> dx(x.size());
  dx.upload(x);
  const std::vector<std::int32_t> pos = {4 * 30000 + 2, 4 * 39999 + 3, 4 * 100};
  Buf<std::int32_t> dpos(pos.size()), dreq(pos.size());
  dpos.upload(pos);
  dreq.upload(std::vector<std::int32_t>(pos.size(), 0));
  auto run = [&](const char* variant, std::int64_t max_n, bool with_work) {
    EnvScope env("KVTIER_QSA_TOPK", variant);
    Buf<std::int32_t> out(static_cast<std::size_t>(rows) * k),
        work(static_cast<std::size_t>(topk_workspace_bytes(rows, max_n) / 4 + 1));
    const Rows r{dreq.get(), dpos.get(), rows};
    if (with_work)
      topk(dx.get(), stride, nullptr, r, 4, k, out.get(), work.get(), max_n, nullptr);
    else
      topk(dx.get(), stride, nullptr, r, 4, k, out.get(), nullptr);
    QSA_CHECK(cudaDeviceSynchronize());
    return out.download();
  };
  EXPECT_EQ(run("smem", 40000, false), run("old", 40000, false));
  EXPECT_EQ(run("smem", 35000, true), run("old", 35000, true));
  EXPECT_EQ(run("auto", 35000, true), run("old", 35000, true));
  const auto clamped = run("old", 35000, true);
  std::vector<float> row(x.begin() + stride, x.begin() + stride + 35000);
  EXPECT_EQ(std::vector<std::int32_t>(clamped.begin() + k, clamped.begin() + 2 * k),
            qsa_ref::topk_blocks(row, 35000, k));
}

// ---- index scoring -------------------------------------------------------------------------

struct IndexCase {
  std::vector<int> rows_per_req;  // consecutive rows of each request (decode: one row each)
  std::int64_t blocks;            // visible blocks of the last row of each request
  bool aligned;                   // logit rows 16-byte aligned
};

struct IndexSetup {
  int rows = 0, requests = 0;
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

  // Scores of rows [r0, r0 + n) into a poisoned [n][logit_stride] buffer.
  std::vector<float> run(const char* variant, int r0, int n) const {
    EnvScope env("KVTIER_QSA_INDEX", variant);
    Buf<float> logits(static_cast<std::size_t>(n * logit_stride));  // 0xff bytes
    index_scores(diq.get() + std::int64_t{r0} * 4 * kIndexDim, 4,
                 Rows{dreq.get() + r0, dpos.get() + r0, n}, dslab.get(), slab_stride, logits.get(),
                 logit_stride, max_blocks, nullptr);
    QSA_CHECK(cudaPeekAtLastError());
    QSA_CHECK(cudaDeviceSynchronize());
    return logits.download();
  }
};

int bit_differences(const std::vector<float>& a, const std::vector<float>& b) {
  int bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    bad += std::memcmp(&a[i], &b[i], 4) != 0;
  return bad;
}

class DecodeIndex : public ::testing::TestWithParam<IndexCase> {};

// The decode kernel (automatic for <= 16 rows) gives, for every row, the bits the prefill
// tensor-core kernel gives when that row's request is scored alone (KVTIER_QSA_INDEX=mma32);
// every visible entry matches the exact fp64 sum within the tolerance of the existing index
// test (2e-5 x the sum of |products|); entries at or beyond a row's visible blocks keep their
// poison.
TEST_P(DecodeIndex, SameBitsAsMmaKernelAndExactSums) {
  REQUIRE_GPU();
  const IndexCase c = GetParam();
  const std::uint64_t seed = 4242 + static_cast<std::uint64_t>(c.blocks);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const IndexSetup s(c, seed);
  const std::vector<float> got = s.run("auto", 0, s.rows);
  EXPECT_EQ(bit_differences(got, s.run("decode", 0, s.rows)), 0);
  // Per request, the prefill kernel on that request's rows alone.
  int r0 = 0;
  for (const int n : c.rows_per_req) {
    const std::vector<float> ref = s.run("mma32", r0, n);
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
                      IndexCase{{3, 13}, 2048, false}),
    [](const auto& tp) {
      int rows = 0;
      for (const int n : tp.param.rows_per_req)
        rows += n;
      return std::to_string(rows) + "rows_" + std::to_string(tp.param.rows_per_req.size()) +
             "req_" + std::to_string(tp.param.blocks) +
             (tp.param.aligned ? "_aligned" : "_unaligned");
    });

// Forced for more rows than a warp's 16 (groups of 16, 16 and 8 rows of one request, and
// requests split across groups): still the bits of the prefill kernel.
TEST(DecodeIndexForced, GroupsOfSixteenRows) {
  REQUIRE_GPU();
  const IndexSetup s(IndexCase{{40, 3, 17}, 3000, true}, 515);
  const std::vector<float> got = s.run("decode", 0, s.rows);
  int r0 = 0;
  for (const int n : {40, 3, 17}) {
    const std::vector<float> ref = s.run("mma32", r0, n);
    const std::vector<float> mine(got.begin() + r0 * s.logit_stride,
                                  got.begin() + (r0 + n) * s.logit_stride);
    EXPECT_EQ(bit_differences(mine, ref), 0) << "rows " << r0;
    r0 += n;
  }
}

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
  QSA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto step = [&] {
    index_scores(s.diq.get(), 4, r, s.dslab.get(), s.slab_stride, logits.get(), s.logit_stride,
                 s.max_blocks, st);
    topk(logits.get(), s.logit_stride, nullptr, r, 4, k, out.get(), work.get(), s.max_blocks, st);
  };
  step();
  QSA_CHECK(cudaStreamSynchronize(st));
  const std::vector<std::int32_t> eager = out.download();
  const std::vector<float> eager_logits = logits.download();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  QSA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  step();
  QSA_CHECK(cudaStreamEndCapture(st, &graph));
  QSA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 3; ++rep) {
    QSA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.size() * 4, st));
    QSA_CHECK(cudaGraphLaunch(exec, st));
    QSA_CHECK(cudaStreamSynchronize(st));
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
