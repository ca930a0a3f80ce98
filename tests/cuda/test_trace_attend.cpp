// `kvtier run --trace` in attend mode (cuda/trace_replay.hpp, ReadMode::attend): the trace's
// selections drive the real QSA attention kernel. Device, host and mirror placements give the
// same output digest (bit-identical attention outputs) whenever no placement drops pages, in
// bf16 and fp8, including a mirror pool that evicts; the mirror's compacted queries and copy
// lists still equal the core's and its --decisions lines the simulator's; the checksum mode
// still verifies on the same sample. The bundled samples are cut to their first forwards.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "cuda/engine.hpp"
#include "cuda/trace_replay.hpp"
#include "frontend/forward_schedule.hpp"
#include "frontend/front_end.hpp"
#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "tests/cuda/gpu_test_util.hpp"
#include "tests/cuda/replay_test_util.hpp"
#include "traces/generator.hpp"
#include "traces/trace_io.hpp"

namespace kvtier::cuda {
namespace {

// The first `forwards` forwards of a bundled sample (and the request records before them).
traces::TraceInput cut_sample(const std::string& file, std::int64_t forwards) {
  const traces::TraceInput in = traces::file_trace(traces::samples_dir() + "/" + file);
  auto stream = in.open();
  std::vector<traces::Record> recs;
  traces::Record r;
  std::int64_t n = 0;
  while (n < forwards && stream->next(r)) {
    if (std::holds_alternative<traces::Forward>(r)) ++n;
    recs.push_back(r);
  }
  return traces::memory_trace(file + " (first " + std::to_string(forwards) + " forwards)",
                              in.header, std::move(recs));
}

// The shared-prefix sample's first 40 forwards: 3 requests at a time sharing 192 pages, 771
// pages at the peak. A pool of 850 slots never drops a page (and never evicts); 300 evicts
// and drops (checked against the simulator on the CPU when this file was written).
constexpr const char* kSample = "prefill-shared-prefix.ktr";
constexpr std::int64_t kForwards = 40;
constexpr std::int64_t kNoDropPool = 850;
constexpr std::int64_t kEvictingPool = 300;

// Flash-Next geometry, one request of 64k tokens (prefill chunks of 4096, then 24 decode
// steps): rows select at most 513 of 1025 pages, so a pool of 900 slots evicts (about 4,300
// times) without dropping a page.
traces::TraceInput long_request() {
  const Geometry g;
  traces::GenParams p = traces::gen_preset("dsv4-flash");
  p.seed = 11;
  p.prompt_min = p.prompt_max = 65536;
  p.decode_min = p.decode_max = 24;
  p.prefill_chunk = 4096;
  p.prefill_samples = 4;
  traces::TraceHeader h;
  h.geometry = g;
  return traces::memory_trace("one 64k request", h, test::generated_records(g, p));
}
constexpr std::int64_t kLongPool = 900;

ReplayConfig attend_config(Placement p, KvDtype dt, std::int64_t pool = 0) {
  ReplayConfig c;
  c.read = ReadMode::attend;
  c.placement = p;
  c.dtype = dt;
  c.pool_pages = pool;
  return c;
}

// The attend kernel's compiled sizes are checked before anything is allocated (no GPU needed).
TEST(TraceAttend, NeedsTheCompiledHeadDimAndGroup) {
  Geometry g;
  g.head_dim = 64;
  traces::GenParams p = traces::gen_preset("dsv4-flash");
  p.prompt_min = p.prompt_max = 512;
  p.decode_min = p.decode_max = 2;
  traces::TraceGenerator gen(g, p);
  std::vector<traces::Record> recs;
  traces::Record r;
  while (gen.next(r))
    recs.push_back(r);
  traces::TraceHeader h;
  h.geometry = g;
  const traces::TraceInput in = traces::memory_trace("head_dim 64", h, std::move(recs));
  try {
    replay_trace(in, attend_config(Placement::device, KvDtype::bf16));
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("head_dim 256"), std::string::npos) << what;
    EXPECT_NE(what.find("GQA group 12"), std::string::npos) << what;
    EXPECT_NE(what.find("head_dim 64"), std::string::npos) << what;
  }
  EXPECT_EQ(parse_read_mode("attend", "--read"), ReadMode::attend);
  EXPECT_EQ(parse_read_mode("checksum", "--read"), ReadMode::checksum);
  EXPECT_THROW(parse_read_mode("both", "--read"), ConfigError);
}

TEST(TraceAttend, SampleDigestIsTheSameInEveryPlacement) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = cut_sample(kSample, kForwards);
  unsigned long long bf16_digest = 0;
  for (KvDtype dt : {KvDtype::bf16, KvDtype::fp8}) {
    ReplayConfig c = attend_config(Placement::device, dt);
    const ReplayResult dev = replay_trace(in, c);
    c.write_through = true;
    const ReplayResult wt = replay_trace(in, c);
    const ReplayResult host = replay_trace(in, attend_config(Placement::host, dt));
    const ReplayResult mir = replay_trace(in, attend_config(Placement::mirror, dt, kNoDropPool));
    ReplayConfig cf = attend_config(Placement::mirror, dt, kNoDropPool);
    cf.copy_first = true;
    const ReplayResult mir_copy_first = replay_trace(in, cf);
    EXPECT_EQ(mir_copy_first.total.hits, mir.total.hits);
    EXPECT_EQ(mir_copy_first.total.misses, mir.total.misses);
    EXPECT_EQ(dev.read, "attend");
    EXPECT_EQ(dev.total.forward, kForwards);
    EXPECT_EQ(dev.q_heads, 24);
    EXPECT_FALSE(dev.attend_kernel.empty());
    EXPECT_NE(dev.checksum, 0u);
    for (const ReplayResult* r : {&dev, &wt, &host, &mir, &mir_copy_first}) {
      EXPECT_EQ(r->total.drops, 0) << r->placement;
      EXPECT_EQ(r->total.missing, 0) << r->placement;
      EXPECT_EQ(r->checksum, dev.checksum) << r->placement << " " << r->dtype;
      EXPECT_GT(r->total.gpu_us, 0) << r->placement;
    }
    EXPECT_GT(mir.total.hits, 0);
    EXPECT_GT(mir.total.misses, 0);
    EXPECT_GT(host.total.h2d_bytes, 0);
    EXPECT_EQ(dev.total.d2h_bytes, 0);
    EXPECT_EQ(mir.total.d2h_bytes, wt.total.d2h_bytes);
    if (dt == KvDtype::bf16) {
      bf16_digest = dev.checksum;
    } else {
      EXPECT_NE(dev.checksum, bf16_digest);  // fp8 pages give other outputs
    }
  }
  // The digest covers every forward's outputs: one forward fewer gives another digest.
  const ReplayResult shorter = replay_trace(cut_sample(kSample, kForwards - 1),
                                            attend_config(Placement::device, KvDtype::bf16));
  EXPECT_NE(shorter.checksum, bf16_digest);
}

TEST(TraceAttend, SampleMirrorDecisionsMatchTheCore) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = cut_sample(kSample, kForwards);
  const std::string expected = test::simulator_decisions(in, kEvictingPool);
  ASSERT_FALSE(expected.empty());
  for (KvDtype dt : {KvDtype::bf16, KvDtype::fp8}) {
    std::ostringstream decisions;
    ReplayConfig c = attend_config(Placement::mirror, dt, kEvictingPool);
    c.verify = true;
    c.decisions = &decisions;
    const ReplayResult r = replay_trace(in, c);
    EXPECT_EQ(r.read, "attend");
    EXPECT_EQ(r.query_mismatches, 0) << r.first_mismatch;
    EXPECT_EQ(r.decision_mismatches, 0) << r.first_mismatch;
    EXPECT_EQ(r.total.missing, 0);
    EXPECT_GT(r.total.evictions, 0);
    EXPECT_GT(r.total.drops, 0);
    EXPECT_EQ(decisions.str(), expected);
  }
}

// A pool that evicts (and refetches from the host bank) but never drops: the outputs are
// still those of the device placement, bit for bit, and the decisions the core's.
TEST(TraceAttend, EvictingMirrorMatchesDevice) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = long_request();
  const std::string expected = test::simulator_decisions(in, kLongPool);
  for (KvDtype dt : {KvDtype::bf16, KvDtype::fp8}) {
    const ReplayResult dev = replay_trace(in, attend_config(Placement::device, dt));
    std::ostringstream decisions;
    ReplayConfig c = attend_config(Placement::mirror, dt, kLongPool);
    c.verify = true;
    c.decisions = &decisions;
    const ReplayResult mir = replay_trace(in, c);
    EXPECT_EQ(mir.query_mismatches, 0) << mir.first_mismatch;
    EXPECT_EQ(mir.decision_mismatches, 0) << mir.first_mismatch;
    EXPECT_EQ(decisions.str(), expected);
    EXPECT_GT(mir.total.evictions, 0);
    EXPECT_EQ(mir.total.drops, 0);
    EXPECT_EQ(dev.total.drops, 0);
    EXPECT_EQ(mir.total.missing, 0);
    EXPECT_NE(dev.checksum, 0u);
    EXPECT_EQ(mir.checksum, dev.checksum) << to_string(dt);
    // Without --verify the bf16 mirror reads the misses of its steady decode forwards in place
    // beside the ensure (frontend::decode_reads_in_place), and runs the step first in the
    // others: the same outputs and the same hit, miss and eviction counts as the checked run
    // (copy first).
    const ReplayResult fast = replay_trace(in, attend_config(Placement::mirror, dt, kLongPool));
    EXPECT_EQ(fast.mirror_reads, cuda::mirror_reads_rule(dt == KvDtype::bf16));
    int in_place = 0;
    frontend::LastForward last;
    for (const cuda::ReplayStep& s : fast.steps) {
      const bool decode = s.tokens == s.rows;
      EXPECT_EQ(s.reads_in_place,
                dt == KvDtype::bf16 && decode && frontend::decode_reads_in_place(last))
          << "forward " << s.forward;
      in_place += s.reads_in_place ? 1 : 0;
      last = frontend::LastForward{decode, s.misses,
                                   std::int64_t{s.rows} * in.header.geometry.qsa_layers()};
    }
    if (dt == KvDtype::bf16) {
      EXPECT_GT(in_place, 0);
    }
    EXPECT_EQ(fast.checksum, dev.checksum) << to_string(dt);
    EXPECT_EQ(fast.total.hits, mir.total.hits);
    EXPECT_EQ(fast.total.misses, mir.total.misses);
    EXPECT_EQ(fast.total.evictions, mir.total.evictions);
    EXPECT_EQ(fast.total.missing, 0);
  }
}

// The steps beside the attention, recorded (--step-phases): one record per in-place forward and
// layer, phases that add up within the step's span, and the same outputs and counts as the
// run that records nothing (the recording kernel makes the same decisions).
TEST(TraceAttend, StepPhasesRecordEveryStepBeside) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = long_request();
  const ReplayResult plain =
      replay_trace(in, attend_config(Placement::mirror, KvDtype::bf16, kLongPool));
  ReplayConfig c = attend_config(Placement::mirror, KvDtype::bf16, kLongPool);
  c.step_phases = true;
  const ReplayResult rec = replay_trace(in, c);
  EXPECT_EQ(rec.checksum, plain.checksum);
  EXPECT_EQ(rec.total.hits, plain.total.hits);
  EXPECT_EQ(rec.total.misses, plain.total.misses);
  EXPECT_EQ(rec.total.evictions, plain.total.evictions);
  int in_place = 0;
  for (const cuda::ReplayStep& s : rec.steps)
    in_place += s.reads_in_place ? 1 : 0;
  ASSERT_GT(in_place, 0);
  const StepPhases& p = rec.step_phases;
  EXPECT_EQ(p.launches, in_place * in.header.geometry.qsa_layers());
  for (double v : {p.ticket, p.compaction, p.check, p.mark, p.sort, p.victims, p.install, p.publish,
                   p.copy_exit, p.gap})
    EXPECT_GE(v, 0.0);
  EXPECT_GT(p.compaction, 0.0);
  EXPECT_GT(p.span, p.compaction);
  // medians need not add up exactly; the leader's phases lie within the span
  EXPECT_LE(p.ticket + p.compaction + p.check + p.mark + p.sort + p.victims + p.install,
            p.span * 1.5);
  // without the option nothing is recorded
  EXPECT_EQ(plain.step_phases.launches, 0);
}

// The prefetch policy on the evicting pool: each layer's query ensured into the next layer's
// pool beside the main stream. The outputs are still the device placement's bit for bit and
// the decisions (prefetches included) the simulator's; without --verify (a CUDA graph per
// forward, the prefetch on the stream beside) the same outputs and counts.
TEST(TraceAttend, PrefetchMirrorMatchesDevice) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = long_request();
  const std::string expected = test::simulator_decisions(in, kLongPool, MirrorPolicy::prefetch);
  ASSERT_NE(expected.find("\"kind\":\"prefetch\""), std::string::npos);
  for (KvDtype dt : {KvDtype::bf16, KvDtype::fp8}) {
    const ReplayResult dev = replay_trace(in, attend_config(Placement::device, dt));
    std::ostringstream decisions;
    ReplayConfig c = attend_config(Placement::mirror, dt, kLongPool);
    c.policy = MirrorPolicy::prefetch;
    c.verify = true;
    c.decisions = &decisions;
    const ReplayResult checked = replay_trace(in, c);
    EXPECT_EQ(checked.query_mismatches, 0) << checked.first_mismatch;
    EXPECT_EQ(checked.decision_mismatches, 0) << checked.first_mismatch;
    EXPECT_EQ(decisions.str(), expected);
    EXPECT_GT(checked.total.prefetched, 0);
    EXPECT_EQ(checked.total.drops, 0);
    EXPECT_EQ(checked.total.missing, 0);
    EXPECT_EQ(checked.checksum, dev.checksum) << to_string(dt);
    c.verify = false;
    c.decisions = nullptr;
    const ReplayResult fast = replay_trace(in, c);
    EXPECT_EQ(fast.mirror_reads, "through the pool after the ensure and miss copy");
    EXPECT_EQ(fast.checksum, dev.checksum) << to_string(dt);
    EXPECT_EQ(fast.total.hits, checked.total.hits);
    EXPECT_EQ(fast.total.misses, checked.total.misses);
    EXPECT_EQ(fast.total.evictions, checked.total.evictions);
    EXPECT_EQ(fast.total.prefetched, checked.total.prefetched);
    EXPECT_EQ(fast.total.missing, 0);
  }
}

// The checksum mode (what --verify proves on the CPU) on the same sample: the device
// placement, and the mirror with a pool that never drops and one that evicts and drops.
TEST(TraceAttend, ChecksumModeStillVerifiesOnTheSample) {
  KVT_REQUIRE_GPU();
  const traces::TraceInput in = cut_sample(kSample, kForwards);
  for (const auto& [placement, pool] :
       {std::pair{Placement::device, std::int64_t{0}}, std::pair{Placement::mirror, kNoDropPool},
        std::pair{Placement::mirror, kEvictingPool}}) {
    ReplayConfig c;
    c.read = ReadMode::checksum;
    c.placement = placement;
    c.pool_pages = pool;
    c.verify = true;
    const ReplayResult r = replay_trace(in, c);
    SCOPED_TRACE(std::string(to_string(placement)) + " pool " + std::to_string(pool) + ", drops " +
                 std::to_string(r.total.drops) + ", evictions " +
                 std::to_string(r.total.evictions));
    EXPECT_EQ(r.read, "checksum");
    EXPECT_EQ(r.query_mismatches, 0) << r.first_mismatch;
    EXPECT_EQ(r.decision_mismatches, 0) << r.first_mismatch;
    EXPECT_EQ(r.total.missing, 0);
    EXPECT_EQ(r.checksum_mismatches, 0) << "first: " << r.first_checksum_mismatch;
    EXPECT_EQ(r.checksum, r.expected_checksum);
  }
}

// The checksum mode's reference follows what each slot holds: in the shared-prefix sample two
// requests read their prefix before its owner's prefill wrote it (zeros then, not the
// prefix's bytes). Flash-Next pages without sharing (the 64k request, evicting or not), the
// host placement, and the other ensure forms on the shared-prefix sample.
TEST(TraceAttend, ChecksumModeFollowsWhatEachSlotHolds) {
  KVT_REQUIRE_GPU();
  struct Case {
    const char* what;
    bool shared;
    Placement placement;
    std::int64_t pool;
    EnsureForm form;
  };
  const Case cases[] = {
      {"64k request, mirror 900, block", false, Placement::mirror, kLongPool, EnsureForm::block},
      {"64k request, mirror 2000, block", false, Placement::mirror, 2000, EnsureForm::block},
      {"shared prefix, host", true, Placement::host, 0, EnsureForm::block},
      {"shared prefix, mirror 850, multi_block", true, Placement::mirror, kNoDropPool,
       EnsureForm::multi_block},
      {"shared prefix, mirror 850, core_thread", true, Placement::mirror, kNoDropPool,
       EnsureForm::core_thread},
  };
  const traces::TraceInput shared = cut_sample(kSample, 4);
  const traces::TraceInput single = long_request();
  for (const Case& k : cases) {
    ReplayConfig c;
    c.read = ReadMode::checksum;
    c.placement = k.placement;
    c.pool_pages = k.pool;
    c.form = k.form;
    c.verify = true;
    const ReplayResult r = replay_trace(k.shared ? shared : single, c);
    EXPECT_EQ(r.checksum_mismatches, 0) << k.what << ": first " << r.first_checksum_mismatch;
    EXPECT_EQ(r.total.missing, 0) << k.what;
  }
}

}  // namespace
}  // namespace kvtier::cuda
