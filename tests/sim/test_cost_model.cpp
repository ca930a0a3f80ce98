#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#include "model/geometry.hpp"
#include "sim/profiles.hpp"

namespace kvtier::sim {
namespace {

TEST(Profiles, EveryBuiltinProfileParsesWithASourcePerValue) {
  ASSERT_GE(builtin_profiles().size(), 3u);
  for (const auto& b : builtin_profiles()) {
    const HardwareProfile p = load_profile(b.name);
    EXPECT_EQ(p.name, b.name);
    EXPECT_EQ(p.sources.size(), 89u) << b.name;
    for (const auto& [field, source] : p.sources)
      EXPECT_FALSE(source.empty()) << field;
  }
}

// The shipped H200 profile is the calibration's fit (validation/results/h200-2026-12-01.md):
// each value says how it was fitted, and the figures agree with what was measured before it.
TEST(Profiles, H200FiguresComeFromTheCalibration) {
  const HardwareProfile p = load_profile("h200-pcie5");
  EXPECT_NEAR(p.pcie_h2d_gbps, 55.0, 1.0);
  EXPECT_NEAR(p.pcie_d2h_gbps, 55.0, 1.0);
  EXPECT_NEAR(p.zero_copy_read_gbps, 50.0, 2.0);
  EXPECT_NEAR(p.launch_us, 3.7, 0.5);
  EXPECT_NEAR(p.graph_launch_us, 0.7, 0.2);
  for (const char* field : {"pcie_h2d_gbps", "launch_us", "attention_fixed_us",
                            "attention_fp8_gbps", "ensure_ns_per_slot"}) {
    EXPECT_EQ(p.source(field).rfind("fitted (least squares", 0), 0u) << field;
  }
  ASSERT_TRUE(p.validation.has_value());
}

TEST(Profiles, UnknownNameAndBadFilesAreClearErrors) {
  try {
    load_profile("h900");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("h200-pcie5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(hardware_profile_from_json(R"({"name":"x","params":{"hbm_gbps":{"value":1}}})"),
               ConfigError);  // no source
  EXPECT_THROW(
      hardware_profile_from_json(R"({"name":"x","params":{"hbm":{"value":1,"source":"s"}}})"),
      ConfigError);  // unknown parameter
  EXPECT_THROW(hardware_profile_from_json(R"({"name":"x","params":{}})"), ConfigError);  // missing
}

// Measured on the H200 (docs/architecture.md, "Measured facts"): a decode step reading its
// 2051-token bf16 selection in place moves 4.2 MB per layer: about 82 us at 51 GB/s.
TEST(CostModel, InPlaceDecodeReadMatchesTheDesignEstimate) {
  const CostModel c(load_profile("h200-pcie5"));
  const std::int64_t bytes = 2051 * 2048;
  const double us = static_cast<double>(c.zero_copy_read_ns(bytes)) / 1e3;
  EXPECT_NEAR(us, 84.0, 3.0);
}

// Round figures, so that the arithmetic can be read off.
HardwareProfile round_profile() {
  HardwareProfile p = load_profile("h200-pcie5");
  p.launch_us = 3.7;
  p.graph_launch_us = 0.55;
  p.pcie_h2d_gbps = 54.9;
  p.pcie_latency_us = 2.9;
  p.ensure_fixed_us = 4;
  p.ensure_ns_per_lookup = 0.5;
  p.ensure_ns_per_slot = 0.05;
  p.ensure_ns_per_miss = 20;
  return p;
}

TEST(CostModel, LinearInTheWorkWithAFixedPart) {
  const CostModel c(round_profile(), /*graphs=*/false);
  EXPECT_EQ(c.launch_ns(2), 7400);
  EXPECT_EQ(c.h2d_copy_ns(0, 1), 0);
  const std::int64_t one = c.h2d_copy_ns(549'000'000, 1);
  EXPECT_EQ(one, 2900 + 10'000'000);  // 549 MB at 54.9 GB/s = 10 ms, plus one latency
  EXPECT_EQ(c.ensure_ns(0, 0, 0), 4000);
  EXPECT_EQ(c.ensure_ns(1000, 1000, 10) - c.ensure_ns(0, 0, 0), 500 + 50 + 200);
  const CostModel g(round_profile(), /*graphs=*/true);
  EXPECT_EQ(g.launch_ns(2), 1100);
}

}  // namespace
// The ensure searches the pool for victims only when a page misses; the fp8 attend runs its own
// kernel, priced by its own fixed part and rate.
TEST(CostModel, AllHitStepsSearchNoSlotAndFp8AttendsAtItsOwnRate) {
  HardwareProfile p = load_profile("h200-pcie5");
  p.ensure_fixed_us = 1;
  p.ensure_ns_per_lookup = 1;
  p.ensure_ns_per_slot = 1;
  p.ensure_ns_per_miss = 10;
  p.attention_fixed_us = 2;
  p.hbm_gbps = 1000;
  p.attention_fp8_fixed_us = 20;
  p.attention_fp8_gbps = 100;
  const CostModel c(p);
  EXPECT_EQ(c.ensure_ns(100, 5000, 0), 1000 + 100);
  EXPECT_EQ(c.ensure_ns(100, 5000, 3), 1000 + 100 + 5000 + 30);
  EXPECT_EQ(c.attention_ns(1000000, 0, 0, KvDtype::bf16), 2000 + 1000);
  EXPECT_EQ(c.attention_ns(1000000, 0, 0, KvDtype::fp8), 20000 + 10000);
}

// h200-pcie5 with round figures for the attends, bf16 and fp8 (the fp8 bytes in one piece).
HardwareProfile round_attend() {
  HardwareProfile p = load_profile("h200-pcie5");
  p.sm_count = 132;
  p.attention_fixed_us = 6;
  p.hbm_gbps = 2000;
  p.attention_ns_per_cta = 10;
  p.attention_ns_per_cta_token = 50;
  p.attention_fp8_fixed_us = 20;
  p.attention_fp8_gbps = 400;
  p.attention_fp8_ns_per_row = 300;
  p.attention_fp8_knee_bytes = 0;
  return p;
}

// The bf16 attend pays per CTA of its grid, the fp8 one per row; the grid is the kernel's
// (model/attend_grid.hpp): one row of 2051 tokens over 65 splits of 32 tokens, 4 rows over 33
// splits (2 x 132 CTA slots), 32 rows over 4.
TEST(CostModel, TheAttendPaysPerCtaOfTheKernelsGridOrPerRow) {
  HardwareProfile p = round_attend();
  const CostModel c(p);
  EXPECT_EQ(c.attend_ctas(1, 2, 2051), 130);
  EXPECT_EQ(c.attend_ctas(4, 2, 2051), 264);
  EXPECT_EQ(c.attend_ctas(32, 2, 2051), 256);
  EXPECT_EQ(c.attend_ctas(1, 2, 100), 8);  // at least 32 tokens per CTA: 4 splits
  EXPECT_EQ(c.attention_ns(4'000'000, 1, 130, KvDtype::bf16), 6000 + 2000 + 1300);
  EXPECT_EQ(c.attention_ns(4'000'000, 4, 264, KvDtype::fp8), 20000 + 10000 + 1200);
  // The longest CTA's walk: every row split as the widest is
  EXPECT_EQ(c.attend_cta_tokens(1, 2, 2051), 32);   // 65 splits
  EXPECT_EQ(c.attend_cta_tokens(8, 2, 2051), 129);  // 16 splits
  EXPECT_EQ(c.attend_cta_tokens(8, 2, 8192), 512);
  EXPECT_EQ(c.attend_cta_tokens(1, 2, 0), 0);
  // fp8 over the host bank in place: one term for its reads and its work
  p.attention_fp8_host_fixed_us = 25;
  p.attention_fp8_host_gbps = 40;
  p.attention_fp8_host_ns_per_row = 500;
  EXPECT_EQ(CostModel(p).attention_fp8_host_ns(4'000'000, 4), 25000 + 100000 + 2000);
}

// The bf16 attend lasts the longer of its bytes' time and its longest CTA's walk: rows of equal
// width are bound by their bytes, one wide row among narrow ones by its CTAs; the fp8 attend
// (its grid's bytes) does not walk.
TEST(CostModel, TheAttendsSpanIsItsBytesOrItsLongestCta) {
  const CostModel c(round_attend());
  // 8 rows of 2,051 tokens (2 KiB each): 33.6 MB in 16.8 us against 129 tokens in 6.45 us
  const std::int64_t even = 8 * 2051 * 2048;
  EXPECT_EQ(c.attention_ns(even, 8, 256, KvDtype::bf16, c.attend_cta_tokens(8, 2, 2051)),
            6000 + 2560 + c.hbm_read_ns(even));
  // one row of 8,192 tokens beside 7 of 512: 24 MB in 12 us against 512 tokens in 25.6 us
  const std::int64_t mixed = (8192 + 7 * 512) * 2048;
  EXPECT_EQ(c.attention_ns(mixed, 8, 256, KvDtype::bf16, c.attend_cta_tokens(8, 2, 8192)),
            6000 + 2560 + 25600);
  EXPECT_EQ(c.attention_ns(mixed, 8, 256, KvDtype::bf16), 6000 + 2560 + c.hbm_read_ns(mixed));
  EXPECT_EQ(c.attention_ns(4'000'000, 8, 256, KvDtype::fp8, 512), 20000 + 2400 + 10000);
}

// Past one wave of CTAs (2 x 132 on this card: a prefill chunk's rows, one CTA a row and KV
// head), the attention_waves terms price the attend: their own fixed part, per CTA and rate.
// At one wave and below, and on a profile that did not measure them, the one-wave terms do.
TEST(CostModel, AttendsPastOneWaveHaveTheirOwnTerms) {
  HardwareProfile p = round_attend();
  p.attention_waves_fixed_us = 0;
  p.attention_waves_ns_per_cta = 0;
  p.attention_waves_gbps = 0;
  const std::int64_t chunk = std::int64_t{2048} * 2051 * 2048;  // 2,048 rows of 2,051 tokens
  const std::int64_t walk = 2051 * 50;
  EXPECT_FALSE(CostModel(p).past_one_wave(4096));
  EXPECT_EQ(CostModel(p).attention_ns(chunk, 2048, 4096, KvDtype::bf16, 2051),
            6000 + 40960 + CostModel(p).hbm_read_ns(chunk));
  p.attention_waves_fixed_us = 30;
  p.attention_waves_ns_per_cta = 4;
  p.attention_waves_gbps = 4000;
  const CostModel c(p);
  EXPECT_FALSE(c.past_one_wave(264));
  EXPECT_TRUE(c.past_one_wave(265));
  EXPECT_EQ(c.attention_ns(chunk, 2048, 4096, KvDtype::bf16, 2051),
            30000 + 16384 + 2'150'629);  // 8.6 GB at 4 TB/s
  // one wave: the one-wave terms still
  const std::int64_t wave = std::int64_t{132} * 2051 * 2048;
  EXPECT_EQ(c.attention_ns(wave, 132, 264, KvDtype::bf16, 2051),
            6000 + 2640 + std::max(c.hbm_read_ns(wave), walk));
  // a wide row's walk still bounds an attend of few bytes
  EXPECT_EQ(c.attention_ns(1000, 300, 600, KvDtype::bf16, 20000), 30000 + 2400 + 20000 * 50);
  // the fp8 attend keeps its own terms
  EXPECT_EQ(c.attention_ns(4'000'000, 2048, 4096, KvDtype::fp8),
            CostModel(round_attend()).attention_ns(4'000'000, 2048, 4096, KvDtype::fp8));
}

// Staged prefill windows: the gather per window and per byte, each window's ops per window and per
// row of its request, the reset per row; without the staging terms, copies and nothing else.
TEST(CostModel, StagedWindowsHaveTheirOwnTerms) {
  HardwareProfile p = round_attend();
  p.staging_gbps = 0;
  const std::int64_t window = std::int64_t{2048} * 131072;  // 2,048 bf16 layer pages: 256 MiB
  EXPECT_EQ(CostModel(p).staging_ns(3 * window, 3), CostModel(p).h2d_copy_ns(3 * window, 3));
  EXPECT_EQ(CostModel(p).window_fold_ns(3, 3 * 2048), 0);
  EXPECT_EQ(CostModel(p).fold_reset_ns(16384), 0);
  p.staging_fixed_us = 35;
  p.staging_gbps = 50;
  p.window_fold_fixed_us = 6;
  p.window_fold_ns_per_row = 22;
  p.fold_reset_fixed_us = 3;
  p.fold_reset_ns_per_row = 7.5;
  const CostModel c(p);
  EXPECT_EQ(c.staging_ns(3 * window, 3), 3 * 35000 + 16'106'127);  // 805 MB at 50 GB/s
  EXPECT_EQ(c.staging_ns(0, 0), 0);
  EXPECT_EQ(c.window_fold_ns(3, 3 * 2048), 3 * 6000 + 3 * 2048 * 22);
  EXPECT_EQ(c.window_fold_ns(0, 0), 0);
  EXPECT_EQ(c.fold_reset_ns(16384), 3000 + 122880);
}

// One decode row's attend over pages the forward before read: the whole saving while that
// forward's selections fit, less past them, nothing from attention_l2_reuse_none_bytes; 0 where
// the profile prices none.
TEST(CostModel, TheL2ReuseFallsWithTheWorkingSet) {
  HardwareProfile p = load_profile("h200-pcie5");
  p.attention_l2_reuse_us = 1.5;
  p.attention_l2_reuse_full_bytes = 25e6;
  p.attention_l2_reuse_none_bytes = 100e6;
  const CostModel c(p);
  EXPECT_EQ(c.attention_l2_reuse_ns(4'000'000), 1500);
  EXPECT_EQ(c.attention_l2_reuse_ns(25'000'000), 1500);
  EXPECT_EQ(c.attention_l2_reuse_ns(50'000'000), 1000);
  EXPECT_EQ(c.attention_l2_reuse_ns(100'000'000), 0);
  EXPECT_EQ(c.attention_l2_reuse_ns(400'000'000), 0);
  p.attention_l2_reuse_us = 0;
  EXPECT_EQ(CostModel(p).attention_l2_reuse_ns(4'000'000), 0);
  // A level above zero needs `none` above `full`.
  p.attention_l2_reuse_us = 1.5;
  p.attention_l2_reuse_none_bytes = 25e6;
  EXPECT_THROW(p.validate(), ConfigError);
}

// A profile whose figures would price ops past what the simulator times is refused naming the
// figure: a rate below 1 KB/s, a fixed cost past a second, a knee past 1 PiB. A term not in use
// may stay 0, and a rate may be as high as a what-if profile likes (a free term).
TEST(Profiles, FiguresNoGpuHasAreRefusedNamingTheFigure) {
  const HardwareProfile base = load_profile("h200-pcie5");
  const auto refusal = [&base](std::string_view field, double v) {
    HardwareProfile p = base;
    p.set(field, v, "test");
    try {
      p.validate();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal("zero_copy_read_gbps", 1e-12).find("zero_copy_read_gbps: must be at least"),
            std::string::npos);
  EXPECT_NE(refusal("projection_wide_tflops", 1e-9).find("projection_wide_tflops"),
            std::string::npos);
  EXPECT_NE(refusal("pcie_latency_us", 1e12).find("pcie_latency_us: must be within 0 .. 1e+06"),
            std::string::npos);
  EXPECT_NE(refusal("ensure_ns_per_lookup", 1e10).find("ensure_ns_per_lookup"), std::string::npos);
  EXPECT_NE(refusal("step_beside_us_per_row_doubling", 2e6).find("step_beside_us_per_row_doubling"),
            std::string::npos);
  EXPECT_NE(refusal("attention_l2_reuse_none_bytes", 1e300).find("attention_l2_reuse_none_bytes"),
            std::string::npos);
  EXPECT_NE(refusal("device_memory_gib", 1e12).find("device_memory_gib"), std::string::npos);
  EXPECT_NE(refusal("non_qsa_forward_us", 1e7).find("non_qsa_forward_us"), std::string::npos);
  // within: the edges, a free rate, a term not in use
  EXPECT_EQ(refusal("zero_copy_read_gbps", 1e-6), "");
  EXPECT_EQ(refusal("pcie_latency_us", 1e6), "");
  EXPECT_EQ(refusal("projection_gbps", 1e9), "");
  EXPECT_EQ(refusal("staging_gbps", 0), "");
  EXPECT_EQ(refusal("non_qsa_token_us", 0), "");
}

// Past 2^62 ns an op is refused, not rounded into a wrapped (negative) duration: the backstop
// behind the profile's ranges, for what a profile within them still cannot time (8 TiB at the
// slowest rate a profile may give).
TEST(CostModel, AnOpPastWhatTheSimulatorTimesIsRefused) {
  HardwareProfile p = load_profile("h200-pcie5");
  p.zero_copy_read_gbps = 1e-6;
  const CostModel c(p);
  EXPECT_EQ(c.in_place_read_ns(std::int64_t{1} << 30),
            (std::int64_t{1} << 30) * 1000000);  // 12 days
  try {
    (void)c.in_place_read_ns(std::int64_t{1} << 43);
    ADD_FAILURE() << "8 TiB at 1e-6 GB/s was priced";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("past what the simulator times"), std::string::npos);
  }
}

// The store is one kernel priced by what it writes: into the pool, its fixed part and the
// bytes at its HBM rate; into the host bank, two pieces (a fixed part and a small cost per KiB
// up to the knee, the link's rate past it), the pool's bytes beside; each dtype its own terms.
TEST(CostModel, TheStoreIsPricedByTheBytesItWritesWhere) {
  HardwareProfile p = load_profile("h200-pcie5");
  p.store_fixed_us = 1;
  p.store_hbm_gbps = 2000;
  p.store_host_us = 2.5;
  p.store_host_knee_bytes = 131072;
  p.store_host_ns_per_kib = 4;
  p.zero_copy_write_gbps = 50;
  p.store_fp8_fixed_us = 2;
  p.store_fp8_hbm_gbps = 1000;
  p.store_fp8_host_us = 3;
  p.store_fp8_host_knee_bytes = 0;
  p.store_fp8_host_ns_per_kib = 0;
  p.store_fp8_host_gbps = 40;
  const CostModel c(p);
  const std::int64_t prefill = 4096 * 2048;  // one layer of a 4096-token chunk, bf16
  EXPECT_EQ(c.store_ns(prefill, 0), 1000 + 4194);
  // 2500 + 128 KiB x 4 ns + (8 MiB - 128 KiB) at 50 GB/s
  EXPECT_EQ(c.store_ns(0, prefill), 2500 + 512 + 165151);
  EXPECT_EQ(c.store_ns(prefill, prefill), 4194 + 2500 + 512 + 165151);
  EXPECT_EQ(c.store_ns(2048, 0), 1000 + 1);
  EXPECT_EQ(c.store_ns(0, 2048), 2500 + 8);  // below the knee: the link absorbs it
  EXPECT_EQ(c.store_ns(4096 * 1040, 4096 * 1040, KvDtype::fp8), 4260 + 3000 + 106496);
  // The pool's bytes in two pieces: 0.5 ns per KiB up to 1 MiB, 2,000 GB/s past it.
  p.store_knee_bytes = 1 << 20;
  p.store_ns_per_kib = 0.5;
  const CostModel k(p);
  EXPECT_EQ(k.store_ns(2048, 0), 1000 + 1);
  EXPECT_EQ(k.store_ns(prefill, 0), 1000 + 512 + 3670);  // 1 MiB at 0.5 ns/KiB, 7 MiB at 2 TB/s
  EXPECT_EQ(k.store_ns(prefill, prefill), 512 + 3670 + 2500 + 512 + 165151);
}

// The fp8 attends' bytes in two pieces: a small cost per KiB up to the knee (their CTAs fit on
// the SMs), their rate past it; knee 0 is the line.
TEST(CostModel, TheFp8AttendsHaveAKneeInTheirBytes) {
  HardwareProfile p = load_profile("h200-pcie5");
  p.attention_fp8_fixed_us = 25;
  p.attention_fp8_gbps = 250;
  p.attention_fp8_ns_per_row = 400;
  p.attention_fp8_knee_bytes = 4'000'000;
  p.attention_fp8_ns_per_kib = 1.024;  // 1 ns per 1,000 bytes
  p.attention_fp8_host_fixed_us = 35;
  p.attention_fp8_host_gbps = 50;
  p.attention_fp8_host_ns_per_row = 100;
  p.attention_fp8_host_knee_bytes = 1'000'000;
  p.attention_fp8_host_ns_per_kib = 5.12;  // 5 ns per 1,000 bytes
  const CostModel c(p);
  EXPECT_EQ(c.attention_ns(2'000'000, 1, 130, KvDtype::fp8), 25000 + 400 + 2000);
  EXPECT_EQ(c.attention_ns(8'000'000, 2, 264, KvDtype::fp8), 25000 + 800 + 4000 + 16000);
  EXPECT_EQ(c.attention_fp8_host_ns(500'000, 1), 35000 + 100 + 2500);
  EXPECT_EQ(c.attention_fp8_host_ns(3'000'000, 2), 35000 + 200 + 5000 + 40000);
  p.attention_fp8_knee_bytes = 0;
  EXPECT_EQ(CostModel(p).attention_ns(8'000'000, 2, 264, KvDtype::fp8), 25000 + 800 + 32000);
}

// h200-pcie5 with round figures for the step beside up to kStepGroupedRows rows.
HardwareProfile round_step_beside() {
  HardwareProfile p = load_profile("h200-pcie5");
  p.step_beside_fixed_us = 10;
  p.step_beside_us_per_row_doubling = 3;
  p.step_beside_ns_per_page = 2;
  p.step_beside_ns_per_slot = 0.5;
  p.step_beside_ns_per_miss = 40;
  p.step_beside_ns_per_page_missing = 1;
  p.step_beside_us_missing = 2.5;
  return p;
}

// The step beside (MirrorEngine::residency_beside_async) has its own terms: its rows (by their
// doublings), its query's page entries, its misses; a step that misses searches the slots and
// goes over its pages again.
TEST(CostModel, TheStepBesideHasItsOwnTerms) {
  const CostModel c(round_step_beside());
  EXPECT_EQ(c.step_beside_ns(1, 1000, 8192, 0), 10000 + 2000);  // all hit: no slot searched
  EXPECT_EQ(c.step_beside_ns(2, 1000, 8192, 0), 10000 + 3000 + 2000);
  EXPECT_EQ(c.step_beside_ns(8, 1000, 8192, 16), 10000 + 9000 + 2000 + 4096 + 640 + 1000 + 2500);
  EXPECT_NE(c.step_beside_ns(1, 1000, 8192, 16), c.ensure_ns(1000, 8192, 16));
}

// Past kStepGroupedRows rows the step's compaction takes one warp a row: the step beside is
// priced by its second piece, per row, from exactly that row count on.
TEST(CostModel, TheStepBesideHasAPiecePastTheGroupedRows) {
  HardwareProfile p = round_step_beside();
  p.step_beside_wide_fixed_us = 7;
  p.step_beside_wide_ns_per_row = 500;
  p.step_beside_wide_ns_per_page = 5;
  p.step_beside_wide_ns_per_slot = 0.25;
  p.step_beside_wide_ns_per_miss = 60;
  p.step_beside_wide_ns_per_page_missing = 0.5;
  const CostModel c(p);
  EXPECT_EQ(c.step_beside_ns(kStepGroupedRows, 4000, 8192, 16),
            10000 + 9000 + 8000 + 4096 + 640 + 4000 + 2500);
  EXPECT_EQ(c.step_beside_ns(kStepGroupedRows + 1, 4000, 8192, 16),
            7000 + 4500 + 20000 + 2048 + 960 + 2000);
  EXPECT_EQ(c.step_beside_ns(32, 4000, 8192, 0), 7000 + 16000 + 20000);  // all hit
}

// The copy of the step's misses by its own blocks has its own latency and rate.
TEST(CostModel, TheStepBesideCopiesAtItsOwnRate) {
  HardwareProfile p = load_profile("h200-pcie5");
  p.pcie_latency_us = 1;
  p.zero_copy_read_gbps = 50;
  p.step_beside_copy_us = 3;
  p.step_beside_copy_gbps = 40;
  const CostModel c(p);
  EXPECT_EQ(c.step_beside_copy_ns(0), 0);
  EXPECT_EQ(c.step_beside_copy_ns(400'000), 3000 + 10000);
  EXPECT_EQ(c.zero_copy_read_ns(400'000), 1000 + 8000);
}

// The replay's fp8 attend is priced over its grid: every row as wide as the widest.
TEST(CostModel, GridBytesScaleToTheWidestRow) {
  EXPECT_EQ(CostModel::grid_bytes(1000, 4000, 1000), 4000);
  EXPECT_EQ(CostModel::grid_bytes(1000, 1000, 1000), 1000);
  EXPECT_EQ(CostModel::grid_bytes(1000, 500, 1000), 1000);  // never below the bytes read
  EXPECT_EQ(CostModel::grid_bytes(1000, 4000, 0), 1000);
}

// The attend's in-place reads are its own: the bytes at the link's rate, no transfer latency
// (the attend's fixed part is priced once, by its terms).
TEST(CostModel, InPlaceReadsAreTheAttendsBytesOverTheLink) {
  const CostModel c(load_profile("h200-pcie5"));
  const std::int64_t bytes = 2051 * 2048;
  EXPECT_EQ(c.in_place_read_ns(0), 0);
  EXPECT_NEAR(static_cast<double>(c.zero_copy_read_ns(bytes) - c.in_place_read_ns(bytes)),
              c.profile().pcie_latency_us * 1e3, 1.0);
}

// The kernel terms are timed as graph nodes: their launches cost nothing more with graphs,
// and eager only what a launch costs over a graph node.
TEST(CostModel, KernelTermsHoldTheirGraphNodes) {
  const HardwareProfile p = round_profile();
  EXPECT_EQ(CostModel(p, /*graphs=*/true).kernel_launch_ns(2), 0);
  EXPECT_EQ(CostModel(p, /*graphs=*/false).kernel_launch_ns(2), 2 * (3700 - 550));
  HardwareProfile slow_graph = p;
  slow_graph.graph_launch_us = 5;
  EXPECT_EQ(CostModel(slow_graph, /*graphs=*/false).kernel_launch_ns(3), 0);
}

// The runner's projections: up to kNarrowProjectionRows rows its own GEMMs (a fixed part, the
// weights at a rate, a cost per row), past them cuBLAS (the flops, never faster than the read);
// the index and top-k calls have fixed parts; the layer's small kernels are linear in the rows.
TEST(CostModel, ProjectionsIndexTopkAndTheSmallKernels) {
  HardwareProfile p = round_profile();
  p.projection_fixed_us = 4;
  p.projection_gbps = 3500;
  p.projection_ns_per_row = 200;
  p.projection_wide_fixed_us = 10;
  p.projection_wide_tflops = 700;
  p.layer_ops_fixed_us = 9;
  p.layer_ops_ns_per_row = 40;
  p.indexer_fixed_us = 4.5;
  p.topk_fixed_us = 18;
  p.indexer_ns_per_row_block = 0.5;
  const CostModel c(p);
  const Geometry g;
  EXPECT_EQ(g.input_projection_bytes(), 2560LL * 13952 * 2);  // 71.4 MB
  EXPECT_EQ(g.output_projection_bytes(), 6144LL * 2560 * 2);  // 31.5 MB
  const std::int64_t w = 35'000'000;                          // 10 us at 3,500 GB/s
  EXPECT_EQ(c.projection_ns(w, 0), 0);
  EXPECT_EQ(c.projection_ns(w, 1), 4000 + 10'000 + 200);
  EXPECT_EQ(c.projection_ns(w, kNarrowProjectionRows), 4000 + 10'000 + 64 * 200);
  // 128 rows: 4.48 GFLOP at 700 TFLOP/s = 6.4 us, below the 10 us read
  EXPECT_EQ(c.projection_ns(w, 128), 10'000 + 10'000);
  // 4,096 rows: 143.36 GFLOP = 204.8 us
  EXPECT_EQ(c.projection_ns(w, 4096), 10'000 + 204'800);
  EXPECT_EQ(c.layer_ops_ns(0), 0);
  EXPECT_EQ(c.layer_ops_ns(100), 9000 + 4000);
  EXPECT_EQ(c.indexer_ns(1000) - c.indexer_ns(0), 500);
  EXPECT_EQ(c.indexer_ns(0), 4500);
  EXPECT_EQ(c.topk_ns(0), 18'000);
}

// The runner's top-k kernel by rows and blocks, each priced by its own terms.
TEST(CostModel, TopkIsPricedByTheKernelTheRunnerTakes) {
  EXPECT_EQ(topk_path(1, 262144), TopkPath::cluster);
  EXPECT_EQ(topk_path(kTopkClusterRows, 262144), TopkPath::cluster);
  EXPECT_EQ(topk_path(kTopkClusterRows + 1, 1024), TopkPath::chain);
  EXPECT_EQ(topk_path(kTopkOneCtaRows - 1, 1024), TopkPath::chain);
  EXPECT_EQ(topk_path(kTopkOneCtaRows, kTopkOneCtaBlocks), TopkPath::one_cta);
  EXPECT_EQ(topk_path(kTopkOneCtaRows, kTopkOneCtaBlocks + 1), TopkPath::chain);
  EXPECT_EQ(topk_path(4096, 8192), TopkPath::one_cta);
  HardwareProfile p = round_profile();
  p.topk_fixed_us = 18;
  p.topk_ns_per_row_block = 0.02;
  p.topk_one_cta_fixed_us = 5;
  p.topk_one_cta_ns_per_row_block = 0.01;
  p.topk_chain_fixed_us = 30;
  p.topk_chain_ns_per_row_block = 0.03;
  const CostModel c(p);
  EXPECT_EQ(c.topk_ns(100'000), 18'000 + 2'000);
  EXPECT_EQ(c.topk_ns(100'000, TopkPath::cluster), 18'000 + 2'000);
  EXPECT_EQ(c.topk_ns(100'000, TopkPath::one_cta), 5'000 + 1'000);
  // one CTA a row: its rows cost besides (the other kernels have no such term)
  p.topk_one_cta_ns_per_row = 70;
  EXPECT_EQ(CostModel(p).topk_ns(100'000, TopkPath::one_cta, 2048), 5'000 + 1'000 + 143'360);
  EXPECT_EQ(CostModel(p).topk_ns(100'000, TopkPath::chain, 2048), 30'000 + 3'000);
  EXPECT_EQ(c.topk_ns(100'000, TopkPath::chain), 30'000 + 3'000);
}

}  // namespace kvtier::sim
