#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace kvtier::cli {

// A plain-text table for people: a header row, right-aligned numeric-looking cells, columns
// sized to their widest cell. For machines every command has --json instead.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::FILE* out = stdout) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Fixed-precision formatting helpers, so tables and tests agree on how figures look.
std::string fmt_int(long long v);
std::string fmt_fixed(double v, int decimals);
std::string fmt_bytes(double bytes);  // "1.50 GiB", "512 B"

}  // namespace kvtier::cli
