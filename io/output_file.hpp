#pragma once
// A text output of a command (a timeline, a decisions log, an HTML report) that appears only
// when complete: written through a PendingOutput, committed by close().
#include <fstream>
#include <string>

#include "io/pending_output.hpp"

namespace kvtier::io {

class OutputFile {
 public:
  // Opens PATH.tmp; throws std::runtime_error "cannot write 'PATH'" when it cannot.
  explicit OutputFile(const std::string& path);
  std::ostream& stream() { return out_; }
  // Flushes, checks every write succeeded, and renames the file into place; throws
  // std::runtime_error naming the path otherwise (the temporary is removed).
  void close();

 private:
  PendingOutput pending_;
  std::ofstream out_;
};

}  // namespace kvtier::io
