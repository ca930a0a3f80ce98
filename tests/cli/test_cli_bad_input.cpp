// Issue 19's bad input, each found by trying, each now a clear error (exit 1, the option and
// its limit or need on stderr) that ends at once and leaves no file behind.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli/cli_fixtures.hpp"
#include "traces/trace_io.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::run_kvtier_argv;
using testing::TinyInputs;

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A refusal: exit 1 within a few seconds, the message holding every one of `parts`.
void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& parts,
                    double seconds = 5) {
  const CliRun r = run_kvtier_argv(args, 60);
  std::string cmd;
  for (const auto& a : args)
    cmd += " " + a;
  EXPECT_EQ(r.exit_code, 1) << "kvtier" << cmd << "\n" << r.out;
  EXPECT_LT(r.seconds, seconds) << "kvtier" << cmd;
  for (const auto& p : parts)
    EXPECT_TRUE(has(r.out, p)) << "'" << p << "' not in: kvtier" << cmd << "\n" << r.out;
  for (const char* internal : {"bad_alloc", "boost::", "[boost.json", "std::"})
    EXPECT_FALSE(has(r.out, internal)) << "kvtier" << cmd << "\n" << r.out;
}

TEST(CliBadInput, SimSlotsBeyondWhatCanBePriced) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string t = in.trace;
  // was: killed for memory (rc 137), and bad_alloc
  expect_refused({"sim", "--trace", t, "--slots", "99999999999999"},
                 {"--slots: at most 2147483646 (slot ids are 32-bit), got 99999999999999"});
  expect_refused({"sim", "--trace", t, "--slots", "1e13"}, {"--slots"});
  // within the ids, beyond the profile's card: the largest pool that fits
  expect_refused({"sim", "--trace", t, "--slots", "1000000000"},
                 {"device memory", "the largest pool that fits is"});
}

TEST(CliBadInput, BudgetNeverPrintsANegativeTotal) {
  // was: "device total -2716664072901836704", exit 0
  expect_refused({"budget", "--pool-slots", "10000000000000"},
                 {"--pool-slots: 1..2147483646 slots", "got 10000000000000"});
  expect_refused({"budget", "--context", "999999999999999999"}, {"--context: 1..", "32-bit"});
  // The largest sizes that can be priced are priced, positive.
  const CliRun r = run_kvtier_argv(
      {"budget", "--pool-slots", "2147483646", "--context", "137438953344", "--json"}, 10);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto o = boost::json::parse(r.out).as_object();
  EXPECT_GT(o.at("device_bytes").as_int64(), 0);
  EXPECT_GT(o.at("host_bytes").as_int64(), 0);
  // was: accepted silently
  expect_refused({"budget", "--device-gib", "nan"}, {"--device-gib", "got nan"});
  expect_refused({"budget", "--host-gib", "inf"}, {"--host-gib", "got inf"});
  expect_refused({"budget", "--device-gib", "-1"}, {"--device-gib"});
}

TEST(CliBadInput, TraceGenChecksBeforeItAllocatesOrWrites) {
  const TinyInputs& in = testing::tiny_inputs();
  // was: 31 s, then bad_alloc, and a header-only .ktr
  expect_refused({"trace", "gen", "--prompt", "2000000000", "-o", in.out + "/a.ktr"},
                 {"--prompt", "beyond the geometry's largest context, 1048576 tokens"}, 2);
  EXPECT_TRUE(testing::files_in(in.out).empty());
  expect_refused(
      {"trace", "gen", "--geometry", in.geometry, "--decode", "16400", "-o", in.out + "/a.ktr"},
      {"16384 tokens"}, 2);
  EXPECT_TRUE(testing::files_in(in.out).empty());
}

TEST(CliBadInput, PlanSizesPointsAndThreadsAreBounded) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string t = in.trace;
  // were: still running after 60 s (and bad_alloc)
  expect_refused({"plan", "--trace", t, "--sizes", "99999999999"},
                 {"--sizes: a pool of 99999999999 slots is beyond what this trace can use",
                  "a larger pool changes nothing"});
  expect_refused({"plan", "--trace", t, "--points", "1000000000"},
                 {"--points: 1..1000", "got 1000000000"});
  // was: accepted silently
  expect_refused({"plan", "--trace", t, "--threads", "-1"}, {"--threads: 0 (every core) .. 1024"});
}

TEST(CliBadInput, WeightsGenIsBoundedAndSaysItsSizeFirst) {
  const TinyInputs& in = testing::tiny_inputs();
  // was: a 9.8 GB .tmp in 60 s with no warning
  expect_refused({"weights", "gen", "--vocab", "99999999999", "--out", in.out + "/w.st"},
                 {"--vocab: 1..1048576 token ids, got 99999999999"});
  EXPECT_TRUE(testing::files_in(in.out).empty());
  const CliRun r = run_kvtier_argv({"weights", "gen", "--geometry", in.geometry, "--vocab", "64",
                                    "--out", in.out + "/w.safetensors"},
                                   30);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "kvtier weights gen: writing ")) << r.out;
  EXPECT_EQ(testing::files_in(in.out), std::vector<std::string>{"w.safetensors"});
}

// Ctrl-C (SIGINT) or SIGTERM in the middle of a write: the temporary goes, no output appears.
void expect_signal_leaves_nothing(const std::vector<std::string>& args, const std::string& out,
                                  int sig) {
  bool sent = false;
  const CliRun r = run_kvtier_argv(args, 60, [&](pid_t pid) {
    std::error_code ec;
    if (!sent && fs::exists(out + ".tmp", ec) && fs::file_size(out + ".tmp", ec) > 0) {
      ::kill(pid, sig);
      sent = true;
    }
  });
  if (!sent && has(r.out, "free")) GTEST_SKIP() << "no room on the disk: " << r.out;
  ASSERT_TRUE(sent) << "finished before it could be signalled: " << r.out;
  EXPECT_EQ(r.signal, sig) << r.out;
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliBadInput, ASignalMidWriteLeavesNoTemporary) {
  const TinyInputs& in = testing::tiny_inputs();
  // weights gen of the reference geometry: 1.6 GB, so the write is still going on
  const std::string w = in.out + "/big.safetensors";
  expect_signal_leaves_nothing({"weights", "gen", "--out", w}, w, SIGINT);
  const std::string t = in.out + "/big.ktr";
  expect_signal_leaves_nothing({"trace", "gen", "--decode", "20000", "-o", t}, t, SIGTERM);
  EXPECT_TRUE(testing::files_in(in.out).empty());
}

TEST(CliBadInput, AnOutputAppearsOnlyWhenComplete) {
  const TinyInputs& in = testing::tiny_inputs();
  // was: convert of a truncated file left a 57 MB .jsonl
  const std::string cut = in.dir + "/cut.ktr";
  {
    std::ifstream src(in.trace, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(src)), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 9);
  }
  expect_refused({"trace", "convert", cut, in.out + "/c.jsonl"}, {"truncated"});
  EXPECT_TRUE(testing::files_in(in.out).empty());
  // the whole file converts, and only the output is there
  ASSERT_EQ(run_kvtier_argv({"trace", "convert", in.trace, in.out + "/c.jsonl"}, 30).exit_code, 0);
  EXPECT_EQ(testing::files_in(in.out), std::vector<std::string>{"c.jsonl"});
  testing::empty_dir(in.out);
  // a gen whose output cannot be renamed into place (a directory there) leaves no .tmp
  fs::create_directories(in.out + "/taken.ktr/inside");
  expect_refused({"trace", "gen", "--geometry", in.geometry, "--prompt", "100", "--decode", "8",
                  "-o", in.out + "/taken.ktr"},
                 {"cannot rename"});
  EXPECT_EQ(testing::files_in(in.out), std::vector<std::string>{"taken.ktr"});
}

TEST(CliBadInput, RunChecksTheTraceBeforeLookingForADevice) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string junk = in.dir + "/garbage.ktr";
  std::ofstream(junk) << "this is not a trace at all";
  // was: "no CUDA device"; now the file is read first, with or without CUDA in the build
  const CliRun r = run_kvtier_argv({"run", "--trace", junk, "--placement", "device"}, 10);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(has(r.out, junk)) << r.out;
  EXPECT_FALSE(has(r.out, "CUDA")) << r.out;
  expect_refused({"run", "--trace", in.trace, "--placement", "device", "--pool-pages", "64"},
                 {"--pool-pages applies to placement mirror only"});
}

TEST(CliBadInput, ABadGeometryFileSaysWhichFileFieldAndExpectation) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string field = in.dir + "/field.json", broken = in.dir + "/broken.json";
  std::ofstream(field) << R"({"page_size": "sixty-four"})";
  std::ofstream(broken) << "{\"page_size\": 64,\n \"head_dim\": }";
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"budget", "--geometry"},
        std::vector<std::string>{"weights", "gen", "--out", in.out + "/w.st", "--geometry"},
        std::vector<std::string>{"trace", "gen", "-o", in.out + "/t.ktr", "--geometry"}}) {
    std::vector<std::string> a = cmd, b = cmd;
    a.push_back(field);
    b.push_back(broken);
    expect_refused(a, {"geometry file '" + field + "'", "geometry.page_size",
                       "expected an integer, got \"sixty-four\""});
    expect_refused(b, {"geometry file '" + broken + "'", "not valid JSON at line 2, column 14"});
  }
  EXPECT_TRUE(testing::files_in(in.out).empty());
}

// A directory where a file is asked for is said to be one (it opens as an empty stream, which
// read as "incomplete JSON"), and a malformed JSON input says where, as an editor counts, with
// none of the parser's own source locations.
TEST(CliBadInput, ADirectoryOrBrokenJsonWhereAFileIsAskedFor) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string dir_json = in.dir + "/a-directory.json";
  fs::create_directories(dir_json);
  expect_refused({"validate", "fit", "--points", in.dir},
                 {"cannot read '" + in.dir + "': it is a directory, not a file"});
  expect_refused({"plan", "--concurrency", "2", "--geometry", in.dir},
                 {"it is a directory, not a file"});
  expect_refused({"sim", "--trace", in.trace, "--placement", "device", "--profile", dir_json},
                 {"hardware profile '" + dir_json + "': it is a directory, not a file"});
  const std::string points = in.dir + "/broken-points.json";
  std::ofstream(points) << "{\n  \"card\": H200}";
  expect_refused({"validate", "fit", "--points", points},
                 {"'" + points + "': points file: not valid JSON at line 2, column 11"});
  const std::string profile = in.dir + "/broken-profile.json";
  std::ofstream(profile) << "{\"name\": \"x\",\n \"base\": ,}";
  expect_refused(
      {"sim", "--trace", in.trace, "--placement", "device", "--profile", profile},
      {"hardware profile file '" + profile + "'", "not valid JSON at line 2, column 10"});
  EXPECT_TRUE(testing::files_in(in.out).empty());
}

// --json where a command reported in prose only: trace repair's account of what it kept (a
// trace cut before its end marker is not complete and says where it stopped), weights check's
// result.
TEST(CliBadInput, RepairAndWeightsCheckSpeakJson) {
  const TinyInputs& in = testing::tiny_inputs();
  const CliRun whole =
      run_kvtier_argv({"trace", "repair", in.trace, in.dir + "/whole.ktr", "--json"}, 60);
  ASSERT_EQ(whole.exit_code, 0) << whole.out;
  const auto w = boost::json::parse(whole.out).as_object();
  EXPECT_TRUE(w.at("complete").as_bool());
  EXPECT_TRUE(w.at("stopped").is_null());
  EXPECT_GT(w.at("forwards").to_number<double>(), 0);
  EXPECT_EQ(w.at("open_requests").to_number<double>(), 0);
  const auto size = static_cast<std::streamsize>(fs::file_size(in.trace));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::ifstream(in.trace, std::ios::binary).read(bytes.data(), size);
  const std::string cut = in.dir + "/cut.ktr";
  std::ofstream(cut, std::ios::binary).write(bytes.data(), size - 5);  // into the end marker
  const CliRun part = run_kvtier_argv({"trace", "repair", cut, in.dir + "/part.ktr", "--json"}, 60);
  ASSERT_EQ(part.exit_code, 0) << part.out;
  const auto p = boost::json::parse(part.out).as_object();
  EXPECT_FALSE(p.at("complete").as_bool());
  EXPECT_EQ(p.at("input_bytes").to_number<double>(), static_cast<double>(size - 5));
  EXPECT_LE(p.at("forwards").to_number<double>(), w.at("forwards").to_number<double>());
  EXPECT_FALSE(p.at("stopped").as_string().empty()) << part.out;
  const CliRun check = run_kvtier_argv({"weights", "check", in.weights, "--json"}, 60);
  ASSERT_EQ(check.exit_code, 0) << check.out;
  const auto c = boost::json::parse(check.out).as_object();
  EXPECT_TRUE(c.at("ok").as_bool());
  EXPECT_EQ(c.at("vocab").to_number<double>(), 64);
}

TEST(CliBadInput, BareSimSaysWhatToPassAndItsHelpShowsNoFalseDefault) {
  const TinyInputs& in = testing::tiny_inputs();
  expect_refused({"sim", "--trace", in.trace}, {"placement mirror needs --slots N"});
  const CliRun help = run_kvtier_argv({"sim", "--help"}, 10);
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_TRUE(has(help.out, "--slots arg ")) << help.out;
  EXPECT_FALSE(has(help.out, "--slots arg (=0)")) << help.out;
  EXPECT_EQ(run_kvtier_argv({"sim", "--trace", in.trace, "--placement", "device"}, 30).exit_code,
            0);
}

TEST(CliBadInput, RunTimesPhasesWithProfilePhases) {
  const TinyInputs& in = testing::tiny_inputs();
  const CliRun help = run_kvtier_argv({"run", "--weights", in.weights, "--help"}, 10);
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_TRUE(has(help.out, "--profile-phases")) << help.out;
  EXPECT_FALSE(has(help.out, "--profile  ")) << help.out;
  EXPECT_TRUE(has(help.out, "--allow-drops")) << help.out;
  expect_refused({"run", "--weights", in.weights, "--prompt-tokens", "8", "--micro-batches", "2",
                  "--profile-phases"},
                 {"not with --needle-at, --record or --profile-phases"});
}

// --micro-batches: auto (the default) or one count; anything else is refused by name, and
// --profile-phases with the default runs (auto takes one batch there).
TEST(CliBadInput, MicroBatchesAreAutoOrACount) {
  const TinyInputs& in = testing::tiny_inputs();
  const CliRun help = run_kvtier_argv({"run", "--weights", in.weights, "--help"}, 10);
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_TRUE(has(help.out, "--micro-batches arg (=auto)")) << help.out;
  for (const char* bad : {"0", "two", "2,4", "-1", "5000"})
    expect_refused({"run", "--weights", in.weights, "--prompt-tokens", "8", "--micro-batches", bad},
                   {"--micro-batches"});
  const CliRun r = run_kvtier_argv(
      {"run", "--weights", in.weights, "--prompt-tokens", "8", "--profile-phases"}, 30);
  EXPECT_FALSE(has(r.out, "--micro-batches")) << r.out;
}

// sim and plan price micro-batches where the runner has them and the simulator can price them;
// elsewhere a refusal that says why.
TEST(CliBadInput, SimAndPlanMicroBatchesWhereTheyArePriced) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string t = in.trace;
  expect_refused({"sim", "--trace", t, "--placement", "host", "--micro-batches", "0"},
                 {"--micro-batches"});
  expect_refused({"sim", "--trace", t, "--placement", "host", "--micro-batches", "65"},
                 {"--micro-batches: auto or one count 1..64, got '65'"});
  expect_refused({"sim", "--trace", t, "--placement", "device", "--micro-batches", "2"},
                 {"--micro-batches: placement host or mirror"});
  expect_refused({"sim", "--trace", t, "--placement", "host", "--forward", "trace-replay",
                  "--micro-batches", "2"},
                 {"--micro-batches: the model's forward only"});
  expect_refused(
      {"sim", "--trace", t, "--placement", "host", "--dtype", "fp8", "--micro-batches", "2"},
      {"--micro-batches: not priced for host fp8"});
  for (const char* bad : {"65", "0", "two", "2,4"})
    expect_refused({"plan", "--trace", t, "--micro-batches", bad}, {"--micro-batches"});
  expect_refused({"plan", "--trace", t, "--micro-batches", "65"},
                 {"--micro-batches: auto or one count 1..64, got '65'"});

  const CliRun sim =
      run_kvtier_argv({"sim", "--trace", t, "--placement", "host", "--micro-batches", "2"}, 30);
  ASSERT_EQ(sim.exit_code, 0) << sim.out;
  EXPECT_TRUE(has(sim.out, "2 micro-batches")) << sim.out;
  const testing::CliSplit js =
      testing::run_kvtier_split("sim --trace " + t + " --placement host --micro-batches 2 --json");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(boost::json::parse(js.out).at("micro_batches").as_int64(), 2);
  // auto: the count the plan takes for the same configuration, said so
  const testing::CliSplit sa = testing::run_kvtier_split(
      "sim --trace " + t + " --placement host --micro-batches auto --json");
  ASSERT_EQ(sa.exit_code, 0) << sa.err;
  const boost::json::object so = boost::json::parse(sa.out).as_object();
  EXPECT_TRUE(so.at("micro_batches_auto").as_bool());
  const testing::CliSplit pa0 =
      testing::run_kvtier_split("plan --trace " + t + " --placement host --no-belady --json");
  ASSERT_EQ(pa0.exit_code, 0) << pa0.err;
  EXPECT_EQ(so.at("micro_batches").as_int64(),
            boost::json::parse(pa0.out).at("host").at("micro_batches").as_int64());
  const CliRun st =
      run_kvtier_argv({"sim", "--trace", t, "--placement", "host", "--micro-batches", "auto"}, 30);
  EXPECT_TRUE(has(st.out, "micro-batches auto: ")) << st.out;
  expect_refused({"sim", "--trace", t, "--placement", "host", "--micro-batches", "2,4"},
                 {"--micro-batches: auto or one count"});
  const CliRun plan = run_kvtier_argv(
      {"plan", "--trace", t, "--micro-batches", "2", "--dtype", "fp8", "--no-belady"}, 60);
  ASSERT_EQ(plan.exit_code, 0) << plan.out;
  EXPECT_TRUE(has(plan.out, "mirror in 2 micro-batches")) << plan.out;
  EXPECT_TRUE(has(plan.out, "host fp8 (its groups not priced)")) << plan.out;
  const testing::CliSplit pj =
      testing::run_kvtier_split("plan --trace " + t + " --micro-batches 2 --no-belady --json");
  ASSERT_EQ(pj.exit_code, 0) << pj.err;
  const boost::json::object o = boost::json::parse(pj.out).as_object();
  EXPECT_EQ(o.at("micro_batches").as_int64(), 2);
  EXPECT_EQ(o.at("host_micro_batches").as_int64(), 2);
  EXPECT_FALSE(o.at("micro_batches_auto").as_bool());
  EXPECT_EQ(o.at("host").at("micro_batches").as_int64(), 2);
  // the default: the groups `kvtier run --micro-batches auto` would take, in a column
  const testing::CliSplit pa = testing::run_kvtier_split("plan --trace " + t + " --no-belady");
  ASSERT_EQ(pa.exit_code, 0) << pa.err;
  EXPECT_TRUE(has(pa.out, "micro-batches auto:")) << pa.out;
  EXPECT_TRUE(has(pa.out, "groups")) << pa.out;
}

TEST(CliBadInput, TraceInfoSaysNaWhereThereIsNoFigure) {
  const TinyInputs& in = testing::tiny_inputs();
  // 12 decode steps: no 64- or 512-step window is whole
  const CliRun r = run_kvtier_argv({"trace", "info", in.trace}, 10);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "n/a (no request decoded 512 steps)")) << r.out;
  EXPECT_FALSE(has(r.out, "working set over 512 steps (blocks)  0.0")) << r.out;
  const CliRun j = run_kvtier_argv({"trace", "info", in.trace, "--json"}, 10);
  ASSERT_EQ(j.exit_code, 0) << j.out;
  const auto ws = boost::json::parse(j.out).as_object().at("working_set").as_array();
  EXPECT_TRUE(ws.back().as_object().at("mean_distinct_blocks").is_null()) << j.out;
}

TEST(CliBadInput, AMirrorPoolThatDropsSelectedPagesIsRefusedByDefault) {
  const TinyInputs& in = testing::tiny_inputs();
  // 2 requests of 1,000 tokens + 16 decoded: a selection touches up to 17 pages (16 blocks
  // in pages of their own + the tail's) and a prefill forward writes 2 x 64: 162 slots drop
  // nothing; 140 hold a forward (130) but drop selected pages
  std::vector<std::string> small = {"run",       "--weights",   in.weights, "--prompt-tokens",
                                    "1000,1000", "--placement", "mirror",   "--pool-pages",
                                    "140"};
  expect_refused(small, {"--pool-pages 140 drops selected pages",
                         "the smallest pool that drops nothing is 162 slots", "--allow-drops"});
  // With --allow-drops the plan passes; what stops it here is the build or the machine.
  small.push_back("--allow-drops");
  const CliRun r = run_kvtier_argv(small, 10);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_FALSE(has(r.out, "drops selected pages")) << r.out;
  EXPECT_TRUE(has(r.out, "CUDA")) << r.out;
  expect_refused({"run", "--weights", in.weights, "--prompt-tokens", "8", "--allow-drops"},
                 {"--allow-drops applies to placement mirror only"});
  // A prompt beyond the geometry's context is refused before it is built.
  expect_refused({"run", "--weights", in.weights, "--prompt-tokens", "99999999999"},
                 {"beyond the geometry's largest, 4096", "--yarn reaches 16384"});
}

}  // namespace
}  // namespace kvtier
