// `kvtier trace repair` (detail::repair_trace): a trace cut at any byte repairs into a valid
// trace of exactly the records of its whole frames, or is refused when the cut leaves no
// header; nothing is left behind on failure.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "tests/traces/trace_test_util.hpp"
#include "traces/format_internal.hpp"

namespace kvtier::traces {
namespace {

using test::temp_path;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<Record> read_all(const std::string& path) {
  auto r = TraceReader::open(path);
  std::vector<Record> out;
  Record rec;
  while (r->next(rec))
    out.push_back(rec);
  return out;
}

// The file's layout, walked independently of the reader: where the header ends and, per
// frame, the byte it ends at and the records read once it is whole.
struct Layout {
  std::size_t header_end = 0;
  std::vector<std::pair<std::size_t, std::size_t>> frames;  // (end byte, records up to it)
  std::size_t end_marker = 0;                               // offset of "KVTE"
};

Layout layout_of(const std::string& b) {
  const auto u32 = [&](std::size_t at) {
    return detail::get_u32(reinterpret_cast<const unsigned char*>(b.data() + at));
  };
  Layout l;
  l.header_end = 16 + u32(12);
  std::size_t at = l.header_end, records = 0;
  while (b.compare(at, 4, "KVTF") == 0) {
    records += u32(at + 16);
    at += 20 + u32(at + 12);
    l.frames.emplace_back(at, records);
  }
  EXPECT_EQ(b.compare(at, 4, "KVTE"), 0);
  l.end_marker = at;
  return l;
}

class TraceRepairCut : public ::testing::TestWithParam<int> {};

// Every cut of a small trace of many frames (zstd and raw): refused inside the header,
// else repaired into exactly the records of the frames that were whole.
TEST_P(TraceRepairCut, EveryByteOffsetRepairsToTheWholeFramesOrIsRefused) {
  const Geometry g = test::small_geometry();
  TraceHeader h;
  h.geometry = g;
  h.producer = "repair test";
  GenParams p = test::small_params(11);
  p.decode_min = p.decode_max = 12;
  const std::vector<Record> recs = test::generate(g, p);
  WriterOptions o;
  o.zstd_level = GetParam();
  o.frame_bytes = 160;  // a frame every few records
  // names per parameter: ctest runs the instances in parallel
  const std::string tag = "repair_z" + std::to_string(GetParam());
  const std::string whole = temp_path(tag + "_whole.ktr");
  test::write_all(whole, h, recs, TraceFormat::binary, o);
  const std::string bytes = read_bytes(whole);
  const Layout lay = layout_of(bytes);
  ASSERT_GE(lay.frames.size(), 8u);
  ASSERT_EQ(lay.frames.back().second, recs.size());
  std::printf("%zu records, %zu frames, %zu bytes: cutting at every offset\n", recs.size(),
              lay.frames.size(), bytes.size());

  const std::string cut = temp_path(tag + "_cut.ktr"), out = temp_path(tag + "_out.ktr");
  for (std::size_t n = 0; n <= bytes.size(); ++n) {
    write_bytes(cut, bytes.substr(0, n));
    std::filesystem::remove(out);
    SCOPED_TRACE("cut at byte " + std::to_string(n));
    if (n < lay.header_end) {
      try {
        detail::repair_trace(cut, out, WriterOptions{});
        FAIL() << "a cut inside the header was repaired";
      } catch (const TraceError& e) {
        const std::string what = e.what();
        EXPECT_TRUE(what.find("header") != std::string::npos ||
                    what.find("not a kvtier trace") != std::string::npos ||
                    what.find("empty") != std::string::npos)
            << what;
      }
      EXPECT_FALSE(std::filesystem::exists(out));
      EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
      continue;
    }
    std::size_t expect = 0;
    for (const auto& [end, records] : lay.frames) {
      if (end <= n) expect = records;
    }
    const detail::RepairReport rep = detail::repair_trace(cut, out, WriterOptions{});
    EXPECT_EQ(rep.complete, n == bytes.size());
    EXPECT_EQ(rep.stopped.empty(), rep.complete);
    ASSERT_EQ(rep.records, expect);
    EXPECT_EQ(rep.input_bytes, n);
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
    const std::vector<Record> back = read_all(out);  // throws unless the output is valid
    ASSERT_EQ(back.size(), expect);
    for (std::size_t i = 0; i < expect; ++i)
      ASSERT_EQ(back[i], recs[i]) << "record " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(ZstdAndRaw, TraceRepairCut, ::testing::Values(3, 0));

TEST(TraceRepair, ReportsForwardsAndOpenRequestsAndWhereItStopped) {
  const Geometry g = test::small_geometry();
  TraceHeader h;
  h.geometry = g;
  const std::vector<Record> recs = test::generate(g, test::small_params(5));
  WriterOptions o;
  o.frame_bytes = 400;
  const std::string whole = temp_path("repair_report.ktr");
  test::write_all(whole, h, recs, TraceFormat::binary, o);
  const std::string bytes = read_bytes(whole);
  const Layout lay = layout_of(bytes);
  const auto [end, kept] = lay.frames[lay.frames.size() / 2];
  const std::string cut = temp_path("repair_report_cut.ktr");
  write_bytes(cut, bytes.substr(0, end + 7));  // 7 bytes into the next frame's header
  const std::string out = temp_path("repair_report_out.jsonl");  // the output's form: text
  const detail::RepairReport rep = detail::repair_trace(cut, out, WriterOptions{});
  std::uint64_t forwards = 0;
  std::set<RequestId> open;
  for (std::size_t i = 0; i < kept; ++i) {
    if (const auto* b = std::get_if<RequestBegin>(&recs[i])) open.insert(b->id);
    if (const auto* e = std::get_if<RequestEnd>(&recs[i])) open.erase(e->id);
    forwards += std::holds_alternative<Forward>(recs[i]);
  }
  EXPECT_EQ(rep.records, kept);
  EXPECT_EQ(rep.forwards, forwards);
  EXPECT_EQ(rep.open_requests, open.size());
  EXPECT_EQ(rep.bytes_kept, end);
  EXPECT_NE(rep.stopped.find("truncated"), std::string::npos) << rep.stopped;
  EXPECT_EQ(read_all(out).size(), kept);
}

TEST(TraceRepair, LeavesNothingBehindWhenTheOutputCannotBeWritten) {
  const Geometry g = test::small_geometry();
  TraceHeader h;
  h.geometry = g;
  const std::string in = temp_path("repair_nowrite.ktr");
  test::write_all(in, h, test::generate(g, test::small_params(2)), TraceFormat::binary);
  const std::string out = temp_path("no_such_dir/out.ktr");
  EXPECT_THROW(detail::repair_trace(in, out, WriterOptions{}), TraceError);
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  // an output over a directory: written to the temporary name, the rename fails, removed
  const std::string dir = temp_path("repair_out_dir");
  std::filesystem::create_directories(dir + "/inside");
  EXPECT_THROW(detail::repair_trace(in, dir, WriterOptions{}), TraceError);
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));
}

}  // namespace
}  // namespace kvtier::traces
