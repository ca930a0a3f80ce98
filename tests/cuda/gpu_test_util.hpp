#pragma once
#include <gtest/gtest.h>

#include <string>

#include "cuda/engine.hpp"
#include "cuda/host_bank.hpp"

namespace kvtier::cuda::test {

// Tests that need a device skip with the reason when there is none (CI, this build host).
#define KVT_REQUIRE_GPU()                                              \
  do {                                                                 \
    if (::kvtier::cuda::device_count() == 0)                           \
      GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found none"; \
  } while (0)

// RapidCheck runs with a fixed seed (RC_PARAMS=seed=20261129) unless RC_PARAMS is set;
// the sanitizer run sets RC_PARAMS="seed=20261129 max_success=N" to run fewer cases.

// The first difference between two engines' residency state of `layer` (its slot table, the
// pages its slots hold, their last uses), or "" when none.
std::string state_difference(MirrorEngine& a, MirrorEngine& b, int layer);

}  // namespace kvtier::cuda::test
