#pragma once
#include <string>
#include <vector>

namespace kvtier::cuda {

// One measured figure of `kvtier bench residency`.
struct BenchFigure {
  std::string name;
  double value;
  std::string unit;
  std::string target;  // the target, or "" for ceilings and context figures
  std::string detail;  // bytes, sizes, how it was timed
};

struct BenchOptions {
  int repeats = 50;       // timed repetitions; the median is reported
  int bank_pages = 2048;  // host bank pages for the copy figures (12 layers x 128 KiB each)
};

// Runs every residency figure on device 0 and returns them (ceilings first).
std::vector<BenchFigure> run_residency_bench(const BenchOptions& o);

}  // namespace kvtier::cuda
