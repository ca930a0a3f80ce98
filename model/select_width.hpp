#pragma once
#include <cstdint>

namespace kvtier {

// How many distinct pages each row of a batch may keep so that the whole batch's selection
// plus the pages being written fits the pool: rows * width + write_pages <= slots.
struct SelectWidth {
  int width;                   // pages per row, at most max_pages_per_row
  std::int64_t min_slots;      // smallest pool that runs this batch at all (width 1)
  std::int64_t no_drop_slots;  // smallest pool at which no row can be truncated
};

// Throws ConfigError saying the minimum pool when even one page per row does not fit.
SelectWidth select_width(std::int64_t slots, int rows, int write_pages,
                         std::int64_t max_pages_per_row);

}  // namespace kvtier
