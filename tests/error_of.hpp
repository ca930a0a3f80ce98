#pragma once
// The message of an exception a piece of code must throw, for tests that check what it says.
#include <gtest/gtest.h>

#include <string>

namespace kvtier::testing {

// The message of the E that `f` throws; fails the test (and returns "") when it throws none.
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

}  // namespace kvtier::testing
