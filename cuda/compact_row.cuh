#pragma once
// The core's compaction of one row in the calling thread, with the row's drops and bad status
// added to the launch's counters: the one-thread form, and the fallback of the data-parallel
// forms (compact_kernels.cu, residency_step.cu) for rows they cannot prove sorted and in range.
#include "cuda/kernels.hpp"
#include "model/compaction.hpp"

namespace kvtier::cuda {

__device__ inline void compact_row_counted(const CompactParams& p, int r) {
  const int n_blocks = p.tail_only != nullptr && p.tail_only[r] != 0 ? 0 : p.n_blocks;
  const RowCompaction c =
      compact_row(p.blocks + std::int64_t{r} * p.n_blocks, n_blocks, p.pos[r], p.compress_ratio,
                  p.page_size, p.tables + std::int64_t{r} * p.table_stride, p.table_len[r], p.width,
                  p.out + std::int64_t{r} * p.width);
  if (c.dropped > 0) atomicAdd(p.dropped, c.dropped);
  if (c.status != CompactStatus::ok) atomicAdd(p.bad_rows, 1);
}

}  // namespace kvtier::cuda
