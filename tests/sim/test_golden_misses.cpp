// Golden figures: the bundled sample traces replayed through the simulator at pool sizes
// below, at and above each trace's cliff, with the exact lookups, hits, misses, evictions and
// drops the core produces. Any change to a decision rule (victims, stamps, compaction,
// select width, admission) moves these numbers; a change that should not must leave them.
// The figures are the same on the GPU (`kvtier run --trace ... --verify` makes the same
// decisions), which the gpu tests check on these traces.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "frontend/front_end.hpp"
#include "sim/profiles.hpp"
#include "sim/replay.hpp"
#include "traces/trace_io.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {
namespace {

struct Counts {
  std::int64_t lookups, hits, misses, evictions, drops;
  bool operator==(const Counts&) const = default;
};

struct Golden {
  const char* trace;
  std::int64_t slots;
  ResidencyUnit unit;
  Counts expected;
};

std::ostream& operator<<(std::ostream& os, const Counts& c) {
  return os << "{lookups " << c.lookups << ", hits " << c.hits << ", misses " << c.misses
            << ", evictions " << c.evictions << ", drops " << c.drops << "}";
}

class GoldenMisses : public ::testing::TestWithParam<Golden> {};

TEST_P(GoldenMisses, SampleTraceGivesTheRecordedCounts) {
  const Golden& gold = GetParam();
  const traces::TraceInput input = traces::file_trace(traces::samples_dir() + "/" + gold.trace);
  SimConfig c;
  c.placement = Placement::mirror;
  c.unit = gold.unit;
  c.pool_slots = gold.slots;
  c.check_memory = false;
  const SimResult r =
      simulate(input, frontend::scan_trace(input), CostModel(load_profile("h200-pcie5")), c);
  const LayerStats t = r.total();
  EXPECT_EQ((Counts{t.lookups, t.hits, t.misses, t.evictions, t.drops}), gold.expected)
      << gold.trace << " at " << gold.slots << " slots, unit " << to_string(gold.unit);
}

// concurrent8-16k-128k: 8 requests, the cliff between 4,000 and 6,000 slots per layer; the
// wide prefill rows bypass pools that cannot hold them (FrontEnd::plan_rows), so that from
// 4,000 slots per layer no selection is truncated. single-32k-decode1000: one
// request, everything fits from 600 slots. prefill-shared-prefix: shared pages, wide rows.
INSTANTIATE_TEST_SUITE_P(Samples, GoldenMisses,
                         ::testing::Values(Golden{"concurrent8-16k-128k.ktr",
                                                  4000,
                                                  ResidencyUnit::layer_page,
                                                  {4373315, 3977245, 396070, 340284, 0}},
                                           Golden{"concurrent8-16k-128k.ktr",
                                                  6000,
                                                  ResidencyUnit::layer_page,
                                                  {4477295, 4410215, 67080, 0, 0}},
                                           Golden{"concurrent8-16k-128k.ktr",
                                                  8499,
                                                  ResidencyUnit::layer_page,
                                                  {4523771, 4456691, 67080, 0, 0}},
                                           Golden{"concurrent8-16k-128k.ktr",
                                                  2000,
                                                  ResidencyUnit::all_layers_page,
                                                  {3153994, 2049912, 1104082, 1099969, 1218658}},
                                           Golden{"concurrent8-16k-128k.ktr",
                                                  6000,
                                                  ResidencyUnit::all_layers_page,
                                                  {4477295, 4471705, 5590, 0, 0}},
                                           Golden{"single-32k-decode1000.ktr",
                                                  256,
                                                  ResidencyUnit::layer_page,
                                                  {3086179, 2612915, 473264, 470192, 877523}},
                                           Golden{"single-32k-decode1000.ktr",
                                                  600,
                                                  ResidencyUnit::layer_page,
                                                  {3990052, 3983716, 6336, 0, 0}},
                                           Golden{"prefill-shared-prefix.ktr",
                                                  300,
                                                  ResidencyUnit::layer_page,
                                                  {86893, 78983, 7910, 2275, 128415}}),
                         [](const ::testing::TestParamInfo<Golden>& p) {
                           std::string name =
                               std::string(p.param.trace).substr(0, 6) + "_" +
                               std::to_string(p.param.slots) + "_" +
                               (p.param.unit == ResidencyUnit::layer_page ? "layer" : "all");
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace kvtier::sim
