#pragma once
#include <stdexcept>
#include <string>

namespace kvtier {

// A configuration a user gave that cannot work. The message names the field or figure at
// fault and, where there is one, the smallest value that would work.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvtier
