#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "traces/trace_io.hpp"
#include "traces/trace_record.hpp"

namespace kvtier::traces {

// A trace that may be read several times (a pre-pass, then one pass per sweep point, each on
// its own thread): a header and a factory of independent record streams.
struct TraceInput {
  std::string name;
  TraceHeader header;
  std::function<std::unique_ptr<RecordStream>()> open;
};

// An in-memory trace (tests, small generated traces). The records are shared, not copied.
TraceInput memory_trace(std::string name, TraceHeader header, std::vector<Record> records);

// A trace file (binary or JSON lines), each stream a TraceReader of its own. Throws
// TraceError when the file cannot be read.
TraceInput file_trace(const std::string& path);

}  // namespace kvtier::traces
