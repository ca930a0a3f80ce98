// `kvtier run --trace` on the command line, without a GPU: the read modes are documented in
// --help, a bad --read value is refused by name, and a machine without a device says so.
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/cli_runner.hpp"
#include "traces/trace_io.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

// A function, not a constant: the path is looked up when a test runs, with ctest's environment.
std::string sample_trace() {
  return traces::samples_dir() + "/prefill-shared-prefix.ktr";
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(CliRunTrace, HelpTellsTheReadModes) {
  const auto r = run_kvtier("run --trace " + sample_trace() + " --help");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "--read attend|checksum")) << r.out;
  EXPECT_TRUE(has(r.out, "attend (default")) << r.out;
  EXPECT_TRUE(has(r.out, "the default with --verify")) << r.out;
  EXPECT_TRUE(has(r.out, "implies --read")) << r.out;
  EXPECT_TRUE(has(r.out, "is not timed")) << r.out;
  EXPECT_TRUE(has(r.out, "--copy-first")) << r.out;
  EXPECT_TRUE(has(r.out, "--policy")) << r.out;
  EXPECT_TRUE(has(r.out, "prefetch (also each layer's query")) << r.out;
}

// The policy's checks come before the trace is read or a device looked for.
TEST(CliRunTrace, PolicyIsCheckedBeforeAnythingRuns) {
  const std::string base = "run --trace " + sample_trace();
  const auto hybrid = run_kvtier(base + " --pool-pages 64 --policy hybrid");
  EXPECT_EQ(hybrid.exit_code, 1) << hybrid.out;
  EXPECT_TRUE(has(hybrid.out, "--policy hybrid: kvtier run replays lru and prefetch"))
      << hybrid.out;
  const auto device = run_kvtier(base + " --placement device --policy prefetch");
  EXPECT_EQ(device.exit_code, 1) << device.out;
  EXPECT_TRUE(has(device.out, "--policy applies to placement mirror only")) << device.out;
  const auto bad = run_kvtier(base + " --pool-pages 64 --policy fifo");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_TRUE(has(bad.out, "policy: expected lru, hybrid or prefetch, got 'fifo'")) << bad.out;
}

// --step-phases: told in --help, and refused before anything runs where no residency step is.
TEST(CliRunTrace, StepPhasesAreTheMirrorsOnly) {
  const std::string base = "run --trace " + sample_trace();
  const auto help = run_kvtier(base + " --help");
  EXPECT_TRUE(has(help.out, "--step-phases")) << help.out;
  EXPECT_TRUE(has(help.out, "spend their time")) << help.out;
  for (const char* placement : {"device", "host"}) {
    const auto r = run_kvtier(base + " --placement " + placement + " --step-phases");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out, "--step-phases applies to placement mirror only")) << r.out;
  }
}

TEST(CliRunTrace, BadReadModeOrNoDeviceIsAnError) {
  const auto bad = run_kvtier("run --trace " + sample_trace() + " --read both");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  // A CUDA build names the bad value; a build without CUDA says it has no backend.
  EXPECT_TRUE(has(bad.out, "--read: expected attend or checksum, got 'both'") ||
              has(bad.out, "without the CUDA backend"))
      << bad.out;
  const auto dec = run_kvtier("run --trace " + sample_trace() + " --decisions /dev/null");
  EXPECT_EQ(dec.exit_code, 1) << dec.out;
  EXPECT_TRUE(has(dec.out, "--decisions needs --verify") ||
              has(dec.out, "without the CUDA backend"))
      << dec.out;
}

}  // namespace
}  // namespace kvtier
