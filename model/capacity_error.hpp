#pragma once
#include <stdexcept>

namespace kvtier {

// A resource (host pages, pool slots, device or host bytes) ran out. The message says how
// much was asked and how much there is.
class CapacityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvtier
