// Bad input never crashes or hangs a reader: it ends in a TraceError naming where.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "tests/traces/trace_test_util.hpp"

namespace kvtier::traces {
namespace {

using test::generate;
using test::small_geometry;
using test::small_params;
using test::temp_path;
using test::write_all;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Reads the whole file; returns the TraceError's message, or "" when it read cleanly.
std::string read_error(const std::string& path) {
  try {
    auto rd = TraceReader::open(path);
    Record r;
    while (rd->next(r)) {
    }
    return "";
  } catch (const TraceError& e) {
    return e.what();
  }
}

std::string small_trace(int zstd_level, const std::string& name) {
  TraceHeader h;
  h.geometry = small_geometry();
  h.producer = "bad input";
  GenParams p = small_params(5);
  p.requests = 2;
  p.decode_min = p.decode_max = 6;
  p.prompt_min = p.prompt_max = 200;
  const std::string path = temp_path(name);
  WriterOptions o;
  o.zstd_level = zstd_level;
  o.frame_bytes = 256;
  write_all(path, h, generate(h.geometry, p), TraceFormat::binary, o);
  return path;
}

TEST(TraceBadInput, EveryTruncationIsAnError) {
  for (int level : {0, 3}) {
    const std::string path = small_trace(level, "trunc_src.ktr");
    const std::string bytes = slurp(path);
    ASSERT_EQ(read_error(path), "");
    const std::string cut = temp_path("trunc.ktr");
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      spit(cut, bytes.substr(0, n));
      const std::string e = read_error(cut);
      EXPECT_FALSE(e.empty()) << "a trace cut to " << n << " of " << bytes.size()
                              << " bytes read cleanly";
      if (n > 200) {
        EXPECT_NE(e.find("byte offset"), std::string::npos) << e;
      }
    }
  }
}

TEST(TraceBadInput, WrongMagicAndVersion) {
  const std::string path = small_trace(3, "magic_src.ktr");
  std::string bytes = slurp(path);
  std::string bad = bytes;
  bad[0] = 'X';
  spit(temp_path("magic.ktr"), bad);
  EXPECT_NE(read_error(temp_path("magic.ktr")).find("not a kvtier trace"), std::string::npos);
  bad = bytes;
  bad[7] = '9';  // KVTRACE9
  spit(temp_path("magic2.ktr"), bad);
  EXPECT_NE(read_error(temp_path("magic2.ktr")).find("wrong magic"), std::string::npos);
  bad = bytes;
  bad[8] = 2;  // version 2
  spit(temp_path("version.ktr"), bad);
  const std::string e = read_error(temp_path("version.ktr"));
  EXPECT_NE(e.find("unsupported trace format version 2"), std::string::npos) << e;
  EXPECT_NE(e.find("byte offset 8"), std::string::npos) << e;
}

// Every single-byte corruption of an uncompressed trace either still decodes to a valid
// trace or is reported; zstd frames carry a checksum, so there every payload flip is caught.
TEST(TraceBadInput, ByteFlipsAreCaughtOrHarmless) {
  for (int level : {0, 3}) {
    const std::string path = small_trace(level, "flip_src.ktr");
    const std::string bytes = slurp(path);
    const std::string flipped = temp_path("flip.ktr");
    int errors = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] ^ 0x5a);
      spit(flipped, b);
      errors += !read_error(flipped).empty();
    }
    EXPECT_GT(errors, static_cast<int>(bytes.size() / 2)) << "zstd level " << level;
  }
}

TEST(TraceBadInput, CorruptVarintIsNamed) {
  const std::string path = small_trace(0, "varint_src.ktr");
  std::string bytes = slurp(path);
  // The first frame header follows the file header; its payload starts 20 bytes later with
  // the first record (a begin: tag 1 then varints). Ten continuation bytes: no varint ends.
  const std::uint32_t hlen = static_cast<std::uint8_t>(bytes[12]) |
                             static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[13])) << 8;
  const std::size_t payload = 16 + hlen + 20;
  ASSERT_EQ(bytes[payload], 1);
  for (std::size_t i = 1; i <= 10; ++i)
    bytes[payload + i] = static_cast<char>(0xff);
  spit(temp_path("varint.ktr"), bytes);
  const std::string e = read_error(temp_path("varint.ktr"));
  EXPECT_NE(e.find("varint"), std::string::npos) << e;
  EXPECT_NE(e.find("record 0"), std::string::npos) << e;
}

TEST(TraceBadInput, CorruptZstdFrameIsNamed) {
  const std::string path = small_trace(3, "zstd_src.ktr");
  std::string bytes = slurp(path);
  const std::uint32_t hlen = static_cast<std::uint8_t>(bytes[12]) |
                             static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[13])) << 8;
  const std::size_t payload = 16 + hlen + 20;
  bytes[payload + 12] = static_cast<char>(bytes[payload + 12] ^ 0x33);
  spit(temp_path("zstd.ktr"), bytes);
  const std::string e = read_error(temp_path("zstd.ktr"));
  EXPECT_NE(e.find("zstd"), std::string::npos) << e;
  EXPECT_NE(e.find("byte offset " + std::to_string(16 + hlen)), std::string::npos) << e;
}

TEST(TraceBadInput, JsonlIdsBeyondContextAndLayersBeyondGeometry) {
  TraceHeader h;
  h.geometry = small_geometry();
  const std::string head = temp_path("head.jsonl");
  write_all(head, h, {}, TraceFormat::jsonl);
  const std::string header_line = slurp(head);
  const std::string begin = "{\"begin\":{\"id\":4,\"prompt_tokens\":40}}\n";
  const std::string beyond = temp_path("beyond.jsonl");
  spit(beyond, header_line + begin +
                   "{\"forward\":{\"rows\":[{\"request\":4,\"position\":40,\"kind\":\"decode\"}],"
                   "\"selections\":[[[0,1]],[[0,10]],[[2]]]}}\n");
  std::string e = read_error(beyond);
  EXPECT_NE(e.find("beyond the context"), std::string::npos) << e;
  EXPECT_NE(e.find("record 1 (line 3, byte offset " +
                   std::to_string(header_line.size() + begin.size()) + ")"),
            std::string::npos)
      << e;
  const std::string layers = temp_path("layers.jsonl");
  spit(layers, header_line + begin +
                   "{\"forward\":{\"rows\":[{\"request\":4,\"position\":40,\"kind\":\"decode\"}],"
                   "\"selections\":[[[0]],[[0]],[[0]],[[0]]]}}\n");
  e = read_error(layers);
  EXPECT_NE(e.find("4 layers but the geometry has 3"), std::string::npos) << e;
  // A prefix shared with a request that is not open (never begun, or already ended).
  const std::string orphan = temp_path("orphan.jsonl");
  spit(orphan, header_line + begin + "{\"end\":{\"id\":4}}\n" +
                   "{\"begin\":{\"id\":5,\"prompt_tokens\":40,\"shared_with\":4,"
                   "\"shared_pages\":1}}\n");
  e = read_error(orphan);
  EXPECT_NE(e.find("request 5 shares a prefix of request 4, which is not open"), std::string::npos)
      << e;
  // Positions at the int64 limit (the fuzzer's find: position + count overflowed in the
  // validator itself) and requests past the geometry's largest context are named, not computed
  // with.
  const std::string huge = temp_path("huge.jsonl");
  spit(huge, header_line + begin +
                 "{\"forward\":{\"rows\":[{\"request\":4,\"position\":9223372036854775807,"
                 "\"count\":64,\"kind\":\"prefill\"}],\"selections\":[[[0]],[[0]],[[0]]]}}\n");
  e = read_error(huge);
  EXPECT_NE(e.find("position 9223372036854775807 + count 64 is beyond the geometry's largest "
                   "context, 1048576 tokens (rope_max_positions x yarn_factor)"),
            std::string::npos)
      << e;
  spit(huge, header_line + "{\"begin\":{\"id\":4,\"prompt_tokens\":1048577}}\n");
  e = read_error(huge);
  EXPECT_NE(e.find("request 4: prompt_tokens 1048577 is beyond the geometry's largest context"),
            std::string::npos)
      << e;
  spit(huge, header_line + begin +
                 "{\"begin\":{\"id\":5,\"prompt_tokens\":40,\"shared_with\":4,"
                 "\"shared_pages\":65537}}\n");
  e = read_error(huge);
  EXPECT_NE(e.find("request 5: shared_pages 65537 is beyond the geometry's largest context"),
            std::string::npos)
      << e;
  // The last position that fits is accepted.
  spit(huge, header_line + "{\"begin\":{\"id\":4,\"prompt_tokens\":1048576}}\n" +
                 "{\"forward\":{\"rows\":[{\"request\":4,\"position\":1048575,"
                 "\"kind\":\"decode\"}],\"selections\":[[[0]],[[0]],[[262143]]]}}\n");
  EXPECT_EQ(read_error(huge), "");
  const std::string garbage = temp_path("garbage.jsonl");
  spit(garbage, header_line + "{\"begin\":{\"id\":\n");
  EXPECT_NE(read_error(garbage).find("not valid JSON"), std::string::npos);
  const std::string dir = temp_path("a-directory");
  std::filesystem::create_directories(dir);
  EXPECT_NE(read_error(dir).find("it is a directory, not a trace file"), std::string::npos)
      << read_error(dir);
  spit(garbage, "hello");
  EXPECT_NE(read_error(garbage).find("not a kvtier trace"), std::string::npos);
}

TEST(TraceBadInput, RandomTailsNeverCrash) {
  const std::string bytes = slurp(small_trace(0, "prop_src.ktr"));
  const std::uint32_t hlen = static_cast<std::uint8_t>(bytes[12]) |
                             static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[13])) << 8;
  std::mt19937_64 rng(20261129);
  const std::string path = temp_path("tail.ktr");
  for (int trial = 0; trial < 300; ++trial) {
    std::string b = bytes.substr(0, 16 + hlen);
    // Half the trials keep a valid frame header and corrupt what follows.
    const std::size_t keep = trial % 2 ? 20 : 0;
    b += bytes.substr(16 + hlen, keep);
    const std::size_t n = rng() % 200;
    for (std::size_t i = 0; i < n; ++i)
      b.push_back(static_cast<char>(rng() & 0xff));
    spit(path, b);
    EXPECT_FALSE(read_error(path).empty()) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kvtier::traces
