#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <random>

#include "tests/traces/trace_test_util.hpp"
#include "traces/trace_stats.hpp"

namespace kvtier::traces {
namespace {

using test::generate;
using test::read_all;
using test::small_geometry;
using test::small_params;
using test::temp_path;
using test::write_all;

TraceHeader small_header() {
  TraceHeader h;
  h.geometry = small_geometry();
  h.producer = "test_trace_io";
  h.created = "2026-11-29T00:00:00Z";
  return h;
}

TEST(TraceIo, BinaryAndJsonlRoundTripLosslessly) {
  const TraceHeader h = small_header();
  const auto recs = generate(h.geometry, small_params(7));
  ASSERT_GT(recs.size(), 50u);
  for (int level : {0, 3}) {
    const std::string bin = temp_path("rt.ktr");
    WriterOptions o;
    o.zstd_level = level;
    o.frame_bytes = 512;  // many frames: records must cross frame boundaries correctly
    write_all(bin, h, recs, TraceFormat::binary, o);
    TraceHeader hb;
    EXPECT_EQ(read_all(bin, &hb), recs) << "zstd level " << level;
    EXPECT_EQ(hb, h);
  }
  const std::string jl = temp_path("rt.jsonl");
  write_all(jl, h, recs, TraceFormat::jsonl);
  TraceHeader hj;
  EXPECT_EQ(read_all(jl, &hj), recs);
  EXPECT_EQ(hj, h);
}

// bytes_read drives the CLI's progress bars: it never goes back, stays within the file and
// reaches the end once the reader has said so (binary: frames of 128 bytes, so it moves many
// times; text: lines).
TEST(TraceIo, BytesReadClimbsToTheFileSize) {
  const TraceHeader h = small_header();
  const auto recs = generate(h.geometry, small_params(9));
  WriterOptions o;
  o.frame_bytes = 128;
  for (TraceFormat fmt : {TraceFormat::binary, TraceFormat::jsonl}) {
    const std::string path = temp_path(fmt == TraceFormat::binary ? "bytes.ktr" : "bytes.jsonl");
    write_all(path, h, recs, fmt, o);
    const std::uint64_t size = std::filesystem::file_size(path);
    auto rd = TraceReader::open(path);
    std::uint64_t last = rd->bytes_read(), moves = 0;
    EXPECT_GT(last, 0u);  // the header is read at open
    Record r;
    while (rd->next(r)) {
      const std::uint64_t now = rd->bytes_read();
      ASSERT_GE(now, last);
      ASSERT_LE(now, size);
      moves += now > last;
      last = now;
    }
    EXPECT_EQ(rd->bytes_read(), size);  // the end marker too
    EXPECT_GT(moves, 5u);
  }
}

TEST(TraceIo, ReaderReusesForwardBuffers) {
  const TraceHeader h = small_header();
  const auto recs = generate(h.geometry, small_params(8));
  const std::string bin = temp_path("reuse.ktr");
  write_all(bin, h, recs, TraceFormat::binary);
  auto rd = TraceReader::open(bin);
  Record r;
  const std::int32_t* first = nullptr;
  std::size_t forwards = 0, same = 0;
  while (rd->next(r)) {
    if (auto* f = std::get_if<Forward>(&r)) {
      f->ids.reserve(4096);  // after one growth the buffer must persist across records
      if (first == nullptr) first = f->ids.data();
      same += f->ids.data() == first;
      ++forwards;
    }
  }
  EXPECT_EQ(rd->records_read(), recs.size());
  EXPECT_GT(forwards, 10u);
  EXPECT_GE(same, forwards - 1);
}

// A synthetic stream whose consecutive selections overlap by exactly 90 %: 512 blocks out of
// a 32k context, 51 replaced per step.
TEST(TraceIo, AtMostOneBytePerIdAtNinetyPercentOverlap) {
  TraceHeader h;
  h.producer = "overlap test";
  std::mt19937_64 rng(42);
  const std::string path = temp_path("overlap90.ktr");
  auto w = TraceWriter::create(path, h, TraceFormat::binary);
  const int layers = h.geometry.qsa_layers();
  const std::int64_t prompt = 32768;
  const std::int32_t blocks = prompt / 4;
  w->write(RequestBegin{1, prompt, 0, 0});
  std::vector<std::vector<std::int32_t>> cur(static_cast<std::size_t>(layers));
  std::vector<std::uint8_t> in;
  std::uint64_t ids = 0;
  for (auto& c : cur) {
    std::vector<std::int32_t> all(static_cast<std::size_t>(blocks));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    c.assign(all.begin(), all.begin() + 512);
    std::sort(c.begin(), c.end());
  }
  for (int step = 0; step < 400; ++step) {
    Forward f;
    f.rows.push_back({1, prompt + step, 1, RowKind::decode});
    f.layers = layers;
    f.offsets.push_back(0);
    for (auto& c : cur) {
      in.assign(static_cast<std::size_t>(blocks), 0);
      for (auto b : c)
        in[static_cast<std::size_t>(b)] = 1;
      std::shuffle(c.begin(), c.end(), rng);
      for (int i = 0; i < 51; ++i) {
        std::int32_t b;
        do {
          b = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(blocks));
        } while (in[static_cast<std::size_t>(b)]);
        in[static_cast<std::size_t>(b)] = 1;
        c[static_cast<std::size_t>(i)] = b;
      }
      std::sort(c.begin(), c.end());
      f.ids.insert(f.ids.end(), c.begin(), c.end());
      f.offsets.push_back(static_cast<std::int64_t>(f.ids.size()));
      ids += c.size();
    }
    w->write(f);
  }
  w->write(RequestEnd{1});
  w->close();
  const double bytes_per_id =
      static_cast<double>(std::filesystem::file_size(path)) / static_cast<double>(ids);
  std::printf("bytes per id at 90 %% overlap: %.3f\n", bytes_per_id);
  EXPECT_LE(bytes_per_id, 1.0);
  EXPECT_EQ(read_all(path).size(), 402u);
}

TEST(TraceIo, WriterRejectsInvalidRecords) {
  const TraceHeader h = small_header();
  auto w = TraceWriter::create(temp_path("bad_write.ktr"), h, TraceFormat::binary);
  Forward f;
  f.rows.push_back({1, 100, 1, RowKind::decode});
  f.layers = 3;
  f.offsets = {0, 2, 4, 6};
  f.ids = {1, 2, 1, 2, 1, 2};
  EXPECT_THROW(w->write(f), TraceError);  // request 1 not open
  w->write(RequestBegin{1, 100, 0, 0});
  w->write(f);
  Forward desc = f;
  desc.ids = {2, 1, 1, 2, 1, 2};
  EXPECT_THROW(w->write(desc), TraceError);  // not ascending
  Forward beyond = f;
  beyond.ids = {1, 25, 1, 2, 1, 2};  // position 100 sees blocks < 25
  try {
    w->write(beyond);
    ADD_FAILURE() << "an id beyond the context was accepted";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("beyond the context"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("record 2"), std::string::npos) << e.what();
  }
  Forward layers = f;
  layers.layers = 4;
  layers.offsets = {0, 2, 4, 6, 6};
  EXPECT_THROW(w->write(layers), TraceError);
  Forward dup = f;
  dup.rows.push_back(dup.rows[0]);
  dup.offsets = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_THROW(w->write(dup), TraceError);  // two rows of one request
  EXPECT_THROW(w->write(RequestBegin{1, 10, 0, 0}), TraceError);
  EXPECT_THROW(w->write(RequestEnd{2}), TraceError);
  w->write(RequestEnd{1});
  w->close();
}

TEST(TraceIo, StatsCountWhatWasWritten) {
  const TraceHeader h = small_header();
  const auto recs = generate(h.geometry, small_params(9));
  TraceStats st(h);
  std::uint64_t ids = 0, forwards = 0;
  for (const auto& r : recs) {
    st.add(r);
    if (const auto* f = std::get_if<Forward>(&r)) {
      ids += f->ids.size();
      ++forwards;
    }
  }
  const TraceSummary s = st.summary();
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.forwards, forwards);
  EXPECT_EQ(s.ids, ids);
  EXPECT_EQ(s.layers, 3);
  EXPECT_GT(s.decode_rows, 0u);
  for (double hit : s.lru_hit) {
    EXPECT_GT(hit, 0.0);
    EXPECT_LE(hit, 1.0);
  }
  EXPECT_LE(s.lru_hit[0], s.lru_hit[1]);
  EXPECT_LE(s.lru_hit[1], s.lru_hit[2]);
}

}  // namespace
}  // namespace kvtier::traces
