#include "traces/trace_io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "model/config_error.hpp"
#include "traces/format_internal.hpp"

namespace kvtier::traces {

namespace json = boost::json;

TraceReader::~TraceReader() = default;
TraceWriter::~TraceWriter() = default;

std::unique_ptr<TraceReader> TraceReader::open(const std::string& path) {
  // fopen succeeds on a directory and its read fails, which would read as "not a trace"
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw TraceError("cannot open '" + path + "': it is a directory, not a trace file");
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw TraceError("cannot open '" + path + "': " + std::strerror(errno));
  char head[8] = {};
  const std::size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  if (n >= 4 && std::memcmp(head, detail::kFileMagic, 4) == 0) {
    return detail::open_binary_reader(path);  // checks the rest of the magic and the version
  }
  std::size_t i = 0;
  while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
    ++i;
  if (i < n && head[i] == '{') return detail::open_jsonl_reader(path);
  throw TraceError(path + ": byte offset 0: not a kvtier trace (neither the binary magic " +
                   "\"KVTRACE1\" nor a JSON-lines header)");
}

TraceFormat trace_format_from_name(const std::string& name) {
  if (name == "binary") return TraceFormat::binary;
  if (name == "jsonl") return TraceFormat::jsonl;
  throw TraceError("unknown trace format '" + name + "' (binary or jsonl)");
}

TraceFormat trace_format_for_path(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".jsonl" || ext == ".json" ? TraceFormat::jsonl : TraceFormat::binary;
}

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, const TraceHeader& header,
                                                 TraceFormat format) {
  return create(path, header, format, WriterOptions{});
}

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, const TraceHeader& header,
                                                 TraceFormat format, const WriterOptions& options) {
  try {
    header.geometry.validate();
  } catch (const ConfigError& e) {
    throw TraceError(std::string("trace header geometry: ") + e.what());
  }
  if (format == TraceFormat::jsonl) return detail::create_jsonl_writer(path, header);
  if (options.zstd_level < 0 || options.zstd_level > 22) {
    throw TraceError("zstd level must be 0 (uncompressed) .. 22");
  }
  return detail::create_binary_writer(path, header, options.zstd_level,
                                      std::max<std::size_t>(options.frame_bytes, 1));
}

namespace detail {

json::object header_to_json(const TraceHeader& h) {
  json::object o;
  o["kvtier_trace"] = h.version;
  o["geometry"] = json::parse(geometry_to_json(h.geometry));
  o["producer"] = h.producer;
  o["created"] = h.created;
  return o;
}

TraceHeader header_from_json(const json::value& v, const std::string& where) {
  const json::object* o = v.if_object();
  if (!o) throw TraceError(where + ": the header is not a JSON object");
  TraceHeader h;
  const json::value* ver = o->if_contains("kvtier_trace");
  if (!ver || !ver->is_number()) {
    throw TraceError(where + ": not a kvtier trace header (no \"kvtier_trace\" version)");
  }
  if (!ver->is_int64() || ver->get_int64() != kTraceFormatVersion) {
    throw TraceError(where + ": unsupported trace format version " + json::serialize(*ver) +
                     " (this build reads version " + std::to_string(kTraceFormatVersion) + ")");
  }
  const json::value* g = o->if_contains("geometry");
  if (!g || !g->is_object()) throw TraceError(where + ": the header has no \"geometry\" object");
  try {
    h.geometry = geometry_from_json(json::serialize(*g));
    h.geometry.validate();
  } catch (const ConfigError& e) {
    throw TraceError(where + ": geometry: " + e.what());
  }
  for (const auto& [key, val] : *o) {
    if (key == "producer" || key == "created") {
      if (!val.is_string()) throw TraceError(where + ": \"" + std::string(key) + "\" not a string");
      (key == "producer" ? h.producer : h.created) = std::string(val.get_string());
    } else if (key != "kvtier_trace" && key != "geometry") {
      throw TraceError(where + ": unknown header field \"" + std::string(key) + "\"");
    }
  }
  return h;
}

}  // namespace detail

namespace {

std::filesystem::path exe_dir() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path{} : p.parent_path();
}

}  // namespace

std::string samples_dir() {
  // An explicit choice is taken or refused, never passed over for a guess.
  if (const char* env = std::getenv(kSamplesDirVariable); env != nullptr && *env != '\0') {
    std::error_code ec;
    if (std::filesystem::is_directory(env, ec)) {
      return std::filesystem::path(env).lexically_normal().string();
    }
    throw TraceError(std::string(kSamplesDirVariable) + "='" + env +
                     "' is not a directory: point it at the bundled sample traces "
                     "(traces/samples in the repository)");
  }
  std::vector<std::filesystem::path> tried;
  const auto add = [&tried](const std::filesystem::path& d) {
    const auto n = d.lexically_normal();
    if (std::find(tried.begin(), tried.end(), n) == tried.end()) tried.push_back(n);
  };
  if (const auto exe = exe_dir(); !exe.empty()) {
    add(exe / ".." / "share" / "kvtier" / "samples");  // an installed tree
    add(exe / "traces" / "samples");
    add(exe / ".." / "traces" / "samples");  // build/kvtier in the repository
  }
  std::error_code ec;
  if (const auto cwd = std::filesystem::current_path(ec); !ec) {
    add(cwd / "traces" / "samples");         // run from the repository root
    add(cwd / ".." / "traces" / "samples");  // run from a build directory
  }
  std::string list;
  for (const auto& d : tried) {
    if (std::filesystem::is_directory(d, ec)) return d.string();
    list += (list.empty() ? "" : ", ") + d.string();
  }
  throw TraceError("the bundled sample traces are not found: " + std::string(kSamplesDirVariable) +
                   " is not set and none of " + list + " exists; set " + kSamplesDirVariable +
                   " to the repository's traces/samples");
}

std::string default_sample_path() {
  return samples_dir() + "/concurrent8-16k-128k.ktr";
}

}  // namespace kvtier::traces
