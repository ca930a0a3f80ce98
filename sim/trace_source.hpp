#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "traces/trace_record.hpp"

namespace kvtier::sim {

// A stream of trace records, read once from the front.
class RecordStream {
 public:
  virtual ~RecordStream() = default;
  // False at the end; throws on a malformed record.
  virtual bool next(traces::Record& out) = 0;
};

// A trace the simulator may read several times (a pre-pass, then one pass per sweep point,
// each on its own thread): a header and a factory of independent streams.
struct TraceInput {
  std::string name;
  traces::TraceHeader header;
  std::function<std::unique_ptr<RecordStream>()> open;
};

// An in-memory trace (tests, small generated traces). The records are shared, not copied.
TraceInput memory_trace(std::string name, traces::TraceHeader header,
                        std::vector<traces::Record> records);

// A trace file through the trace library (binary or JSON lines). Throws when the library is
// not built in or the file cannot be read.
TraceInput file_trace(const std::string& path);
// The bundled default sample, or an empty string when there is none.
std::string default_trace_path();

}  // namespace kvtier::sim
