#include "cli/table.hpp"

#include <algorithm>
#include <cctype>

namespace kvtier::cli {
namespace {
// A single figure ("12", "-3.5", "1.20 GiB", "85.0%") is right-aligned; text is not.
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  const unsigned char c0 = static_cast<unsigned char>(s[0]);
  if (!(std::isdigit(c0) || s[0] == '-' || s[0] == '+' || s[0] == '.')) return false;
  return std::count(s.begin(), s.end(), ' ') <= 1;
}
}  // namespace

void Table::print(std::FILE* out) const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t c = 0; c < header_.size(); ++c)
    width[c] = header_[c].size();
  for (const auto& r : rows_) {
    for (std::size_t c = 0; c < r.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], r[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& r, bool header) {
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < r.size() ? r[c] : "";
      const int w = static_cast<int>(width[c]);
      if (!header && looks_numeric(cell)) {
        std::fprintf(out, "%s%*s", c ? "  " : "", w, cell.c_str());
      } else {
        std::fprintf(out, "%s%-*s", c ? "  " : "", w, cell.c_str());
      }
    }
    std::fprintf(out, "\n");
  };
  line(header_, true);
  std::size_t total = 0;
  for (auto w : width)
    total += w;
  total += 2 * (width.empty() ? 0 : width.size() - 1);
  std::fprintf(out, "%s\n", std::string(total, '-').c_str());
  for (const auto& r : rows_)
    line(r, false);
}

std::string fmt_int(long long v) {
  return std::to_string(v);
}

std::string fmt_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt_fixed(bytes, 0) + " B" : fmt_fixed(bytes, 2) + " " + units[u];
}

}  // namespace kvtier::cli
