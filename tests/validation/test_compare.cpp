// `kvtier validate compare`'s arithmetic on canned JSON (tests/validation/data, hand-made):
// exact medians and p95 by nearest rank, the sign convention, decode and prefill apart, the
// counters, and the pairs it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "model/config_error.hpp"
#include "validation/compare/compare_html.hpp"
#include "validation/compare/compare_json.hpp"
#include "validation/compare/error_stats.hpp"
#include "validation/compare/forward_compare.hpp"

namespace kvtier::validation {
namespace {

std::string data(const std::string& name) {
  const char* dir = std::getenv("KVTIER_VALIDATION_DATA");
  EXPECT_NE(dir, nullptr) << "KVTIER_VALIDATION_DATA is set by ctest";
  return std::string(dir ? dir : ".") + "/" + name;
}

std::string slurp(const std::string& name) {
  std::ifstream in(data(name));
  EXPECT_TRUE(in.good()) << data(name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ForwardResults gpu(const std::string& name) {
  return read_gpu_run(slurp(name), name);
}
ForwardResults sim(const std::string& name) {
  return read_sim_forwards(slurp(name), name);
}

TEST(ErrorStats, MedianAndP95ByNearestRank) {
  std::vector<double> v;
  for (int i = 20; i >= 1; --i)
    v.push_back(i);                        // unsorted on purpose
  EXPECT_EQ(nearest_rank(v, 0.95), 19.0);  // rank ceil(19.0) = 19
  EXPECT_EQ(median(v), 10.5);              // even: mean of 10 and 11
  v.push_back(21);
  EXPECT_EQ(nearest_rank(v, 0.95), 20.0);  // rank ceil(19.95) = 20
  EXPECT_EQ(median(v), 11.0);
  EXPECT_EQ(nearest_rank(std::vector<double>{7}, 0.95), 7.0);
}

TEST(ErrorStats, SignConventionSimMinusGpuOverGpu) {
  const std::vector<double> s{110, 90}, g{100, 100};
  const ErrorStats e = error_stats(s, g);
  EXPECT_DOUBLE_EQ(e.worst, 0.10);  // the first of equal magnitude: sim slower, positive
  EXPECT_EQ(e.worst_at, 0);
  EXPECT_DOUBLE_EQ(e.median, 0.0);
  EXPECT_DOUBLE_EQ(e.median_abs, 0.10);
  EXPECT_DOUBLE_EQ(e.total, 0.0);
  const ErrorStats slow = error_stats(std::vector<double>{150}, std::vector<double>{100});
  EXPECT_DOUBLE_EQ(slow.total, 0.5);
  EXPECT_EQ(error_stats({}, {}).forwards, 0);
}

// device: errors -10 % (prefill), +10, -5, +10, 0 % (decode).
TEST(Compare, DevicePairFiguresAreExact) {
  const PairComparison p = compare_pair(gpu("gpu_device.json"), sim("sim_device.json"));
  EXPECT_EQ(p.label, "tiny.ktr, device, bf16");
  ASSERT_EQ(p.decode.forwards, 4);
  EXPECT_DOUBLE_EQ(p.decode.median_abs, 0.075);  // |e| sorted 0, .05, .10, .10
  EXPECT_DOUBLE_EQ(p.decode.p95_abs, 0.10);      // rank ceil(3.8) = 4
  EXPECT_DOUBLE_EQ(p.decode.max_abs, 0.10);
  EXPECT_DOUBLE_EQ(p.decode.median, 0.05);  // signed -.05, 0, .10, .10
  EXPECT_DOUBLE_EQ(p.decode.gpu_total_us, 750);
  EXPECT_DOUBLE_EQ(p.decode.sim_total_us, 790);
  EXPECT_DOUBLE_EQ(p.decode.total, 40.0 / 750.0);
  ASSERT_EQ(p.prefill.forwards, 1);
  EXPECT_DOUBLE_EQ(p.prefill.median, -0.10);  // the simulator faster: negative
  EXPECT_DOUBLE_EQ(p.prefill.total, -0.10);
  EXPECT_EQ(p.all.forwards, 5);
  EXPECT_DOUBLE_EQ(p.all.median_abs, 0.10);  // 0, .05, .10, .10, .10
  EXPECT_DOUBLE_EQ(p.all.total, -60.0 / 1750.0);
  EXPECT_TRUE(p.counters.exact());
}

// mirror: +10, -20, -2 %; forward 2's hits and misses differ.
TEST(Compare, CountersMustAgreeExactly) {
  const PairComparison p = compare_pair(gpu("gpu_mirror.json"), sim("sim_mirror.json"));
  EXPECT_EQ(p.label, "tiny.ktr, mirror 64 slots, bf16");
  EXPECT_FALSE(p.counters.exact());
  EXPECT_EQ(p.counters.hits_differ, 1);
  EXPECT_EQ(p.counters.misses_differ, 1);
  EXPECT_EQ(p.counters.evictions_differ, 0);
  EXPECT_EQ(p.counters.first_forward, 2);
  EXPECT_DOUBLE_EQ(p.decode.median_abs, 0.10);
  EXPECT_DOUBLE_EQ(p.decode.max_abs, 0.20);
  EXPECT_DOUBLE_EQ(p.decode.worst, -0.20);
  EXPECT_EQ(p.decode.worst_at, 1);
  EXPECT_DOUBLE_EQ(p.decode.total, (864.0 - 900.0) / 900.0);
  EXPECT_EQ(p.prefill.forwards, 0);
}

TEST(Compare, PlacementsPoolTheirRunsForwards) {
  const Comparison c = compare({{gpu("gpu_device.json"), sim("sim_device.json")},
                                {gpu("gpu_mirror.json"), sim("sim_mirror.json")},
                                {gpu("gpu_device.json"), sim("sim_device.json")}});
  ASSERT_EQ(c.placements.size(), 2u);
  EXPECT_EQ(c.placements[0].placement, "device");
  EXPECT_EQ(c.placements[0].pairs, 2);
  EXPECT_EQ(c.placements[0].decode.forwards, 8);
  EXPECT_DOUBLE_EQ(c.placements[0].decode.median_abs, 0.075);  // each |e| twice
  EXPECT_TRUE(c.placements[0].counters_exact);
  EXPECT_EQ(c.placements[1].placement, "mirror");
  EXPECT_FALSE(c.placements[1].counters_exact);
  // pooled: every run's forwards together, whatever the placement
  EXPECT_EQ(c.pooled.placement, "all");
  EXPECT_EQ(c.pooled.pairs, 3);
  EXPECT_EQ(c.pooled.decode.forwards,
            c.placements[0].decode.forwards + c.placements[1].decode.forwards);
  EXPECT_EQ(c.pooled.all.forwards, c.placements[0].all.forwards + c.placements[1].all.forwards);
  EXPECT_FALSE(c.pooled.counters_exact);  // the mirror pair's counters differ
  const double sim_total =
      c.placements[0].decode.sim_total_us + c.placements[1].decode.sim_total_us;
  const double gpu_total =
      c.placements[0].decode.gpu_total_us + c.placements[1].decode.gpu_total_us;
  EXPECT_NEAR(c.pooled.decode.total, (sim_total - gpu_total) / gpu_total, 1e-12);

  const auto j = boost::json::parse(comparison_to_json(c)).as_object();
  const auto& dev = j.at("placements").as_array()[0].as_object();
  EXPECT_DOUBLE_EQ(dev.at("decode").as_object().at("p95_abs_error").as_double(), 0.10);
  const auto& mir = j.at("placements").as_array()[1].as_object();
  EXPECT_TRUE(mir.at("prefill").is_null());
  const auto& pooled = j.at("pooled").as_object();
  EXPECT_EQ(pooled.at("placement").as_string(), "all");
  EXPECT_EQ(pooled.at("pairs").as_int64(), 3);
  EXPECT_EQ(pooled.at("decode").as_object().at("forwards").as_int64(), c.pooled.decode.forwards);
  const auto& fw = j.at("pairs").as_array()[0].as_object().at("forwards").as_array();
  ASSERT_EQ(fw.size(), 5u);
  EXPECT_DOUBLE_EQ(fw[1].as_object().at("error").as_double(), 0.10);
  EXPECT_FALSE(fw[0].as_object().at("decode").as_bool());

  const std::string html = comparison_to_html(c);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(std::count_if(html.begin(), html.end(), [](char ch) { return ch == '\0'; }), 0);
  for (const char* net : {"<script", "src=", "href=", "url(", "@import"}) {
    EXPECT_EQ(html.find(net), std::string::npos) << net;  // self-contained, no network
  }
  // One circle per forward in the scatter (13) plus one legend dot per placement (2).
  std::size_t circles = 0;
  for (std::size_t at = html.find("<circle"); at != std::string::npos;
       at = html.find("<circle", at + 1))
    ++circles;
  EXPECT_EQ(circles, 13u + 2u);
}

void expect_refused(const std::function<void()>& f, const std::string& says) {
  try {
    f();
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(Compare, RefusesPairsThatAreNotOneConfiguration) {
  expect_refused([] { compare_pair(gpu("gpu_device.json"), sim("sim_device_short.json")); },
                 "the GPU run has 5 forwards and the simulator 4");
  expect_refused([] { compare_pair(gpu("gpu_device.json"), sim("sim_mirror.json")); },
                 "placement differs (GPU 'device', simulator 'mirror')");
  expect_refused([] { sim("sim_count_only.json"); }, "--per-forward");
  expect_refused([] { read_gpu_run(slurp("sim_device.json"), "sim_device.json"); },
                 "missing \"steps\"");
  expect_refused(
      [] {
        read_gpu_run(R"({"placement": "host", "steps": [{"forward": 0, "tokens": 1,
            "decode_tokens": 1, "gpu_us": 0, "hits": 0, "misses": 0, "evictions": 0}]})",
                     "zero.json");
      },
      "zero.json step 0: \"gpu_us\" must be a time > 0");
  ForwardResults g = gpu("gpu_mirror.json"), s = sim("sim_mirror.json");
  s.slots = 128;
  expect_refused([&] { compare_pair(g, s); }, "mirror pool differs (GPU 64 pages, simulator 128");
  s = sim("sim_mirror.json");
  s.forwards[1].forward = 7;
  expect_refused([&] { compare_pair(g, s); }, "entry 1 is forward 1 on the GPU and 7");
}

}  // namespace
}  // namespace kvtier::validation
