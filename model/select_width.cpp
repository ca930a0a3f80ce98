#include "model/select_width.hpp"

#include <algorithm>
#include <string>

#include "model/config_error.hpp"

namespace kvtier {

SelectWidth select_width(std::int64_t slots, int rows, int write_pages,
                         std::int64_t max_pages_per_row) {
  if (rows <= 0) throw ConfigError("select width: batch has no rows");
  if (write_pages < 0) throw ConfigError("select width: negative write page count");
  if (max_pages_per_row <= 0) throw ConfigError("select width: rows may touch no page");
  SelectWidth w{};
  w.min_slots = std::int64_t{rows} + write_pages;
  w.no_drop_slots = std::int64_t{rows} * max_pages_per_row + write_pages;
  if (slots < w.min_slots) {
    throw ConfigError("pool of " + std::to_string(slots) + " slots cannot hold one batch of " +
                      std::to_string(rows) + " rows and " + std::to_string(write_pages) +
                      " written pages: the minimum is " + std::to_string(w.min_slots) + " slots (" +
                      std::to_string(w.no_drop_slots) + " for no truncated selection)");
  }
  w.width =
      static_cast<int>(std::min<std::int64_t>(max_pages_per_row, (slots - write_pages) / rows));
  return w;
}

}  // namespace kvtier
