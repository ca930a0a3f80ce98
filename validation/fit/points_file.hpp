#pragma once
#include <string>
#include <vector>

#include "validation/fit/linear_fit.hpp"

namespace kvtier::fit {

// One series of a points file: a calibration term's points, y in microseconds.
struct PointSeries {
  std::string term;
  Samples samples;  // inputs named as calibration_terms() says, in that order
};

// The GPU micro-benchmarks' output (docs/validation.md, "The points file").
struct PointsFile {
  std::string card;
  std::string driver;
  std::string date;
  std::string command;
  std::vector<PointSeries> series;

  const PointSeries* find(std::string_view term) const;
};

// Throws ConfigError naming the field, series or point at fault: unknown fields or terms, a
// term given twice, inputs other than the term's, a unit other than "us", a point of the
// wrong length, a negative or non-finite number.
PointsFile read_points(const std::string& json_text);
// The same format; read_points(write_points(p)) gives p back, each number to 15 significant
// digits (Boost.JSON 1.81 parses numbers no closer than that: the last bit of a double may
// differ, which no fit can see).
std::string write_points(const PointsFile& p);

}  // namespace kvtier::fit
