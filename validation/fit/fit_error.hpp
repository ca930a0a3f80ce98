#pragma once
#include <stdexcept>

namespace kvtier::fit {

// Points that cannot be fitted: too few, not finite, or inputs that do not vary
// independently (a rank-deficient design). The message names the input or point at fault.
class FitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvtier::fit
