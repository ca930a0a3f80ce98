#include "model/memory_budget.hpp"

#include <string>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/select_width.hpp"

namespace kvtier {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / kGiB);
  return buf;
}

void add(std::vector<MemoryItem>& items, std::int64_t& total, std::string name,
         std::int64_t bytes) {
  items.push_back({std::move(name), bytes});
  total += bytes;
}

}  // namespace

MemoryBudget memory_budget(const BudgetRequest& req) {
  const Geometry& g = req.geometry;
  g.validate();
  if (req.host_pages <= 0) throw ConfigError("budget: host_pages must be positive");
  if (req.batch_rows <= 0) throw ConfigError("budget: batch_rows must be positive");
  if (req.placement == Placement::host && req.staging_window_tokens <= 0) {
    throw ConfigError("budget: staging_window_tokens must be positive");
  }
  const std::int64_t layers = g.qsa_layers();
  const std::int64_t page_bytes = g.kv_bytes_per_page(req.dtype);
  const std::int64_t space_tokens = req.host_pages * g.page_size;
  const std::int64_t context = req.context_tokens > 0 ? req.context_tokens : space_tokens;
  const std::int64_t row_pages = g.max_pages_per_row(context);
  const int write_pages = req.write_pages >= 0 ? req.write_pages : req.batch_rows;
  // Residency arrays exist once per layer with the layer unit, once in all with the other.
  const std::int64_t states = req.unit == ResidencyUnit::layer_page ? layers : 1;

  MemoryBudget b;
  add(b.device, b.device_bytes, "indexer slab", space_tokens * g.slab_bytes_per_token() * layers);
  add(b.device, b.device_bytes, "block tables (logical + physical)",
      2 * std::int64_t{4} * req.batch_rows * row_pages * layers);

  switch (req.placement) {
    case Placement::device:
      add(b.device, b.device_bytes, "KV pages", (req.host_pages + 1) * layers * page_bytes);
      break;
    case Placement::mirror: {
      const SelectWidth w = select_width(req.pool_slots, req.batch_rows, write_pages, row_pages);
      b.select_width_pages = w.width;
      add(b.device, b.device_bytes, "pool slots (+1 dummy)",
          (req.pool_slots + 1) * layers * page_bytes);
      add(b.device, b.device_bytes, "residency state",
          states * (4 * req.host_pages + (4 + 8) * req.pool_slots));
      add(b.host, b.host_bytes, "host bank (+1 dummy page)",
          (req.host_pages + 1) * layers * page_bytes);
      break;
    }
    case Placement::host:
      add(b.device, b.device_bytes, "prefill staging window",
          req.staging_window_tokens * g.kv_bytes_per_token(req.dtype));
      add(b.device, b.device_bytes, "fp32 fold accumulator + LSE",
          std::int64_t{req.batch_rows} * g.q_heads * (g.head_dim + 1) * 4);
      add(b.host, b.host_bytes, "host bank (+1 dummy page)",
          (req.host_pages + 1) * layers * page_bytes);
      break;
  }

  if (req.device_capacity_bytes > 0 && b.device_bytes > req.device_capacity_bytes) {
    std::string msg = "device memory: the configuration needs " + gib(b.device_bytes) + ", " +
                      gib(req.device_capacity_bytes) + " available";
    if (req.placement == Placement::mirror) {
      const std::int64_t fixed = b.device_bytes - (req.pool_slots + 1) * layers * page_bytes -
                                 states * 12 * req.pool_slots;
      const std::int64_t per_slot = layers * page_bytes + states * 12;
      const std::int64_t fit = (req.device_capacity_bytes - fixed) / per_slot - 1;
      msg += "; the largest pool that fits is " + std::to_string(fit > 0 ? fit : 0) + " slots";
    }
    throw CapacityError(msg);
  }
  if (req.host_capacity_bytes > 0 && b.host_bytes > req.host_capacity_bytes) {
    throw CapacityError(
        "host memory: the configuration needs " + gib(b.host_bytes) + ", " +
        gib(req.host_capacity_bytes) + " available; the largest page space " + "that fits is " +
        std::to_string(req.host_capacity_bytes / (layers * page_bytes) - 1) + " pages");
  }
  return b;
}

}  // namespace kvtier
