// The safetensors reader and writer: round trip, layout, and every kind of bad file giving a
// WeightsError that names the file and the tensor (never a crash).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "cuda/weights/safetensors.hpp"
#include "tests/error_of.hpp"
#include "tests/weights/weights_test_util.hpp"

namespace kvtier::weights {
namespace {

using test::raw_file;
using test::read_bytes;
using test::TempDir;
using test::write_bytes;

// Byte i of a tensor is a function of its name and i, so a mix-up of tensors shows.
std::byte pattern(const std::string& name, std::int64_t i) {
  return static_cast<std::byte>((static_cast<std::size_t>(i) * 31 + name.size() * 7 + name[0]) &
                                0xff);
}

void fill_pattern(const TensorSpec& s, std::int64_t offset, std::span<std::byte> out) {
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = pattern(s.name, offset + static_cast<std::int64_t>(i));
}

// The message of the WeightsError `f` throws; fails the test when it throws nothing else.
template <class F>
std::string error_of(F&& f) {
  return kvtier::testing::error_of<WeightsError>(std::forward<F>(f));
}

const std::vector<TensorSpec> kMixed = {
    {"a.bf16", Dtype::bf16, {3, 5}}, {"b.f32", Dtype::f32, {7}},
    {"c.scalar", Dtype::f64, {}},    {"d.empty", Dtype::i32, {0, 4}},
    {"e.u8", Dtype::u8, {1, 3, 3}},  {"f.fp8", Dtype::f8_e4m3, {17}},
    {"g.i64", Dtype::i64, {2}},
};

TEST(Safetensors, RoundTripKeepsBytesShapesDtypesAndMetadata) {
  TempDir dir("st-roundtrip");
  const std::string path = dir.file("mixed.safetensors");
  const Metadata meta{{"format", "pt"}, {"note", "x\"y\\z"}};
  write_safetensors(path, kMixed, meta, fill_pattern);
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), kMixed.size());
  for (const TensorSpec& s : kMixed) {
    const TensorInfo* t = f.find(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->spec.dtype, s.dtype) << s.name;
    EXPECT_EQ(t->spec.shape, s.shape) << s.name;
    const auto d = f.data(s.name);
    ASSERT_EQ(static_cast<std::int64_t>(d.size()), s.bytes()) << s.name;
    for (std::size_t i = 0; i < d.size(); ++i)
      ASSERT_EQ(d[i], pattern(s.name, static_cast<std::int64_t>(i))) << s.name << " byte " << i;
  }
  EXPECT_EQ(f.find("nope"), nullptr);
  const std::string e = error_of([&] { (void)f.data("nope"); });
  EXPECT_NE(e.find("'nope'"), std::string::npos) << e;
  EXPECT_NE(e.find(path), std::string::npos) << e;
}

TEST(Safetensors, LayoutIsLittleEndianLengthThenPaddedHeaderThenDataInOrder) {
  TempDir dir("st-layout");
  const std::string path = dir.file("x.safetensors");
  write_safetensors(path, kMixed, {}, fill_pattern);
  const std::vector<char> b = read_bytes(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(b[static_cast<std::size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u);
  const std::string header(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  EXPECT_EQ(header.rfind(header_json(kMixed, {}), 0), 0u);  // then only spaces
  EXPECT_EQ(header.find_first_not_of(' ', header_json(kMixed, {}).size()), std::string::npos);
  std::int64_t total = 0;
  for (const auto& s : kMixed)
    total += s.bytes();
  EXPECT_EQ(static_cast<std::int64_t>(b.size()), 8 + static_cast<std::int64_t>(n) + total);
  // The first tensor's data comes right after the header.
  EXPECT_EQ(static_cast<std::byte>(b[8 + n]), pattern("a.bf16", 0));
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);
}

TEST(Safetensors, EmptyFileListIsValid) {
  TempDir dir("st-empty");
  const std::string path = dir.file("e.safetensors");
  write_safetensors(path, {}, {{"k", "v"}}, fill_pattern);
  SafetensorsFile f(path);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata().at("k"), "v");
}

TEST(Safetensors, WriterRejectsDuplicateAndEmptyNames) {
  TempDir dir("st-wbad");
  const std::string path = dir.file("w.safetensors");
  EXPECT_NE(
      error_of([&] {
        write_safetensors(path, {{"x", Dtype::u8, {1}}, {"x", Dtype::u8, {1}}}, {}, fill_pattern);
      }).find("'x'"),
      std::string::npos);
  error_of([&] { write_safetensors(path, {{"", Dtype::u8, {1}}}, {}, fill_pattern); });
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, FailedFillLeavesNoFile) {
  TempDir dir("st-wfail");
  const std::string path = dir.file("w.safetensors");
  EXPECT_THROW(write_safetensors(path, kMixed, {},
                                 [](const TensorSpec& s, std::int64_t, std::span<std::byte>) {
                                   if (s.name == "b.f32") throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

// ---- bad files ----

struct BadCase {
  const char* what;
  std::string header;
  std::size_t data_bytes;
  std::vector<std::string> expect;  // substrings of the message
};

TEST(SafetensorsBadInput, EachDefectIsAClearErrorNamingFileAndTensor) {
  const std::vector<BadCase> cases = {
      {"out of range",
       R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
       5,
       {"'w'", "[0, 8]", "past the end", "truncated"}},
      {"overlap",
       R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
       6,
       {"'b'", "overlaps", "'a'"}},
      {"gap",
       R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
       6,
       {"gap", "'b'"}},
      {"trailing",
       R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
       4,
       {"2 bytes follow"}},
      {"size mismatch",
       R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})",
       4,
       {"'a'", "BF16 [3] needs 6"}},
      {"end before begin",
       R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})",
       4,
       {"'a'", "end before begin"}},
      {"unknown dtype",
       R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,1]}})",
       1,
       {"'a'", "unknown dtype 'F12'"}},
      {"negative dim",
       R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})",
       1,
       {"'a'", "non-negative"}},
      {"float dim", R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", 1, {"'a'"}},
      {"no offsets", R"({"a":{"dtype":"U8","shape":[1]}})", 1, {"'a'", "no data_offsets"}},
      {"no dtype", R"({"a":{"shape":[1],"data_offsets":[0,1]}})", 1, {"'a'", "no dtype"}},
      {"unknown field",
       R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})",
       1,
       {"'a'", "unknown field 'x'"}},
      {"entry not object", R"({"a":3})", 0, {"'a'"}},
      {"huge shape",
       R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,1]}})",
       1,
       {"'a'"}},
      {"bad offsets", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1, {"'a'"}},
      {"not json", "{\"a\": ", 0, {"not valid JSON"}},
      {"array", "[1, 2]", 0, {"does not start with '{'"}},
      {"metadata not strings", R"({"__metadata__":{"k":1}})", 0, {"__metadata__", "'k'"}},
  };
  TempDir dir("st-bad");
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir.file("bad.safetensors");
    write_bytes(path, raw_file(c.header, c.data_bytes));
    const std::string e = error_of([&] { SafetensorsFile f(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    for (const std::string& s : c.expect)
      EXPECT_NE(e.find(s), std::string::npos) << "'" << s << "' not in: " << e;
  }
}

TEST(SafetensorsBadInput, TruncatedOrTinyFilesAndHugeHeaderLengths) {
  TempDir dir("st-trunc");
  const std::string path = dir.file("t.safetensors");
  write_bytes(path, {});
  EXPECT_NE(error_of([&] { SafetensorsFile f(path); }).find("too short"), std::string::npos);
  write_bytes(path, {'\x10', 0, 0});
  EXPECT_NE(error_of([&] { SafetensorsFile f(path); }).find("too short"), std::string::npos);
  std::vector<char> b = raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  b.resize(20);  // inside the header
  write_bytes(path, b);
  EXPECT_NE(error_of([&] { SafetensorsFile f(path); }).find("truncated"), std::string::npos);
  std::vector<char> huge(16, 0);
  huge[7] = 0x7f;  // a length near 2^63
  write_bytes(path, huge);
  EXPECT_NE(error_of([&] { SafetensorsFile f(path); }).find("header length"), std::string::npos);
  EXPECT_NE(error_of([&] { SafetensorsFile f(dir.file("absent")); }).find("cannot open"),
            std::string::npos);
  EXPECT_NE(error_of([&] { SafetensorsFile f(dir.file("")); }).find("not a regular file"),
            std::string::npos);
}

TEST(SafetensorsBadInput, TruncatingAValidFileNamesTheCutTensor) {
  TempDir dir("st-cut");
  const std::string path = dir.file("v.safetensors");
  write_safetensors(path, kMixed, {}, fill_pattern);
  std::vector<char> b = read_bytes(path);
  b.resize(b.size() - 3);  // into the last tensor's data
  write_bytes(path, b);
  const std::string e = error_of([&] { SafetensorsFile f(path); });
  EXPECT_NE(e.find("'g.i64'"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

// Random truncations and byte corruptions of a valid file: each either opens (and then every
// tensor's span lies inside the file) or throws WeightsError; nothing else, never a crash.
TEST(SafetensorsFuzz, RandomTruncationsAndCorruptionsNeverCrash) {
  TempDir dir("st-fuzz");
  const std::string good = dir.file("good.safetensors");
  write_safetensors(good, kMixed, {{"format", "pt"}}, fill_pattern);
  const std::vector<char> valid = read_bytes(good);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(valid[static_cast<std::size_t>(i)]);
  const std::size_t header_end = 8 + n;
  std::mt19937_64 rng(20261129);
  const std::string path = dir.file("fuzz.safetensors");
  int opened = 0, rejected = 0;
  auto attempt = [&](const std::vector<char>& bytes) {
    write_bytes(path, bytes);
    try {
      SafetensorsFile f(path);
      ++opened;
      for (const TensorInfo& t : f.tensors()) {
        const auto d = f.data(t);
        ASSERT_LE(8 + n, bytes.size());
        ASSERT_LE(static_cast<std::size_t>(t.end), bytes.size());
        ASSERT_EQ(static_cast<std::int64_t>(d.size()), t.end - t.begin);
      }
    } catch (const WeightsError&) {
      ++rejected;
    }
  };
  for (std::size_t len = 0; len < valid.size(); ++len)  // every truncation
    attempt(std::vector<char>(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(len)));
  EXPECT_EQ(opened, 0);
  const char interesting[] = {'"', '{', '}', '[', ']', ',', ':', '0', '9', '-', ' ', 0, '\xff'};
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<char> b = valid;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      // Mostly the length and header bytes, where the parser works.
      const std::size_t at = rng() % 4 != 0 ? rng() % header_end : rng() % b.size();
      b[at] = rng() % 2 ? interesting[rng() % sizeof(interesting)] : static_cast<char>(rng());
    }
    if (rng() % 4 == 0) b.resize(rng() % (b.size() + 1));
    attempt(b);
  }
  EXPECT_GT(rejected, 1000);
  RecordProperty("opened", opened);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);              // tie -> even
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);  // tie -> even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

}  // namespace
}  // namespace kvtier::weights
