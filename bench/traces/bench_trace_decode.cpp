// Trace reading + decoding throughput (selected block ids per second on one core) and the
// binary form's size (bytes per selected id), for generated traces of each preset and for
// the bundled samples. Prints figures; never fails on speed.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "traces/generator.hpp"
#include "traces/trace_io.hpp"

namespace kvtier::traces {
namespace {

std::string make_trace(const std::string& preset, int zstd_level) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kvtier_bench_" + preset + "_" + std::to_string(zstd_level) + ".ktr"))
                               .string();
  if (std::filesystem::exists(path)) return path;
  GenParams p = gen_preset(preset);
  p.requests = 4;
  p.concurrent = 4;
  p.prompt_min = p.prompt_max = 32768;
  p.decode_min = p.decode_max = 500;
  TraceHeader h;
  h.producer = "bench_traces " + preset;
  WriterOptions o;
  o.zstd_level = zstd_level;
  auto w = TraceWriter::create(path, h, TraceFormat::binary, o);
  TraceGenerator gen(h.geometry, p);
  Record r;
  while (gen.next(r))
    w->write(r);
  w->close();
  return path;
}

void read_trace(benchmark::State& state, const std::string& path) {
  std::uint64_t ids = 0;
  for (auto _ : state) {
    auto rd = TraceReader::open(path);
    Record r;
    ids = 0;
    while (rd->next(r)) {
      if (const auto* f = std::get_if<Forward>(&r)) ids += f->ids.size();
    }
    benchmark::DoNotOptimize(ids);
  }
  const auto bytes = static_cast<double>(std::filesystem::file_size(path));
  state.SetItemsProcessed(static_cast<std::int64_t>(ids) * state.iterations());
  state.counters["bytes_per_id"] = bytes / static_cast<double>(ids);
  state.counters["Mids"] = static_cast<double>(ids) / 1e6;
  state.counters["ids_per_s"] =
      benchmark::Counter(static_cast<double>(ids), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state, const std::string& preset, int level) {
  read_trace(state, make_trace(preset, level));
}

BENCHMARK_CAPTURE(BM_Decode, dsv4_flash_zstd3, std::string("dsv4-flash"), 3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, dsv4_flash_raw, std::string("dsv4-flash"), 0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, sparse_trained_zstd3, std::string("sparse-trained"), 3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, dense_topk_zstd3, std::string("dense-topk"), 3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, shared_indexer_zstd3, std::string("shared-indexer"), 3)
    ->Unit(benchmark::kMillisecond);

void BM_DecodeSample(benchmark::State& state) {
  std::string path;
  try {
    path = default_sample_path();
  } catch (const TraceError& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("default sample missing");
    return;
  }
  read_trace(state, path);
}
BENCHMARK(BM_DecodeSample)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvtier::traces

BENCHMARK_MAIN();
