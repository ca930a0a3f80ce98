// The calibration points file (docs/validation.md): a file read back as written, and every
// malformed series refused with the series and point named.
#include <gtest/gtest.h>

#include "model/config_error.hpp"
#include "validation/fit/points_file.hpp"

namespace kvtier::fit {
namespace {

std::string with_series(const std::string& series) {
  return R"({"card": "H200", "driver": "580.65", "date": "2026-12-02", "command": "kvtier validate calibrate", "series": [)" +
         series + "]}";
}

void expect_refused(const std::string& text, const std::string& says) {
  try {
    read_points(text);
    FAIL() << "accepted: " << text;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(PointsFile, ReadsTheDocumentedFormat) {
  const PointsFile p = read_points(with_series(
      R"({"term": "h2d_copy", "inputs": ["bytes", "transfers"], "unit": "us", "points": [[2048, 1, 2.95], [65536, 32, 95]]},
         {"term": "indexer", "inputs": ["row_blocks"], "unit": "us", "points": [[512, 1.5]]})"));
  EXPECT_EQ(p.card, "H200");
  EXPECT_EQ(p.driver, "580.65");
  EXPECT_EQ(p.date, "2026-12-02");
  EXPECT_EQ(p.command, "kvtier validate calibrate");
  ASSERT_EQ(p.series.size(), 2u);
  const PointSeries* s = p.find("h2d_copy");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->samples.inputs, (std::vector<std::string>{"bytes", "transfers"}));
  EXPECT_EQ(s->samples.x[1], (std::vector<double>{65536, 32}));
  EXPECT_EQ(s->samples.y, (std::vector<double>{2.95, 95}));
  EXPECT_EQ(p.find("ensure"), nullptr);

  const PointsFile back = read_points(write_points(p));
  ASSERT_EQ(back.series.size(), 2u);
  EXPECT_EQ(back.card, p.card);
  EXPECT_EQ(back.command, p.command);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.series[i].term, p.series[i].term);
    EXPECT_EQ(back.series[i].samples.inputs, p.series[i].samples.inputs);
    EXPECT_EQ(back.series[i].samples.x, p.series[i].samples.x);
    EXPECT_EQ(back.series[i].samples.y, p.series[i].samples.y);
  }
}

TEST(PointsFile, RefusesWhatTheDocDoesNotAllow) {
  expect_refused(
      with_series(R"({"term": "memcpy", "inputs": ["bytes"], "unit": "us", "points": []})"),
      "series 'memcpy': unknown term (known: launch_eager");
  expect_refused(
      with_series(
          R"({"term": "h2d_copy", "inputs": ["transfers", "bytes"], "unit": "us", "points": []})"),
      "\"inputs\" must be [bytes, transfers] in that order");
  expect_refused(
      with_series(R"({"term": "topk", "inputs": ["row_blocks"], "unit": "ms", "points": []})"),
      "\"unit\" must be \"us\"");
  expect_refused(
      with_series(
          R"({"term": "topk", "inputs": ["row_blocks"], "unit": "us", "points": [[1, 2], [3]]})"),
      "series 'topk' point 1: expected [row_blocks, y us]");
  expect_refused(
      with_series(
          R"({"term": "topk", "inputs": ["row_blocks"], "unit": "us", "points": [[1, -2]]})"),
      "series 'topk' point 0: expected a finite number >= 0");
  expect_refused(
      with_series(R"({"term": "topk", "inputs": ["row_blocks"], "unit": "us", "points": []},
                                {"term": "topk", "inputs": ["row_blocks"], "unit": "us", "points": []})"),
      "series 'topk': given twice");
  expect_refused(
      with_series(
          R"({"term": "topk", "inputs": ["row_blocks"], "unit": "us", "points": [], "dtype": "bf16"})"),
      "unknown field \"dtype\"");
  expect_refused(R"({"card": "H200", "driver": "", "date": "d", "command": "c", "series": []})",
                 "\"driver\" must be a non-empty string");
  expect_refused("{", "not valid JSON at line 1, column 2: incomplete JSON");
  expect_refused("{\n  \"card\": H200}", "not valid JSON at line 2, column 11: syntax error");
}

}  // namespace
}  // namespace kvtier::fit
