#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "traces/generator.hpp"
#include "traces/trace_io.hpp"

namespace kvtier::traces::test {

// A fresh file path under the test temp directory.
inline std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "kvtier_trace_tests";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// A small geometry (3 QSA layers, 16 blocks top-k) so tests stay quick.
inline Geometry small_geometry() {
  Geometry g;
  g.total_layers = 6;
  g.qsa_layer_ids = {1, 3, 5};
  g.select_budget = 64;  // 16 blocks
  g.page_size = 16;
  return g;
}

inline std::vector<Record> generate(const Geometry& g, const GenParams& p) {
  TraceGenerator gen(g, p);
  std::vector<Record> out;
  Record r;
  while (gen.next(r))
    out.push_back(r);
  return out;
}

inline GenParams small_params(std::uint64_t seed) {
  GenParams p;
  p.seed = seed;
  p.requests = 3;
  p.concurrent = 2;
  p.prompt_min = 300;
  p.prompt_max = 900;
  p.decode_min = 20;
  p.decode_max = 40;
  p.prefill_chunk = 128;
  p.prefill_samples = 4;
  p.shared_prefix = 100;
  return p;
}

inline void write_all(const std::string& path, const TraceHeader& h,
                      const std::vector<Record>& recs, TraceFormat f,
                      WriterOptions o = WriterOptions{}) {
  auto w = TraceWriter::create(path, h, f, o);
  for (const auto& r : recs)
    w->write(r);
  w->close();
}

inline std::vector<Record> read_all(const std::string& path, TraceHeader* h = nullptr) {
  auto rd = TraceReader::open(path);
  if (h) *h = rd->header();
  std::vector<Record> out;
  Record r;
  while (rd->next(r))
    out.push_back(r);
  return out;
}

}  // namespace kvtier::traces::test
