// Latency end to end: `kvtier sim --json` gives every request's figures and every forward's
// times, `kvtier plan --json` every point's latency, and `kvtier plan --concurrency` a plan
// per level (JSON, table, progress lines, bad input). Tiny inputs (cli_fixtures.hpp).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_fixtures.hpp"

namespace kvtier {
namespace {

namespace json = boost::json;
using testing::CliRun;
using testing::run_kvtier_argv;

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The JSON document among what the command printed (stderr may carry progress lines).
json::object json_of(const std::string& out) {
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t end = out.find('\n', at);
    const std::string line = out.substr(at, end == std::string::npos ? end : end - at);
    if (!line.empty() && line[0] == '{') return json::parse(line).as_object();
    if (end == std::string::npos) break;
    at = end + 1;
  }
  ADD_FAILURE() << "no JSON in: " << out;
  return {};
}

void expect_percentiles(const json::object& p, const std::string& what) {
  for (const char* k : {"count", "p50", "p95", "p99", "max", "mean"})
    EXPECT_TRUE(p.contains(k)) << what << " lacks " << k;
}

TEST(CliLatency, SimJsonHasPerRequestAndPerForwardTimes) {
  const testing::TinyInputs& in = testing::tiny_inputs();
  const CliRun r = run_kvtier_argv(
      {"sim", "--trace", in.trace, "--placement", "host", "--per-forward", "--json"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json::object o = json_of(r.out);
  const json::object& lat = o.at("latency").as_object();
  EXPECT_EQ(lat.at("requests").as_int64(), 2);
  EXPECT_EQ(lat.at("without_first_token").as_int64(), 0);
  expect_percentiles(lat.at("ttft_us").as_object(), "ttft_us");
  expect_percentiles(lat.at("tpot_us").as_object(), "tpot_us");
  expect_percentiles(lat.at("link_share").as_object(), "link_share");
  // Host placement: every byte on the link is some request's.
  EXPECT_DOUBLE_EQ(lat.at("h2d_bytes").to_number<double>(), o.at("h2d_bytes").to_number<double>());
  EXPECT_DOUBLE_EQ(lat.at("unattributed_h2d_bytes").to_number<double>(), 0);

  const json::array& req = o.at("per_request").as_array();
  ASSERT_EQ(req.size(), 2u);
  double shares = 0;
  for (const auto& v : req) {
    const json::object& x = v.as_object();
    for (const char* k : {"request", "prompt_tokens", "prefill_tokens", "decode_tokens",
                          "arrival_us", "first_forward", "first_token_us", "ttft_us",
                          "last_token_us", "tpot_us", "h2d_bytes", "link_share"})
      EXPECT_TRUE(x.contains(k)) << k;
    EXPECT_EQ(x.at("decode_tokens").as_int64(), 12);
    EXPECT_GT(x.at("ttft_us").to_number<double>(), 0);
    // Its first token ends its last prefill chunk (200 tokens in 64-token rows); each of its
    // 12 decode tokens then has a gap to the token before it.
    EXPECT_EQ(x.at("tpot_us").as_object().at("count").as_int64(), 12);
    shares += x.at("link_share").to_number<double>();
  }
  EXPECT_NEAR(shares, 1.0, 1e-9);

  const json::array& fw = o.at("per_forward").as_array();
  ASSERT_FALSE(fw.empty());
  double prev_end = 0;
  for (const auto& v : fw) {
    const json::object& x = v.as_object();
    const double start = x.at("start_us").to_number<double>();
    const double end = x.at("end_us").to_number<double>();
    EXPECT_DOUBLE_EQ(start, prev_end);  // back to back
    EXPECT_NEAR(end - start, x.at("span_us").to_number<double>(), 1e-6);
    prev_end = end;
  }

  // Without --per-forward, per_request is still there.
  const CliRun plain =
      run_kvtier_argv({"sim", "--trace", in.trace, "--placement", "device", "--json"}, 60);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  const json::object p = json_of(plain.out);
  EXPECT_FALSE(p.contains("per_forward"));
  EXPECT_EQ(p.at("per_request").as_array().size(), 2u);
}

TEST(CliLatency, SimTablePrintsLatencyAndRequests) {
  const testing::TinyInputs& in = testing::tiny_inputs();
  const CliRun r = run_kvtier_argv({"sim", "--trace", in.trace, "--placement", "device"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "decode ITL p50 / p95 / p99")) << r.out;
  EXPECT_TRUE(has(r.out, "TTFT p50 / p95 / p99")) << r.out;
  EXPECT_TRUE(has(r.out, "per request")) << r.out;
  EXPECT_TRUE(has(r.out, "link share")) << r.out;
}

TEST(CliLatency, PlanJsonPointsCarryLatency) {
  const testing::TinyInputs& in = testing::tiny_inputs();
  const CliRun r = run_kvtier_argv(
      {"plan", "--trace", in.trace, "--unit", "layer", "--points", "2", "--no-belady", "--json"},
      60);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json::object o = json_of(r.out);
  std::vector<json::object> points = {o.at("device").as_object(), o.at("host").as_object()};
  for (const auto& p : o.at("mirror").as_array()[0].as_object().at("points").as_array())
    points.push_back(p.as_object());
  for (const json::object& p : points) {
    for (const char* k :
         {"ttft_p50_us", "ttft_p95_us", "tpot_p50_us", "tpot_p95_us", "tpot_p99_us"}) {
      ASSERT_TRUE(p.contains(k)) << k;
      EXPECT_GT(p.at(k).to_number<double>(), 0) << k;
    }
    EXPECT_LE(p.at("tpot_p50_us").to_number<double>(), p.at("tpot_p95_us").to_number<double>());
    EXPECT_LE(p.at("tpot_p95_us").to_number<double>(), p.at("tpot_p99_us").to_number<double>());
  }
}

std::vector<std::string> concurrency_args(const testing::TinyInputs& in,
                                          const std::string& levels) {
  return {"plan",  "--concurrency", levels, "--geometry",      in.geometry, "--prompt",
          "200",   "--decode",      "8",    "--prefill-chunk", "64",        "--unit",
          "layer", "--points",      "3",    "--no-belady"};
}

TEST(CliLatency, ConcurrencyPlansEachLevel) {
  const testing::TinyInputs& in = testing::tiny_inputs();
  std::vector<std::string> args = concurrency_args(in, "1,4,8");
  const CliRun table = run_kvtier_argv(args, 60);
  ASSERT_EQ(table.exit_code, 0) << table.out;
  for (const char* line : {"level 1 of 3, 1 in flight", "level 2 of 3, 4 in flight",
                           "level 3 of 3, 8 in flight", "TPOT p95 ms", "8 in flight: "})
    EXPECT_TRUE(has(table.out, line)) << line << " not in:\n" << table.out;
  EXPECT_TRUE(testing::files_in(in.out).empty());

  args.push_back("--json");
  const CliRun a = run_kvtier_argv(args, 60);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  const json::object o = json_of(a.out);
  EXPECT_EQ(o.at("workload").as_object().at("prompt_tokens").as_int64(), 200);
  const json::array& levels = o.at("levels").as_array();
  ASSERT_EQ(levels.size(), 3u);
  const std::int64_t want[] = {1, 4, 8};
  double last_tps = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const json::object& l = levels[i].as_object();
    EXPECT_EQ(l.at("concurrency").as_int64(), want[i]);
    EXPECT_EQ(l.at("requests").as_int64(), want[i]);
    EXPECT_EQ(l.at("max_rows").as_int64(), want[i]);  // all in flight at once
    const json::array& pts = l.at("points").as_array();
    ASSERT_EQ(pts.size(), 3u);  // device, host, mirror (layer)
    const json::object& dev = pts[0].as_object();
    EXPECT_EQ(dev.at("placement").as_string(), "device");
    EXPECT_GT(dev.at("decode_tokens_per_s").to_number<double>(), last_tps);
    last_tps = dev.at("decode_tokens_per_s").to_number<double>();
    const json::object& mir = pts[2].as_object();
    EXPECT_EQ(mir.at("placement").as_string(), "mirror");
    EXPECT_TRUE(mir.contains("slots") && mir.contains("size_rule") && mir.contains("tpot_p95_us"));
    EXPECT_TRUE(l.at("plan").as_object().contains("recommendation"));
  }
  // The same inputs give the same bytes (no temporary's name in them).
  const CliRun b = run_kvtier_argv(args, 60);
  EXPECT_EQ(json::serialize(json_of(b.out)), json::serialize(o));
}

TEST(CliLatency, ConcurrencyBadInputIsAClearError) {
  const testing::TinyInputs& in = testing::tiny_inputs();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"0", "expected positive integers"},
      {"-1", "expected positive integers"},
      {"x", "expected positive integers"},
      {"1e9", "expected positive integers"},
      {"1,,2", "expected positive integers"},
      {"1000000000", "1..1024"},
      {"99999999999999999999999", "expected positive integers"},
      {"1,4,1", "given twice"},
  };
  for (const auto& [levels, says] : bad) {
    const CliRun r = run_kvtier_argv(concurrency_args(in, levels), 20);
    EXPECT_EQ(r.exit_code, 1) << levels << ": " << r.out;
    EXPECT_EQ(r.signal, 0) << levels;
    EXPECT_TRUE(has(r.out, "--concurrency")) << levels << ": " << r.out;
    EXPECT_TRUE(has(r.out, says)) << levels << ": " << r.out;
  }
  auto refused = [&](const std::vector<std::string>& args, const std::string& says) {
    const CliRun r = run_kvtier_argv(args, 20);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out, says)) << r.out;
  };
  refused({"plan", "--trace", in.trace, "--prompt", "100"}, "give --concurrency");
  refused({"plan", "--trace", in.trace, "--concurrency", "1,2"}, "does not re-batch --trace");
  refused({"plan", "--concurrency", "1", "--geometry", in.geometry, "--prompt", "0"},
          "--prompt: at least 1");
  // 16,384 positions at most in the tiny geometry (with YaRN).
  refused({"plan", "--concurrency", "1", "--geometry", in.geometry, "--prompt", "20000"},
          "largest context");
  EXPECT_TRUE(testing::files_in(in.out).empty());
}

}  // namespace
}  // namespace kvtier
