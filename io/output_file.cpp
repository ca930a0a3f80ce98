#include "io/output_file.hpp"

#include <stdexcept>

namespace kvtier::io {

OutputFile::OutputFile(const std::string& path) : pending_(path), out_(pending_.write_path()) {
  if (!out_) throw std::runtime_error("cannot write '" + path + "'");
}

void OutputFile::close() {
  out_.close();
  if (!out_) throw std::runtime_error("writing '" + pending_.path() + "' failed (disk full?)");
  pending_.commit();
}

}  // namespace kvtier::io
