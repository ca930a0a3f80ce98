#pragma once
#include <gtest/gtest.h>

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

}  // namespace kvtier::cuda::test
