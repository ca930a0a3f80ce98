#pragma once
// Shared between the binary and JSON-lines forms; not part of the public interface.
#include <boost/json.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "traces/trace_io.hpp"

namespace kvtier::traces::detail {

// Binary layout constants (docs/trace-format.md has the full description).
inline constexpr char kFileMagic[8] = {'K', 'V', 'T', 'R', 'A', 'C', 'E', '1'};
inline constexpr char kFrameMagic[4] = {'K', 'V', 'T', 'F'};
inline constexpr char kEndMagic[4] = {'K', 'V', 'T', 'E'};
inline constexpr std::uint32_t kCodecRaw = 0;
inline constexpr std::uint32_t kCodecZstd = 1;
inline constexpr std::uint32_t kMaxHeaderBytes = 1u << 20;
inline constexpr std::uint32_t kMaxFrameBytes = 256u << 20;  // decompressed payload
inline constexpr std::uint8_t kTagBegin = 1;
inline constexpr std::uint8_t kTagEnd = 2;
inline constexpr std::uint8_t kTagForward = 3;

// The header as one JSON object: {"kvtier_trace": version, "geometry": {...}, "producer",
// "created"}. The parser throws TraceError (prefixed by `where`) on anything malformed.
boost::json::object header_to_json(const TraceHeader& h);
TraceHeader header_from_json(const boost::json::value& v, const std::string& where);

std::unique_ptr<TraceReader> open_binary_reader(const std::string& path);
std::unique_ptr<TraceReader> open_jsonl_reader(const std::string& path);
std::unique_ptr<TraceWriter> create_binary_writer(const std::string& path, const TraceHeader& h,
                                                  int zstd_level, std::size_t frame_bytes);
std::unique_ptr<TraceWriter> create_jsonl_writer(const std::string& path, const TraceHeader& h);

// What `repair_trace` kept of a damaged trace.
struct RepairReport {
  std::uint64_t records = 0;        // records written to the output
  std::uint64_t forwards = 0;       // of which forwards
  std::uint64_t open_requests = 0;  // begun and not ended at the cut
  std::uint64_t bytes_kept = 0;     // input bytes up to the end of the last record kept
  std::uint64_t input_bytes = 0;
  bool complete = false;  // the input read to its end: nothing was lost
  std::string stopped;    // why reading stopped early (the reader's error)
};

// Turns a trace that was cut (a recording process killed mid-write) or damaged into a valid
// one: reads `in` up to its first unreadable or invalid record -- for a cut binary trace,
// the end of its last whole frame, since a frame is read whole before any of its records --
// and writes the records before it to `out` in the form its extension names, through an
// io::PendingOutput (written to "<out>.tmp", renamed at the end, removed on any failure or
// signal). Throws
// TraceError when `in`'s header cannot be read (nothing to keep) or `out` cannot be written.
RepairReport repair_trace(const std::string& in, const std::string& out,
                          const WriterOptions& options);

// A C file closed when its owner goes: the binary form reads and writes through stdio.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

inline void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline std::uint32_t get_u32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
inline std::uint64_t get_u64(const unsigned char* p) {
  return static_cast<std::uint64_t>(get_u32(p)) | static_cast<std::uint64_t>(get_u32(p + 4)) << 32;
}

}  // namespace kvtier::traces::detail
