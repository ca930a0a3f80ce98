// `kvtier run` without a GPU: the dispatcher's help names both modes, --trace and --weights
// exclude each other, and the model mode refuses bad input by name before touching a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace kvtier {
namespace {

using testing::run_kvtier;

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(CliRunModel, HelpNamesBothModes) {
  const auto r = run_kvtier("run --help");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "kvtier run --trace FILE")) << r.out;
  EXPECT_TRUE(has(r.out, "kvtier run --weights FILE")) << r.out;
  const auto none = run_kvtier("run --placement host");
  EXPECT_EQ(none.exit_code, 1) << none.out;
  EXPECT_TRUE(has(none.out, "give --trace FILE or --weights FILE")) << none.out;
  const auto both = run_kvtier("run --trace a --weights b");
  EXPECT_EQ(both.exit_code, 1) << both.out;
  EXPECT_TRUE(has(both.out, "not both")) << both.out;
}

TEST(CliRunModel, WeightsHelpTellsTheOptions) {
  const auto r = run_kvtier("run --weights w --help");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* opt : {"--prompt-tokens", "--prompt ", "--decode", "--placement", "--pool-pages",
                          "--host-pages", "--kv-dtype", "--yarn", "--fill-depth", "--record",
                          "--needle-at", "--no-graphs", "--stand-in-width", "--json"})
    EXPECT_TRUE(has(r.out, opt)) << opt << "\n" << r.out;
}

TEST(CliRunModel, BadInputIsRefusedByName) {
  const auto missing = run_kvtier("run --weights /nonexistent/w.safetensors --prompt-tokens 8");
  EXPECT_EQ(missing.exit_code, 1) << missing.out;
  EXPECT_TRUE(has(missing.out, "/nonexistent/w.safetensors")) << missing.out;
  // A file that is not safetensors at all.
  const std::string junk = ::testing::TempDir() + "kvtier-junk.safetensors";
  { std::ofstream(junk) << "not a weights file"; }
  const auto bad = run_kvtier("run --weights " + junk + " --prompt-tokens 8");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_TRUE(has(bad.out, "error")) << bad.out;
  std::remove(junk.c_str());
  // Arguments are checked before the weights file is opened.
  const std::string w = " --weights /nonexistent/w.safetensors";
  const auto len = run_kvtier("run" + w + " --prompt-tokens 5,x");
  EXPECT_TRUE(has(len.out, "--prompt-tokens: expected positive lengths")) << len.out;
  const auto dec = run_kvtier("run" + w + " --prompt-tokens 5 --decode 0");
  EXPECT_TRUE(has(dec.out, "--decode: at least 1 step")) << dec.out;
  const auto pl = run_kvtier("run" + w + " --prompt-tokens 5 --placement nowhere");
  EXPECT_TRUE(has(pl.out, "nowhere")) << pl.out;
  const auto pool = run_kvtier("run" + w + " --prompt-tokens 5 --placement host --pool-pages 9");
  EXPECT_TRUE(has(pool.out, "--pool-pages applies to placement mirror only")) << pool.out;
  const auto mir = run_kvtier("run" + w + " --prompt-tokens 5 --placement mirror");
  EXPECT_TRUE(has(mir.out, "needs --pool-pages")) << mir.out;
  const auto both = run_kvtier("run" + w + " --prompt-tokens 5 --prompt f.txt");
  EXPECT_TRUE(has(both.out, "one of them")) << both.out;
  const auto max = run_kvtier("run" + w + " --prompt-tokens 5 --placement mirror --pool-pages max");
  EXPECT_TRUE(
      has(max.out, "--pool-pages max: the most slots within a budget needs --device-kv-gib"))
      << max.out;
  const auto word =
      run_kvtier("run" + w + " --prompt-tokens 5 --placement mirror --pool-pages most");
  EXPECT_TRUE(has(word.out, "--pool-pages: expected positive slots (or max)")) << word.out;
  std::string many = "1";
  for (int i = 0; i < 4096; ++i)
    many += ",1";
  const auto crowd = run_kvtier("run" + w + " --prompt-tokens " + many);
  EXPECT_TRUE(has(crowd.out, "--prompt-tokens: 4097 requests; a run takes at most 4096"))
      << crowd.out.substr(0, 300);
  for (const auto* r : {&len, &dec, &pl, &pool, &mir, &both, &max, &word, &crowd})
    EXPECT_EQ(r->exit_code, 1) << r->out;
}

}  // namespace
}  // namespace kvtier
