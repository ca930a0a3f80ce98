#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvtier::traces {

// A trace that cannot be read or written as it stands. The message names the record index
// and the byte offset where the problem was found, so a bad file can be inspected by hand.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvtier::traces
