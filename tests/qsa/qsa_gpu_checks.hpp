#pragma once
// Checks the QSA GPU tests share (test_qsa_gpu.cpp, test_qsa_kernels_gpu.cpp): the skip without a
// device, the reference's dimensions, relative errors and rows cut out of flat outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tests/qsa/qsa_gpu_runner.hpp"

namespace kvtier::qsa::testing {

#define REQUIRE_GPU() \
  if (!have_device()) GTEST_SKIP() << "no CUDA device"

inline qsa_ref::Dims gpu_dims(int block_topk, bool yarn = false) {
  qsa_ref::Dims d;  // the compiled geometry: 24 / 2 / 256, indexer 4 x 128, rope 64
  d.block_topk = block_topk;
  d.yarn = yarn;
  return d;
}

inline double rel(const qsa_ref::Mat& a, const qsa_ref::Mat& b) {
  return (a - b).norm() / std::max(b.norm(), 1e-30);
}

inline qsa_ref::Mat row_of(const std::vector<float>& v, int row, int rows_per, int cols) {
  qsa_ref::Mat m(rows_per, cols);
  for (int i = 0; i < rows_per * cols; ++i)
    m.data()[i] = v[static_cast<std::size_t>(row) * rows_per * cols + i];
  return m;
}

inline std::vector<std::int32_t> row_ints(const std::vector<std::int32_t>& v, int row, int width) {
  return {v.begin() + std::int64_t{row} * width, v.begin() + std::int64_t{row + 1} * width};
}

}  // namespace kvtier::qsa::testing
