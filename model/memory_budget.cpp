#include "model/memory_budget.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/page_space.hpp"
#include "model/select_width.hpp"

namespace kvtier {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

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

// Rounded up to the next 0.01 GiB: a budget of this figure fits what needs `bytes`.
std::string gib_up(std::int64_t bytes) {
  return gib_text(std::ceil(static_cast<double>(bytes) / kGiB * 100) / 100 * kGiB);
}

// Per pool slot and residency state: its page (4 B), its last use (8 B).
constexpr std::int64_t kStateBytesPerSlot = 4 + 8;
// Per pool slot, the ensure's buffers sized for the longest query (one entry per slot): the
// query the runner compacts into (4 B) and the engine's copy of it (4 B), its misses (4 B),
// victims (4 B) and copy list (CopyOp, 12 B).
constexpr std::int64_t kEnsureBytesPerSlot = 4 + 4 + 4 + 4 + 12;
// The radix top-k's workspace per query row: three histograms of 2,048 four-byte bins, and
// 8 B per chunk of 8,192 keys (cuda/qsa/topk_expand.cu, topk_workspace_bytes).
constexpr std::int64_t kTopkBinBytes = 3 * 2048 * 4;
constexpr std::int64_t kTopkChunkKeys = 8192;

// What every placement allocates besides the pages: the indexer's keys, the page tables, and
// the selection's buffers per query token (sized for the widest forward and the longest
// context, as the runner allocates them once).
void add_common_items(MemoryBudget& b, const Geometry& g, const BudgetRequest& req,
                      std::int64_t space_tokens, std::int64_t context, std::int64_t tokens) {
  const std::int64_t layers = g.qsa_layers();
  const std::int64_t rows = req.batch_rows;
  add(b.device, b.device_bytes, "indexer slab",
      mul(space_tokens, g.slab_bytes_per_token(), layers, "the indexer slab"));
  // The last raw index keys of each request's open group, fp32.
  add(b.device, b.device_bytes, "indexer key ring",
      mul(rows * g.compress_ratio, std::int64_t{g.index_head_dim} * 4, layers, "the key ring"));
  // The logical table, the written pages' table and the per-row copy of it, 4 B per page.
  add(b.device, b.device_bytes, "page tables (logical, write, per row)",
      mul(3 * 4 * rows, g.pages_for_context(context), "the page tables"));
  // Per query token: the index scores over every compressed key of the longest context
  // (fp32), the top-k workspace, the chosen blocks, and the selected tokens with their
  // written copy; per request: the union of its rows' blocks (a list and a bitmap).
  const std::int64_t keys = std::max<std::int64_t>(1, context / g.compress_ratio);
  const std::int64_t per_token =
      4 * keys + kTopkBinBytes + 8 * ((keys + kTopkChunkKeys - 1) / kTopkChunkKeys) +
      4 * std::int64_t{g.block_topk()} + 2 * 4 * std::int64_t{g.select_width_tokens()};
  const std::int64_t per_row = 4 * keys + 4 * ((keys + 31) / 32);
  std::int64_t sel = mul(tokens, per_token, "the selection buffers");
  if (__builtin_add_overflow(sel, mul(rows, per_row, "the block union"), &sel))
    beyond_int64("the selection buffers");
  add(b.device, b.device_bytes, "selection buffers (index scores, top-k, selected tokens)", sel);
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
  if (req.batch_tokens < 0) throw ConfigError("budget: batch_tokens must not be negative");
  if (req.placement == Placement::host && req.staging_window_tokens <= 0) {
    throw ConfigError("budget: staging_window_tokens must be positive");
  }
  if (req.placement == Placement::mirror && req.pool_slots > kMaxPages) {
    throw ConfigError("budget: a pool of " + std::to_string(req.pool_slots) +
                      " slots: slot ids are 32-bit, at most " + std::to_string(kMaxPages) +
                      " slots");
  }
  const std::int64_t layers = g.qsa_layers();
  const std::int64_t token_bytes = g.kv_bytes_per_token(req.dtype);
  const std::int64_t page_bytes = mul(token_bytes, g.page_size, "a page");
  const std::int64_t space_tokens = req.host_pages * g.page_size;  // < 2^31 x 2^31: fits
  const std::int64_t context = req.context_tokens > 0 ? req.context_tokens : space_tokens;
  const std::int64_t rows = req.batch_rows;
  const std::int64_t tokens = req.batch_tokens > 0 ? req.batch_tokens : rows;
  // Residency arrays exist once per layer with the layer unit, once in all with the other.
  const std::int64_t states = req.unit == ResidencyUnit::layer_page ? layers : 1;
  const std::int64_t bank_bytes =
      mul(req.host_pages + 1, layers, page_bytes, "the host bank (host pages x layers x page)");

  MemoryBudget b;
  add_common_items(b, g, req, space_tokens, context, tokens);

  const bool staged = req.placement != Placement::device;
  switch (req.placement) {
    case Placement::device:
      add(b.device, b.device_bytes, "KV pages", bank_bytes);
      break;
    case Placement::mirror: {
      const SelectWidth w = mirror_select_width(req, req.pool_slots);
      b.select_width_pages = w.width;
      b.no_drop_slots = w.no_drop_slots;
      add(b.device, b.device_bytes, "pool slots (+1 dummy)",
          mul(req.pool_slots + 1, layers, page_bytes, "the pool (slots x layers x page)"));
      add(b.device, b.device_bytes, "residency state",
          mul(states, 4 * req.host_pages + kStateBytesPerSlot * req.pool_slots,
              "the residency state"));
      add(b.device, b.device_bytes, "ensure query and scratch",
          mul(kEnsureBytesPerSlot, req.pool_slots, "the ensure scratch"));
      // The runner translates every layer's table before the first layer (decode).
      add(b.device, b.device_bytes, "translated page tables (one per QSA layer)",
          mul(4 * rows, g.pages_for_context(context), layers, "the translated tables"));
      add(b.host, b.host_bytes, "host bank (+1 dummy page)", bank_bytes);
      break;
    }
    case Placement::host:
      add(b.host, b.host_bytes, "host bank (+1 dummy page)", bank_bytes);
      break;
  }
  if (staged) {
    // Prefill reads the host bank through a device window of one layer (never more pages
    // than a request holds, plus the dummy) and folds the windows into an fp32 accumulator.
    const std::int64_t window_pages = std::max<std::int64_t>(
        1, std::min(req.staging_window_tokens / g.page_size, g.pages_for_context(context)));
    add(b.device, b.device_bytes, "prefill staging window",
        mul(window_pages + 1, page_bytes, "the staging window (tokens x bytes per token)"));
    add(b.device, b.device_bytes, "fp32 fold accumulator + LSE",
        mul(tokens * g.q_heads, g.head_dim + 1, 4, "the fold accumulator"));
  }

  if (req.device_capacity_bytes > 0 && b.device_bytes > req.device_capacity_bytes) {
    std::string msg = device_memory_shortfall(b.device_bytes, req.device_capacity_bytes);
    if (req.placement == Placement::mirror) {
      const std::int64_t fit = largest_pool_slots(req, req.device_capacity_bytes);
      msg += "; the largest pool that fits is " + std::to_string(fit) + " slots";
    }
    throw CapacityError(msg);
  }
  if (req.host_capacity_bytes > 0 && b.host_bytes > req.host_capacity_bytes) {
    throw CapacityError("host memory: the configuration needs " + gib_text(b.host_bytes) + ", " +
                        gib_text(req.host_capacity_bytes) + " available; the largest page space " +
                        "that fits is " +
                        std::to_string(req.host_capacity_bytes / (layers * page_bytes) - 1) +
                        " pages");
  }
  return b;
}

std::string gib_text(double bytes, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f GiB", decimals, bytes / kGiB);
  return buf;
}

std::string gib_text(std::int64_t bytes, int decimals) {
  return gib_text(static_cast<double>(bytes), decimals);
}

std::string device_memory_shortfall(std::int64_t need_bytes, std::int64_t available_bytes) {
  return "device memory: the configuration needs " + gib_text(need_bytes) + ", " +
         gib_text(available_bytes) + " available; the smallest device budget that fits it is " +
         gib_up(need_bytes);
}

SelectWidth mirror_select_width(const BudgetRequest& req, std::int64_t slots) {
  const Geometry& g = req.geometry;
  const std::int64_t context =
      req.context_tokens > 0 ? req.context_tokens : req.host_pages * g.page_size;
  const int write_pages = req.write_pages >= 0 ? req.write_pages : req.batch_rows;
  return select_width(slots, req.batch_rows, write_pages, g.max_pages_per_row(context));
}

std::int64_t largest_pool_slots(const BudgetRequest& req, std::int64_t capacity_bytes) {
  if (capacity_bytes <= 0) return 0;
  const Geometry& g = req.geometry;
  g.validate();
  BudgetRequest r = req;
  r.placement = Placement::mirror;
  r.device_capacity_bytes = 0;
  r.host_capacity_bytes = 0;
  // The device bytes grow by the same amount per slot at every pool size: price the smallest
  // pool that runs the batch, then spend the rest of the capacity slot by slot.
  r.pool_slots = mirror_select_width(r, kMaxPages).min_slots;
  if (r.pool_slots > kMaxPages) return 0;
  const std::int64_t at_min = memory_budget(r).device_bytes;
  if (at_min > capacity_bytes) return 0;
  const std::int64_t layers = g.qsa_layers();
  const std::int64_t states = r.unit == ResidencyUnit::layer_page ? layers : 1;
  const std::int64_t per_slot =
      mul(layers, mul(g.kv_bytes_per_token(r.dtype), g.page_size, "a page"), "a slot's pages") +
      states * kStateBytesPerSlot + kEnsureBytesPerSlot;
  return std::min<std::int64_t>(kMaxPages, r.pool_slots + (capacity_bytes - at_min) / per_slot);
}

}  // namespace kvtier
