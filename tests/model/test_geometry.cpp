#include <gtest/gtest.h>

#include "model/config_error.hpp"
#include "model/geometry.hpp"

namespace kvtier {
namespace {

TEST(Geometry, FlashNextDerivedFigures) {
  const Geometry g;
  g.validate();
  EXPECT_EQ(g.qsa_layers(), 12);
  EXPECT_EQ(g.gqa_group(), 12);
  EXPECT_EQ(g.block_topk(), 512);
  EXPECT_EQ(g.select_width_tokens(), 2051);
  // K+V of 2 heads x 256 dims: 2048 B per token and layer in bf16; fp8 codes (1024 B) plus one
  // fp32 scale per (token, KV head, K|V) make 1040 B.
  EXPECT_EQ(g.kv_bytes_per_token(KvDtype::bf16), 2048);
  EXPECT_EQ(g.kv_bytes_per_token(KvDtype::fp8), 1040);
  EXPECT_EQ(g.kv_bytes_per_token(KvDtype::bf16) * g.qsa_layers(), 24576);
  EXPECT_EQ(g.kv_bytes_per_page(KvDtype::bf16), 2048 * 64);
  EXPECT_EQ(g.kv_bytes_per_page(KvDtype::fp8), 1040 * 64);
  EXPECT_EQ(g.slab_bytes_per_token(), 64);
  EXPECT_EQ(g.max_context(false), 262144);
  EXPECT_EQ(g.max_context(true), 1048576);
  EXPECT_EQ(g.pages_for_context(1), 1);
  EXPECT_EQ(g.pages_for_context(64), 1);
  EXPECT_EQ(g.pages_for_context(65), 2);
  EXPECT_EQ(g.pages_for_context(1048576), 16384);
  EXPECT_EQ(g.max_pages_per_row(1048576), 513);
  EXPECT_EQ(g.max_pages_per_row(100), 2);  // never more pages than the context has
}

TEST(Geometry, JsonRoundTrip) {
  Geometry g;
  g.page_size = 128;
  g.qsa_layer_ids = {1, 5};
  g.total_layers = 8;
  g.rope_theta = 12345.5;
  const Geometry back = geometry_from_json(geometry_to_json(g));
  EXPECT_EQ(back, g);
}

TEST(Geometry, MissingFieldsKeepDefaults) {
  const Geometry g = geometry_from_json(R"({"page_size": 32})");
  EXPECT_EQ(g.page_size, 32);
  EXPECT_EQ(g.head_dim, 256);
}

void expect_error_mentions(const std::string& json, const std::string& needle) {
  try {
    geometry_from_json(json);
    FAIL() << "no error for " << json;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Geometry, ValidationNamesTheField) {
  expect_error_mentions(R"({"page_size": 66})", "geometry.page_size");
  expect_error_mentions(R"({"page_size": 66})", "multiple of compress_ratio");
  expect_error_mentions(R"({"select_budget": 2047})", "geometry.select_budget");
  expect_error_mentions(R"({"kv_heads": 5})", "geometry.q_heads");
  expect_error_mentions(R"({"head_dim": 0})", "geometry.head_dim");
  expect_error_mentions(R"({"qsa_layer_ids": [3, 3]})", "strictly ascending");
  expect_error_mentions(R"({"qsa_layer_ids": [48]})", "outside 0..47");
  expect_error_mentions(R"({"rope_dims": 300})", "geometry.rope_dims");
  expect_error_mentions(R"({"page_szie": 64})", "geometry.page_szie: unknown field");
  expect_error_mentions(R"({"page_size": "64"})", "expected an integer");
  expect_error_mentions(R"({"page_size": 4294967360})", "32-bit");
  // The declared context is bounded (2^32 tokens) so that max_context() cannot overflow.
  expect_error_mentions(R"({"yarn_factor": 1e300})", "rope_max_positions x yarn_factor");
  expect_error_mentions(R"({"rope_max_positions": 4294967296, "yarn_factor": 1.5})",
                        "at most 4294967296 tokens");
  EXPECT_EQ(geometry_from_json(R"({"rope_max_positions": 1073741824})").max_context(true),
            kMaxContextTokens);
  expect_error_mentions(R"([1,2])", "JSON object");
  expect_error_mentions(R"({"page_size": )", "not valid JSON");
}

TEST(Geometry, BadJsonSaysWhereAndNothingOfTheParser) {
  for (const char* text : {"{\"page_size\": 64,\n \"head_dim\": }", "{\"a\" 1}", "", "{\n\n"}) {
    try {
      geometry_from_json(text);
      FAIL() << text;
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("geometry: not valid JSON at line "), std::string::npos) << m;
      EXPECT_EQ(m.find("boost"), std::string::npos) << m;
      EXPECT_EQ(m.find(".hpp"), std::string::npos) << m;
    }
  }
  expect_error_mentions("{\"page_size\": 64,\n \"head_dim\": }", "line 2, column 14");
}

TEST(Geometry, SizesAreBoundedSoThatByteCountsFit) {
  expect_error_mentions(R"({"kv_heads": 2097152, "q_heads": 2097152})", "at most 1048576");
  expect_error_mentions(R"({"hidden_size": 1048577})", "geometry.hidden_size: must be at most");
  expect_error_mentions(R"({"page_size": 2097152})", "geometry.page_size");
  EXPECT_NO_THROW(geometry_from_json(R"({"hidden_size": 1048576})"));
}

TEST(KvDtype, ParseAndName) {
  EXPECT_EQ(parse_kv_dtype("bf16"), KvDtype::bf16);
  EXPECT_EQ(parse_kv_dtype("fp8"), KvDtype::fp8);
  EXPECT_EQ(to_string(KvDtype::fp8), "fp8");
  EXPECT_THROW(parse_kv_dtype("fp16"), ConfigError);
}

}  // namespace
}  // namespace kvtier
