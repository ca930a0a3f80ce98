#include "sim/trace_source.hpp"

#include "traces/trace_io.hpp"

namespace kvtier::sim {
namespace {

class MemoryStream final : public RecordStream {
 public:
  explicit MemoryStream(std::shared_ptr<const std::vector<traces::Record>> r) : r_(std::move(r)) {}
  bool next(traces::Record& out) override {
    if (i_ >= r_->size()) return false;
    out = (*r_)[i_++];
    return true;
  }

 private:
  std::shared_ptr<const std::vector<traces::Record>> r_;
  std::size_t i_ = 0;
};

}  // namespace

TraceInput memory_trace(std::string name, traces::TraceHeader header,
                        std::vector<traces::Record> records) {
  auto shared = std::make_shared<const std::vector<traces::Record>>(std::move(records));
  TraceInput t;
  t.name = std::move(name);
  t.header = std::move(header);
  t.open = [shared] { return std::make_unique<MemoryStream>(shared); };
  return t;
}

namespace {
class FileStream final : public RecordStream {
 public:
  explicit FileStream(std::unique_ptr<traces::TraceReader> r) : r_(std::move(r)) {}
  bool next(traces::Record& out) override { return r_->next(out); }

 private:
  std::unique_ptr<traces::TraceReader> r_;
};
}  // namespace

TraceInput file_trace(const std::string& path) {
  TraceInput t;
  t.name = path;
  t.header = traces::TraceReader::open(path)->header();
  t.open = [path] { return std::make_unique<FileStream>(traces::TraceReader::open(path)); };
  return t;
}

std::string default_trace_path() {
  return traces::default_sample_path();
}

}  // namespace kvtier::sim
