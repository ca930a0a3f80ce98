// `kvtier trace repair`: what a damaged or cut trace holds up to its first unreadable record,
// written again as a complete trace, in either form.
#include <filesystem>
#include <unordered_set>

#include "io/pending_output.hpp"
#include "traces/format_internal.hpp"

namespace kvtier::traces::detail {

RepairReport repair_trace(const std::string& in, const std::string& out,
                          const WriterOptions& options) {
  RepairReport rep;
  std::error_code ec;
  rep.input_bytes = std::filesystem::file_size(in, ec);
  auto reader = TraceReader::open(in);  // a header that does not read: nothing to keep
  io::PendingOutput pending(out);
  auto writer = TraceWriter::create(pending.write_path(), reader->header(),
                                    trace_format_for_path(out), options);
  std::unordered_set<RequestId> open;
  Record r;
  for (;;) {
    bool more = false;
    try {
      more = reader->next(r);
    } catch (const TraceError& e) {  // the cut (or damage): keep what came before it
      rep.stopped = e.what();
      break;
    }
    if (!more) {
      rep.complete = true;
      break;
    }
    writer->write(r);
    ++rep.records;
    rep.bytes_kept = reader->bytes_read();
    if (const auto* b = std::get_if<RequestBegin>(&r)) {
      open.insert(b->id);
    } else if (const auto* e = std::get_if<RequestEnd>(&r)) {
      open.erase(e->id);
    } else {
      ++rep.forwards;
    }
  }
  writer->close();
  writer.reset();
  rep.open_requests = open.size();
  if (const std::error_code renamed = pending.try_commit())
    throw TraceError("cannot rename '" + pending.write_path() + "' to '" + out +
                     "': " + renamed.message());
  return rep;
}

}  // namespace kvtier::traces::detail
