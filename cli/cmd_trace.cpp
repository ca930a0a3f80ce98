// `kvtier trace info|convert|head|cat|gen|repair`: inspect, convert, synthesise and repair
// selection traces.
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/table.hpp"
#include "io/pending_output.hpp"
#include "model/config_error.hpp"
#include "traces/format_internal.hpp"
#include "traces/generator.hpp"
#include "traces/trace_io.hpp"
#include "traces/trace_stats.hpp"

namespace kvtier::cli {
namespace {

using namespace kvtier::traces;

constexpr int kMaxZstdLevel = 22;  // zstd's highest level (ZSTD_maxCLevel())

std::string join_args(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args)
    s += (s.empty() ? "" : " ") + a;
  return s;
}

std::vector<std::string> sub_args(const std::vector<std::string>& args, const std::string& sub) {
  std::vector<std::string> out{args[0] + " " + sub};
  out.insert(out.end(), args.begin() + 2, args.end());
  return out;
}

// Hands every record of the trace at `path` to `use`, with a progress bar over the file's
// bytes: a trace of a long serving run takes minutes to read.
template <class Use>
void for_each_record(TraceReader& reader, const std::string& path, const char* label, Use&& use) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  Progress progress(label, ec ? 0 : size, "MiB", std::uint64_t{1} << 20);
  Record r;
  while (reader.next(r)) {
    use(r);
    if (reader.records_read() % 256 == 0) progress.update(reader.bytes_read());
  }
  progress.finish();
}

// ---------------------------------------------------------------------------------- info
int run_info(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "trace", po::value<std::string>(), "trace file (default: the bundled default sample)")(
      "json", "print the figures as JSON");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier trace info [TRACE] [--json]", &pos)) return 0;
  const std::string path =
      vm.count("trace") ? vm["trace"].as<std::string>() : default_sample_path();
  auto reader = TraceReader::open(path);
  TraceStats stats(reader->header());
  for_each_record(*reader, path, "kvtier trace info", [&](const Record& r) { stats.add(r); });
  const TraceSummary s = stats.summary();
  const Geometry& g = reader->header().geometry;
  if (vm.count("json")) {
    boost::json::object o = s.to_json();
    o["path"] = path;
    o["producer"] = reader->header().producer;
    o["created"] = reader->header().created;
    o["block_topk"] = g.block_topk();
    o["page_size"] = g.page_size;
    o["compress_ratio"] = g.compress_ratio;
    std::cout << boost::json::serialize(o) << "\n";
    return 0;
  }
  std::printf("trace      %s\nproducer   %s\ncreated    %s\n", path.c_str(),
              reader->header().producer.c_str(), reader->header().created.c_str());
  std::printf("geometry   %d QSA layers, page %d tokens, compress ratio %d, block_topk %d\n\n",
              g.qsa_layers(), g.page_size, g.compress_ratio, g.block_topk());
  Table t({"figure", "value"});
  t.add({"requests", fmt_int(static_cast<long long>(s.requests))});
  t.add({"forwards", fmt_int(static_cast<long long>(s.forwards))});
  t.add({"rows (prefill / decode)", fmt_int(static_cast<long long>(s.prefill_rows)) + " / " +
                                        fmt_int(static_cast<long long>(s.decode_rows))});
  t.add({"prefill tokens", fmt_int(static_cast<long long>(s.prefill_tokens))});
  t.add({"selected block ids", fmt_int(static_cast<long long>(s.ids))});
  t.add({"context tokens min / mean / max", fmt_int(s.context_min) + " / " +
                                                fmt_fixed(s.context_mean, 0) + " / " +
                                                fmt_int(s.context_max)});
  t.add({"distinct pages (sum over request x layer)",
         fmt_int(static_cast<long long>(s.distinct_pages))});
  t.add({"distinct pages per request x layer", fmt_fixed(s.distinct_pages_per_request_layer, 1)});
  t.add({"step overlap (mean of layers)", fmt_fixed(s.step_overlap_mean, 3)});
  t.add({"adjacent-layer overlap", fmt_fixed(s.adjacent_layer_overlap, 3)});
  if (s.sink_share.size() >= 12) {
    double first6 = 1, next6 = 0;
    for (int b = 0; b < 6; ++b)
      first6 = std::min(first6, s.sink_share[b]);
    for (int b = 6; b < 12; ++b)
      next6 += s.sink_share[b] / 6;
    t.add({"blocks 0-5 selected (min share)", fmt_fixed(first6, 3)});
    t.add({"blocks 6-11 selected (mean share)", fmt_fixed(next6, 3)});
  }
  t.add({"newest block selected", fmt_fixed(s.newest_share, 3)});
  for (std::size_t i = 0; i < s.windows.size(); ++i) {
    t.add({"working set over " + std::to_string(s.windows[i]) + " steps (blocks)",
           s.working_set_windows[i] > 0
               ? fmt_fixed(s.working_set_blocks[i], 1)
               : "n/a (no request decoded " + std::to_string(s.windows[i]) + " steps)"});
  }
  for (std::size_t i = 0; i < s.lru_multiple.size(); ++i) {
    t.add({"LRU hit rate, " + std::to_string(s.lru_multiple[i]) + "x top-k (" +
               std::to_string(s.lru_capacity[i]) + " blocks)",
           s.lru_lookups > 0 ? fmt_fixed(100 * s.lru_hit[i], 1) + " %"
                             : std::string("n/a (no decode rows)")});
  }
  t.print();
  std::printf("\nstep overlap per layer:");
  for (double o : s.step_overlap)
    std::printf(" %.3f", o);
  std::printf("\n");
  return 0;
}

// --zstd-level of a binary output, checked against zstd's range.
WriterOptions writer_options(const po::variables_map& vm) {
  WriterOptions wo;
  wo.zstd_level = vm["zstd-level"].as<int>();
  if (wo.zstd_level < 0 || wo.zstd_level > kMaxZstdLevel)
    throw ConfigError("--zstd-level: 0 (uncompressed) .. " + std::to_string(kMaxZstdLevel) +
                      ", got " + std::to_string(wo.zstd_level));
  return wo;
}

// IN and OUT (positional) and the output's zstd level: what convert and repair take.
void add_in_out(po::options_description& desc, po::positional_options_description& pos,
                const char* in_help, const char* out_help) {
  desc.add_options()("help,h", "show this help")("in", po::value<std::string>()->required(),
                                                 in_help)(
      "out", po::value<std::string>()->required(), out_help)(
      "zstd-level", po::value<int>()->default_value(3), "binary: zstd level, 0 = uncompressed");
  pos.add("in", 1).add("out", 1);
}

// ------------------------------------------------------------------------------- convert
int run_convert(const std::vector<std::string>& args) {
  po::options_description desc("options");
  po::positional_options_description pos;
  add_in_out(desc, pos, "input trace", "output trace");
  desc.add_options()("format", po::value<std::string>(),
                     "binary or jsonl (default: from the output's extension)");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier trace convert IN OUT [--format binary|jsonl]", &pos)) {
    return 0;
  }
  const std::string out = vm["out"].as<std::string>();
  const TraceFormat fmt = vm.count("format")
                              ? trace_format_from_name(vm["format"].as<std::string>())
                              : trace_format_for_path(out);
  const std::string in = vm["in"].as<std::string>();
  auto reader = TraceReader::open(in);
  const WriterOptions wo = writer_options(vm);
  io::PendingOutput pending(out);  // OUT appears only when the whole input converted
  auto writer = TraceWriter::create(pending.write_path(), reader->header(), fmt, wo);
  for_each_record(*reader, in, "kvtier trace convert", [&](const Record& r) { writer->write(r); });
  writer->close();
  writer.reset();
  pending.commit();
  return 0;
}

// -------------------------------------------------------------------------------- repair
int run_repair(const std::vector<std::string>& args) {
  po::options_description desc("options");
  po::positional_options_description pos;
  add_in_out(desc, pos, "the cut or damaged trace",
             "the repaired trace (.ktr binary, .jsonl text)");
  desc.add_options()("json", "print what was kept as JSON");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier trace repair IN OUT [--zstd-level N] [--json]",
                     &pos)) {
    return 0;
  }
  const WriterOptions wo = writer_options(vm);
  const std::string in = vm["in"].as<std::string>(), out = vm["out"].as<std::string>();
  const detail::RepairReport r = detail::repair_trace(in, out, wo);
  if (vm.count("json")) {
    const boost::json::object o{
        {"in", in},
        {"out", out},
        {"complete", r.complete},
        {"records", r.records},
        {"forwards", r.forwards},
        {"bytes_kept", r.bytes_kept},
        {"input_bytes", r.input_bytes},
        {"open_requests", r.open_requests},
        {"stopped", r.complete ? boost::json::value(nullptr) : boost::json::value(r.stopped)}};
    std::cout << boost::json::serialize(o) << "\n";
    return 0;
  }
  if (r.complete) {
    std::printf("%s was complete: all %llu records (%llu forwards) copied to %s\n", in.c_str(),
                static_cast<unsigned long long>(r.records),
                static_cast<unsigned long long>(r.forwards), out.c_str());
    return 0;
  }
  std::printf(
      "kept %llu forwards (%llu records) in %s: the first %llu of %llu bytes of %s\n"
      "%llu requests were still open at the cut\nstopped at: %s\n",
      static_cast<unsigned long long>(r.forwards), static_cast<unsigned long long>(r.records),
      out.c_str(), static_cast<unsigned long long>(r.bytes_kept),
      static_cast<unsigned long long>(r.input_bytes), in.c_str(),
      static_cast<unsigned long long>(r.open_requests), r.stopped.c_str());
  return 0;
}

// ------------------------------------------------------------------------------ head/cat
std::string describe(const Record& r, std::uint64_t index, std::size_t max_ids) {
  std::ostringstream s;
  s << "#" << index << " ";
  if (const auto* b = std::get_if<RequestBegin>(&r)) {
    s << "begin request " << b->id << ": prompt " << b->prompt_tokens << " tokens";
    if (b->shared_pages > 0) {
      s << ", first " << b->shared_pages << " pages shared with request " << b->shared_with;
    }
    s << "\n";
  } else if (const auto* e = std::get_if<RequestEnd>(&r)) {
    s << "end request " << e->id << "\n";
  } else {
    const Forward& f = std::get<Forward>(r);
    s << "forward: " << f.rows.size() << " rows, " << f.ids.size() << " selected ids\n";
    for (std::size_t ri = 0; ri < f.rows.size(); ++ri) {
      const ForwardRow& row = f.rows[ri];
      s << "  row " << ri << ": request " << row.request << " "
        << (row.kind == RowKind::decode ? "decode" : "prefill") << " position " << row.position;
      if (row.count != 1) s << " (+" << row.count << " tokens)";
      s << "\n";
      for (int l = 0; l < f.layers; ++l) {
        const auto sel = f.selection(l, static_cast<int>(ri));
        s << "    layer " << l << " (" << sel.size() << "):";
        for (std::size_t i = 0; i < sel.size() && i < max_ids; ++i)
          s << " " << sel[i];
        if (sel.size() > max_ids) s << " ...";
        s << "\n";
      }
    }
  }
  return s.str();
}

int run_dump(const std::vector<std::string>& args, bool head) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("trace", po::value<std::string>()->required(),
                                                 "trace file")(
      "records,n", po::value<long long>()->default_value(head ? 10 : -1),
      "records to show (-1: all)")("ids", po::value<long long>()->default_value(16),
                                   "ids shown per selection (-1: all)")(
      "json", "print records as JSON lines (the text form, header first)");
  po::positional_options_description pos;
  pos.add("trace", 1);
  po::variables_map vm;
  const std::string usage = std::string("kvtier trace ") + (head ? "head" : "cat") +
                            " TRACE [-n RECORDS] [--ids N] [--json]";
  if (!parse_options(args, desc, vm, usage, &pos)) return 0;
  auto reader = TraceReader::open(vm["trace"].as<std::string>());
  const long long n = vm["records"].as<long long>();
  const long long ids = vm["ids"].as<long long>();
  const std::size_t max_ids = ids < 0 ? SIZE_MAX : static_cast<std::size_t>(ids);
  if (vm.count("json")) {
    // Reuse the JSON-lines writer through /dev/stdout so the dump is a valid text trace.
    auto writer = TraceWriter::create("/dev/stdout", reader->header(), TraceFormat::jsonl);
    Record r;
    for (long long i = 0; (n < 0 || i < n) && reader->next(r); ++i)
      writer->write(r);
    writer->close();
    return 0;
  }
  const TraceHeader& h = reader->header();
  std::printf(
      "header: version %u, %d QSA layers, page %d, ratio %d, block_topk %d\n"
      "producer: %s\ncreated: %s\n",
      h.version, h.geometry.qsa_layers(), h.geometry.page_size, h.geometry.compress_ratio,
      h.geometry.block_topk(), h.producer.c_str(), h.created.c_str());
  Record r;
  for (long long i = 0; (n < 0 || i < n) && reader->next(r); ++i) {
    std::fputs(describe(r, static_cast<std::uint64_t>(i), max_ids).c_str(), stdout);
  }
  return 0;
}

// ----------------------------------------------------------------------------------- gen
int run_gen(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("out,o", po::value<std::string>()->required(),
                                                 "output trace (.ktr binary, .jsonl text)")(
      "preset", po::value<std::string>()->default_value("dsv4-flash"),
      "dsv4-flash | sparse-trained | dense-topk | shared-indexer")(
      "seed", po::value<std::uint64_t>(), "seed")("geometry", po::value<std::string>(),
                                                  "geometry JSON file (default: Flash-Next)")(
      "requests", po::value<int>(), "requests in all")("concurrent", po::value<int>(),
                                                       "requests in flight at once")(
      "prompt", po::value<std::int64_t>(), "prompt tokens (sets min and max)")(
      "prompt-min", po::value<std::int64_t>(), "")("prompt-max", po::value<std::int64_t>(), "")(
      "decode", po::value<std::int64_t>(), "decode tokens (sets min and max)")(
      "decode-min", po::value<std::int64_t>(), "")("decode-max", po::value<std::int64_t>(), "")(
      "prefill-chunk", po::value<std::int64_t>(), "tokens per prefill row")(
      "prefill-samples", po::value<int>(), "sampled tokens per prefill chunk")(
      "shared-prefix", po::value<std::int64_t>(),
      "prompt tokens later requests share with request 1")(
      "fill-depth", po::value<std::int64_t>(),
      "each request begins at this depth: the tokens before it are in the KV cache already "
      "(never prefilled), as `kvtier run --fill-depth` writes them")(
      "step-overlap", po::value<double>(), "")("recent-frac", po::value<double>(), "")(
      "recent-window", po::value<int>(), "")("layer-coupling", po::value<double>(), "")(
      "layer-follow", po::value<double>(), "")("sinks-always", po::value<int>(), "")(
      "sinks-likely", po::value<int>(), "")("sinks-likely-p", po::value<double>(), "")(
      "newest-p", po::value<double>(), "")("zipf", po::value<double>(), "popularity skew")(
      "created", po::value<std::string>()->default_value("1970-01-01T00:00:00Z"),
      "header timestamp (fixed by default so outputs are byte-identical)")(
      "format", po::value<std::string>(), "binary or jsonl (default: from the extension)")(
      "zstd-level", po::value<int>()->default_value(3),
      "binary: zstd level, 0 = uncompressed (19 makes a file ~2 % smaller, several times slower)");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier trace gen --out FILE [--preset NAME] [options]")) {
    return 0;
  }
  GenParams p = gen_preset(vm["preset"].as<std::string>());
  auto set = [&](const char* key, auto& field) {
    using T = std::decay_t<decltype(field)>;
    if (vm.count(key)) field = vm[key].as<T>();
  };
  set("seed", p.seed);
  set("requests", p.requests);
  set("concurrent", p.concurrent);
  set("prompt", p.prompt_min);
  set("prompt", p.prompt_max);
  set("prompt-min", p.prompt_min);
  set("prompt-max", p.prompt_max);
  set("decode", p.decode_min);
  set("decode", p.decode_max);
  set("decode-min", p.decode_min);
  set("decode-max", p.decode_max);
  set("prefill-chunk", p.prefill_chunk);
  set("prefill-samples", p.prefill_samples);
  set("shared-prefix", p.shared_prefix);
  set("fill-depth", p.fill_depth);
  set("step-overlap", p.step_overlap);
  set("recent-frac", p.recent_frac);
  set("recent-window", p.recent_window);
  set("layer-coupling", p.layer_coupling);
  set("layer-follow", p.layer_follow);
  set("sinks-always", p.sinks_always);
  set("sinks-likely", p.sinks_likely);
  set("sinks-likely-p", p.sinks_likely_p);
  set("newest-p", p.newest_p);
  set("zipf", p.zipf_s);
  p.validate();
  TraceHeader h;
  if (vm.count("geometry")) h.geometry = read_geometry_file(vm["geometry"].as<std::string>());
  h.producer = join_args(args);
  h.created = vm["created"].as<std::string>();
  const std::string out = vm["out"].as<std::string>();
  const TraceFormat fmt = vm.count("format")
                              ? trace_format_from_name(vm["format"].as<std::string>())
                              : trace_format_for_path(out);
  const WriterOptions wo = writer_options(vm);
  TraceGenerator gen(h.geometry, p, 0);  // checks the parameters before anything is written
  io::PendingOutput pending(out);        // OUT appears only when the whole trace is written
  auto writer = TraceWriter::create(pending.write_path(), h, fmt, wo);
  std::uint64_t expected = 0;  // forwards, for the progress bar: roughly decode tokens
  expected = static_cast<std::uint64_t>(p.requests) *
             static_cast<std::uint64_t>((p.decode_min + p.decode_max) / 2) /
             static_cast<std::uint64_t>(p.concurrent);
  Progress progress("gen", expected, "forwards");
  Record r;
  while (gen.next(r)) {
    writer->write(r);
    progress.update(gen.forwards_done());
  }
  writer->close();
  writer.reset();
  pending.commit();
  progress.finish();
  return 0;
}

int run_trace(const std::vector<std::string>& args) {
  const char* usage =
      "usage: kvtier trace <info|convert|head|cat|gen|repair> [options]   (each takes --help)\n"
      "  info     counts, context lengths, overlaps, working sets, LRU hit rates (--json)\n"
      "  convert  binary <-> JSON lines, losslessly\n"
      "  head     the first records, readable (cat: all of them)\n"
      "  gen      a synthetic trace from a calibrated preset, seeded and deterministic\n"
      "  repair   a cut trace (a recording killed mid-write) up to its last whole frame\n";
  if (args.size() < 2 || args[1] == "--help" || args[1] == "-h") {
    std::fputs(usage, args.size() < 2 ? stderr : stdout);
    return args.size() < 2 ? 2 : 0;
  }
  const std::string sub = args[1];
  const auto rest = sub_args(args, sub);
  if (sub == "info") return run_info(rest);
  if (sub == "convert") return run_convert(rest);
  if (sub == "head") return run_dump(rest, true);
  if (sub == "cat") return run_dump(rest, false);
  if (sub == "gen") return run_gen(rest);
  if (sub == "repair") return run_repair(rest);
  throw ConfigError("unknown trace subcommand '" + sub +
                    "' (info, convert, head, cat, gen, repair)");
}

const CommandRegistrar reg{{"trace", "inspect, convert and generate selection traces", run_trace}};

}  // namespace
}  // namespace kvtier::cli
