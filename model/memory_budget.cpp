#include "model/memory_budget.hpp"

#include <string>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/page_space.hpp"
#include "model/select_width.hpp"

namespace kvtier {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / kGiB);
  return buf;
}

// Sizes priced in int64 bytes: a product or sum past 2^63 - 1 is refused, not wrapped.
[[noreturn]] void beyond_int64(const std::string& what) {
  throw ConfigError("budget: " + what + " is beyond what 64-bit byte counts can price");
}

std::int64_t mul(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) beyond_int64(what);
  return r;
}

std::int64_t mul(std::int64_t a, std::int64_t b, std::int64_t c, const std::string& what) {
  return mul(mul(a, b, what), c, what);
}

void add(std::vector<MemoryItem>& items, std::int64_t& total, std::string name,
         std::int64_t bytes) {
  if (__builtin_add_overflow(total, bytes, &total)) beyond_int64("the total with " + name);
  items.push_back({std::move(name), bytes});
}

}  // namespace

MemoryBudget memory_budget(const BudgetRequest& req) {
  const Geometry& g = req.geometry;
  g.validate();
  if (req.host_pages <= 0) throw ConfigError("budget: host_pages must be positive");
  if (req.host_pages > kMaxPages) {
    throw ConfigError("budget: " + std::to_string(req.host_pages) +
                      " host pages: page ids are 32-bit, at most " + std::to_string(kMaxPages) +
                      " pages (" + std::to_string(mul(kMaxPages, g.page_size, "the page space")) +
                      " tokens)");
  }
  if (req.batch_rows <= 0) throw ConfigError("budget: batch_rows must be positive");
  if (req.placement == Placement::host && req.staging_window_tokens <= 0) {
    throw ConfigError("budget: staging_window_tokens must be positive");
  }
  if (req.placement == Placement::mirror && req.pool_slots > kMaxPages) {
    throw ConfigError("budget: a pool of " + std::to_string(req.pool_slots) +
                      " slots: slot ids are 32-bit, at most " + std::to_string(kMaxPages) +
                      " slots");
  }
  const std::int64_t layers = g.qsa_layers();
  const std::int64_t page_bytes = mul(g.kv_bytes_per_token(req.dtype), g.page_size, "a page");
  const std::int64_t space_tokens = req.host_pages * g.page_size;  // < 2^31 x 2^31: fits
  const std::int64_t context = req.context_tokens > 0 ? req.context_tokens : space_tokens;
  const std::int64_t row_pages = g.max_pages_per_row(context);
  const int write_pages = req.write_pages >= 0 ? req.write_pages : req.batch_rows;
  // Residency arrays exist once per layer with the layer unit, once in all with the other.
  const std::int64_t states = req.unit == ResidencyUnit::layer_page ? layers : 1;
  const std::int64_t bank_bytes =
      mul(req.host_pages + 1, layers, page_bytes, "the host bank (host pages x layers x page)");

  MemoryBudget b;
  add(b.device, b.device_bytes, "indexer slab",
      mul(space_tokens, g.slab_bytes_per_token(), layers, "the indexer slab"));
  add(b.device, b.device_bytes, "block tables (logical + physical)",
      mul(2 * std::int64_t{4} * req.batch_rows, row_pages, layers, "the block tables"));

  switch (req.placement) {
    case Placement::device:
      add(b.device, b.device_bytes, "KV pages", bank_bytes);
      break;
    case Placement::mirror: {
      const SelectWidth w = select_width(req.pool_slots, req.batch_rows, write_pages, row_pages);
      b.select_width_pages = w.width;
      b.no_drop_slots = w.no_drop_slots;
      add(b.device, b.device_bytes, "pool slots (+1 dummy)",
          mul(req.pool_slots + 1, layers, page_bytes, "the pool (slots x layers x page)"));
      add(b.device, b.device_bytes, "residency state",
          mul(states, 4 * req.host_pages + (4 + 8) * req.pool_slots, "the residency state"));
      add(b.host, b.host_bytes, "host bank (+1 dummy page)", bank_bytes);
      break;
    }
    case Placement::host:
      add(b.device, b.device_bytes, "prefill staging window",
          mul(req.staging_window_tokens, g.kv_bytes_per_token(req.dtype),
              "the staging window (tokens x bytes per token)"));
      add(b.device, b.device_bytes, "fp32 fold accumulator + LSE",
          mul(std::int64_t{req.batch_rows} * g.q_heads, g.head_dim + 1, 4, "the fold accumulator"));
      add(b.host, b.host_bytes, "host bank (+1 dummy page)", bank_bytes);
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
