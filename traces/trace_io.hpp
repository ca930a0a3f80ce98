#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "traces/trace_error.hpp"
#include "traces/trace_record.hpp"

namespace kvtier::traces {

// A stream of trace records, read once from the front: a file's reader, or records in memory.
class RecordStream {
 public:
  virtual ~RecordStream() = default;
  // Reads the next record into `out`; false at the clean end; throws on a malformed record.
  virtual bool next(Record& out) = 0;
};

// Streaming reader over a binary (.ktr) or JSON-lines (.jsonl) trace; the form is detected
// from the first bytes. Memory stays constant in the trace's length: one frame of the
// binary form (or one line of the text form) plus, per open request and layer, the previous
// selection that the next one is coded against.
class TraceReader : public RecordStream {
 public:
  static std::unique_ptr<TraceReader> open(const std::string& path);
  virtual ~TraceReader();
  virtual const TraceHeader& header() const = 0;
  // Reads the next record into `out`, reusing its buffers when it already holds a Forward.
  // Returns false at the clean end; throws TraceError on bad input (every record is
  // validated against the header's geometry, see validate.hpp).
  bool next(Record& out) override = 0;
  // Records returned so far.
  virtual std::uint64_t records_read() const = 0;
  // Bytes of the file consumed so far (binary: whole frames; text: whole lines), for a
  // progress bar against the file's size.
  virtual std::uint64_t bytes_read() const = 0;
};

enum class TraceFormat { binary, jsonl };

// "binary" / "jsonl"; throws TraceError on anything else.
TraceFormat trace_format_from_name(const std::string& name);
// By extension: ".jsonl" / ".json" is jsonl, anything else binary.
TraceFormat trace_format_for_path(const std::string& path);

// Binary form only: zstd level of the frames (0 stores them uncompressed, which is what the
// Python writer does when it finds no libzstd) and the decompressed size a frame aims at.
struct WriterOptions {
  int zstd_level = 3;
  std::size_t frame_bytes = std::size_t{1} << 20;
};

class TraceWriter {
 public:
  static std::unique_ptr<TraceWriter> create(const std::string& path, const TraceHeader& header,
                                             TraceFormat format);
  static std::unique_ptr<TraceWriter> create(const std::string& path, const TraceHeader& header,
                                             TraceFormat format, const WriterOptions& options);
  virtual ~TraceWriter();
  // Validates the record (request ids open, ids ascending and visible, one selection per
  // QSA layer and row) and throws TraceError naming it when it is not.
  virtual void write(const Record& r) = 0;
  // Flushes and writes the end marker; a binary trace without it reads as truncated.
  virtual void close() = 0;
};

// The environment variable that names the bundled samples' directory at run time.
inline constexpr const char* kSamplesDirVariable = "KVTIER_SAMPLES_DIR";
// The bundled samples (traces/samples). The directory is $KVTIER_SAMPLES_DIR when set (a value
// that is not a directory throws TraceError naming it); else the first that exists of
// "<exe dir>/../share/kvtier/samples", "<exe dir>/traces/samples", "<exe dir>/../traces/samples",
// "./traces/samples" and "../traces/samples"; throws TraceError listing them when none does.
std::string samples_dir();
// The sample that `kvtier plan` replays by default (8 concurrent requests of 16k-128k).
std::string default_sample_path();

}  // namespace kvtier::traces
