#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/geometry.hpp"
#include "model/kv_dtype.hpp"
#include "model/placement.hpp"
#include "model/select_width.hpp"

namespace kvtier {

struct BudgetRequest {
  Geometry geometry;
  KvDtype dtype = KvDtype::bf16;
  Placement placement = Placement::mirror;
  ResidencyUnit unit = ResidencyUnit::layer_page;
  std::int64_t host_pages = 0;  // logical pages of the page space (per QSA layer)
  // mirror: slots per layer (layer unit) or shared slots each holding every layer's page.
  std::int64_t pool_slots = 0;
  int batch_rows = 1;  // rows (requests) of the widest forward
  // Query tokens of the widest forward (a prefill row carries a chunk of them): the per-token
  // selection buffers and the fold accumulator hold one entry per token. 0: batch_rows.
  std::int64_t batch_tokens = 0;
  int write_pages = -1;             // distinct pages the widest forward writes; -1: batch_rows
  std::int64_t context_tokens = 0;  // longest context, bounds a row's pages; 0: whole space
  std::int64_t staging_window_tokens = 131072;  // host and mirror prefill window
  // What the KV tier may use on the device (a KV budget below the card's memory, or what is
  // free); 0: not checked.
  std::int64_t device_capacity_bytes = 0;
  std::int64_t host_capacity_bytes = 0;  // 0: not checked
};

struct MemoryItem {
  std::string name;
  std::int64_t bytes;
};

struct MemoryBudget {
  std::vector<MemoryItem> device;
  std::vector<MemoryItem> host;
  std::int64_t device_bytes = 0;
  std::int64_t host_bytes = 0;
  int select_width_pages = 0;  // mirror: distinct pages a row keeps
  // mirror: the smallest pool at which no row's selection is truncated (select_width's
  // no_drop_slots): below it, selected pages can be dropped.
  std::int64_t no_drop_slots = 0;
};

// Device and host bytes a configuration needs at start-up, item by item: everything the
// placement allocates on the device per batch (docs/planner.md, "What the device budget
// counts", lists the items and which are approximate). Throws
// ConfigError for a pool that cannot hold one batch's selection (saying the minimum), for
// more pages or slots than 32-bit ids address (kMaxPages), for a size whose bytes do not fit
// an int64 (nothing is wrapped), and
// CapacityError when a given capacity is exceeded (saying what is needed, what there is, the
// smallest device budget that fits, and for mirror the largest pool that would fit).
MemoryBudget memory_budget(const BudgetRequest& req);

// `bytes` in GiB as every message and table prints memory: "15.60 GiB" (`decimals` 2) or
// "15.6 GiB" (1).
std::string gib_text(double bytes, int decimals = 2);
std::string gib_text(std::int64_t bytes, int decimals = 2);

// "device memory: the configuration needs X GiB, Y GiB available; the smallest device budget
// that fits it is Z GiB" (Z: X rounded up to 0.01 GiB), the refusal memory_budget throws.
std::string device_memory_shortfall(std::int64_t need_bytes, std::int64_t available_bytes);

// Placement mirror: the select width of `req`'s batch at `slots` pool slots (its rows, the pages
// its widest forward writes, the pages a row can touch at its longest context), with its
// smallest pool and the smallest that drops nothing; the one rule memory_budget,
// largest_pool_slots and the runner's `--pool-pages max` use. Throws ConfigError as
// select_width does when `slots` cannot hold one batch.
SelectWidth mirror_select_width(const BudgetRequest& req, std::int64_t slots);

// Placement mirror: the most pool slots at which `req` (its pool_slots ignored) fits
// `capacity_bytes` of device memory, at most kMaxPages; 0 when not even the smallest pool that
// runs the batch fits. The pool is what grows with the budget, so a KV budget is best spent on
// it: `kvtier run --pool-pages max`. Throws ConfigError as memory_budget does for a request it
// cannot price.
std::int64_t largest_pool_slots(const BudgetRequest& req, std::int64_t capacity_bytes);

}  // namespace kvtier
