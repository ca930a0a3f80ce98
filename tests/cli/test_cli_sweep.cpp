// A fuzz-style sweep of every subcommand's numeric options (issue 19): each option alone takes
// 0, -1, a huge value, nan, inf, a float where an integer goes and text. Every case must end
// within a few seconds with exit 0 or 1 (no signal, no hang), print no library internals
// (bad_alloc, boost::, std::), name the option it refuses, and leave no file behind: a refused
// command writes nothing, an accepted one only its output (no temporary). The inputs are tiny
// (tests/cli/cli_fixtures.hpp); one test per command group, so that ctest runs them side by
// side. KVTIER_SWEEP_LIST=1 prints every case with its exit code, time and output.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/cli/cli_fixtures.hpp"

namespace kvtier {
namespace {

using testing::CliRun;
using testing::run_kvtier_argv;
using testing::TinyInputs;

const std::vector<std::string> kValues = {"0", "-1", "99999999999", "nan", "inf", "1e13", "x"};
constexpr double kTimeoutS = 5;  // generous on a loaded 2-core machine: cases take ~0.01 s

// One numeric option of a command: the command's arguments before it, and the option.
struct Case {
  std::vector<std::string> base;
  std::string option;
};

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args)
    s += (s.empty() ? "" : " ") + a;
  return s;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The option as messages may name it: "--prompt-min", or its field "prompt_min".
bool names_option(const std::string& out, const std::string& option) {
  std::string field = option.substr(option.find_first_not_of('-'));
  std::replace(field.begin(), field.end(), '-', '_');
  return has(out, option) || has(out, field);
}

// Runs every case with every value, `out` being where the commands write; returns the
// number of runs.
int sweep(const std::vector<Case>& cases, const std::string& out) {
  int runs = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const Case& c : cases) {
    for (const std::string& v : kValues) {
      std::vector<std::string> args = c.base;
      args.push_back(c.option);
      args.push_back(v);
      const CliRun r = run_kvtier_argv(args, kTimeoutS);
      ++runs;
      const std::string what = "kvtier " + joined(args) + "\n" + r.out;
      EXPECT_FALSE(r.timed_out) << what;
      EXPECT_EQ(r.signal, 0) << what;
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << "exit " << r.exit_code << ": " << what;
      for (const char* internal : {"bad_alloc", "boost::", "std::", "[boost.json", "terminate"})
        EXPECT_FALSE(has(r.out, internal)) << internal << " in: " << what;
      const std::vector<std::string> left = testing::files_in(out);
      if (std::getenv("KVTIER_SWEEP_LIST"))
        std::printf("%d %5.2fs kvtier %s\n  %s", r.exit_code, r.seconds, joined(args).c_str(),
                    r.out.c_str());
      if (r.exit_code != 0) {
        // A refusal names the option, unless what stops the run is the build or machine
        // (no CUDA backend, no device) after the options were taken.
        EXPECT_TRUE(names_option(r.out, c.option) || has(r.out, "CUDA"))
            << "does not name " << c.option << ": " << what;
        EXPECT_TRUE(left.empty()) << left.size() << " files left by: " << what;
      } else {
        for (const auto& f : left)
          EXPECT_FALSE(f.ends_with(".tmp")) << f << " left by: " << what;
      }
      testing::empty_dir(out);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d runs in %.1f s\n", runs, s);
  return runs;
}

TEST(CliSweep, SimPlanBudgetDemoBench) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string t = in.trace;
  std::vector<Case> cases = {
      {{"sim", "--trace", t}, "--slots"},
      {{"sim", "--trace", t, "--placement", "device"}, "--slots"},
      {{"plan", "--trace", t, "--placement", "mirror", "--unit", "layer"}, "--sizes"},
      {{"plan", "--trace", t, "--placement", "mirror", "--unit", "layer"}, "--points"},
      {{"plan", "--trace", t, "--placement", "mirror", "--unit", "layer"}, "--within"},
      {{"plan", "--trace", t, "--placement", "mirror", "--unit", "layer"}, "--chosen"},
      {{"plan", "--trace", t, "--placement", "mirror", "--unit", "layer"}, "--threads"},
      {{"budget"}, "--context"},
      {{"budget"}, "--pool-slots"},
      {{"budget"}, "--batch"},
      {{"budget", "--placement", "host"}, "--window"},
      {{"budget"}, "--device-gib"},
      {{"budget"}, "--host-gib"},
      {{"budget", "--placement", "device", "--geometry", in.geometry}, "--context"},
      {{"demo"}, "--slots"},
      {{"bench", "residency"}, "--repeats"},
      {{"sim", "--trace", t, "--placement", "device"}, "--non-qsa-forward-us"},
      {{"sim", "--trace", t, "--placement", "device"}, "--non-qsa-token-us"},
      {{"plan", "--trace", t, "--placement", "device"}, "--non-qsa-forward-us"},
      {{"plan", "--trace", t, "--placement", "device"}, "--non-qsa-token-us"},
      {{"sim", "--trace", t, "--placement", "device"}, "--device-kv-gib"},
      {{"plan", "--trace", t, "--placement", "device"}, "--device-kv-gib"},
      {{"plan", "--trace", t, "--placement", "host"}, "--host-gib"},
      {{"plan", "--trace", t, "--placement", "device"}, "--tpot-ms"},
      {{"budget"}, "--device-kv-gib"},
      {{"sim", "--trace", t, "--placement", "host"}, "--micro-batches"},
      {{"plan", "--trace", t, "--placement", "host"}, "--micro-batches"},
  };
  // plan --concurrency: each option over a small generated workload that leaves it out.
  const std::map<std::string, std::string> level = {
      {"--concurrency", "2"}, {"--prompt", "100"}, {"--decode", "4"}, {"--prefill-chunk", "64"}};
  for (const char* opt :
       {"--concurrency", "--prompt", "--decode", "--prefill-chunk", "--seed", "--fill-depth"}) {
    std::vector<std::string> args = {"plan",  "--geometry", in.geometry, "--unit",
                                     "layer", "--points",   "2",         "--no-belady"};
    for (const auto& [k, v] : level)
      if (k != opt) args.insert(args.end(), {k, v});
    cases.push_back({args, opt});
  }
  EXPECT_EQ(sweep(cases, in.out), 33 * 7);
}

TEST(CliSweep, Trace) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string t = in.trace, o = in.out;
  std::vector<Case> cases = {
      {{"trace", "head", t}, "--records"},
      {{"trace", "cat", t}, "--ids"},
      {{"trace", "convert", t, o + "/c.ktr"}, "--zstd-level"},
      {{"trace", "repair", t, o + "/r.ktr"}, "--zstd-level"},
  };
  // trace gen: each option over a small base whose own value for it is left out.
  const std::map<std::string, std::string> base = {
      {"--requests", "1"}, {"--prompt", "100"}, {"--decode", "8"}, {"--prefill-chunk", "64"}};
  for (const char* opt :
       {"--seed",         "--requests",      "--concurrent",      "--prompt",
        "--prompt-min",   "--prompt-max",    "--decode",          "--decode-min",
        "--decode-max",   "--prefill-chunk", "--prefill-samples", "--shared-prefix",
        "--step-overlap", "--recent-frac",   "--recent-window",   "--layer-coupling",
        "--layer-follow", "--sinks-always",  "--sinks-likely",    "--sinks-likely-p",
        "--newest-p",     "--zipf",          "--zstd-level",      "--fill-depth"}) {
    std::vector<std::string> args = {"trace", "gen", "--geometry", in.geometry, "-o", o + "/g.ktr"};
    const std::string option = opt;
    for (const auto& [k, v] : base) {
      const bool sets_it = option == k || option.rfind(k + "-", 0) == 0;  // --prompt-min
      if (!sets_it) args.insert(args.end(), {k, v});
    }
    cases.push_back({args, option});
  }
  EXPECT_EQ(sweep(cases, in.out), 28 * 7);
}

TEST(CliSweep, WeightsAndRun) {
  const TinyInputs& in = testing::tiny_inputs();
  const std::string o = in.out, w = in.weights;
  const std::vector<std::string> gen = {"weights",   "gen",   "--geometry",
                                        in.geometry, "--out", o + "/w.safetensors"};
  std::vector<Case> cases = {
      {gen, "--vocab"},
      {{"weights", "gen", "--geometry", in.geometry, "--vocab", "64", "--out",
        o + "/w.safetensors"},
       "--seed"},
      {{"weights", "check", w}, "--vocab"},
      {{"run", "--trace", in.trace, "--placement", "mirror"}, "--pool-pages"},
      {{"run", "--trace", in.trace, "--placement", "device"}, "--forwards"},
      {{"run", "--trace", in.trace, "--placement", "device"}, "--steps"},
      {{"run", "--weights", w, "--placement", "device"}, "--prompt-tokens"},
  };
  const std::vector<std::string> model = {"run", "--weights", w, "--prompt-tokens", "40"};
  for (const char* opt :
       {"--decode", "--host-pages", "--chunk", "--window", "--stand-in-width", "--fill-depth",
        "--needle-at", "--micro-batches", "--decode-splits", "--step-blocks", "--seed"})
    cases.push_back({model, opt});
  std::vector<std::string> mirror = model;
  mirror.insert(mirror.end(), {"--placement", "mirror"});
  cases.push_back({mirror, "--pool-pages"});
  EXPECT_EQ(sweep(cases, in.out), 19 * 7);
}

}  // namespace
}  // namespace kvtier
