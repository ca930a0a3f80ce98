#include "traces/trace_source.hpp"

namespace kvtier::traces {
namespace {

class MemoryStream final : public RecordStream {
 public:
  explicit MemoryStream(std::shared_ptr<const std::vector<Record>> r) : r_(std::move(r)) {}
  bool next(Record& out) override {
    if (i_ >= r_->size()) return false;
    out = (*r_)[i_++];
    return true;
  }

 private:
  std::shared_ptr<const std::vector<Record>> r_;
  std::size_t i_ = 0;
};

}  // namespace

TraceInput memory_trace(std::string name, TraceHeader header, std::vector<Record> records) {
  auto shared = std::make_shared<const std::vector<Record>>(std::move(records));
  TraceInput t;
  t.name = std::move(name);
  t.header = std::move(header);
  t.open = [shared] { return std::make_unique<MemoryStream>(shared); };
  return t;
}

TraceInput file_trace(const std::string& path) {
  TraceInput t;
  t.name = path;
  t.header = TraceReader::open(path)->header();
  t.open = [path]() -> std::unique_ptr<RecordStream> { return TraceReader::open(path); };
  return t;
}

}  // namespace kvtier::traces
