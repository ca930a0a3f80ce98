#pragma once
#include <cstdint>

#include "model/hd.hpp"

namespace kvtier {

// Which of a layer's banks: K codes, V codes, and (fp8 only) the K and V scales.
enum class BankKind : std::int32_t { k = 0, v = 1, k_scale = 2, v_scale = 3 };

// Byte layout of KV pages, shared by the host bank, the device pool, the simulator's
// functional store and every kernel. Within a page of one bank the bytes are
// [token][kv_head][head_dim] codes, or [token][kv_head] fp32 scales. Bank b of layer l is
// number l * banks_per_layer + b. All offsets are 64-bit (page x stride reaches 2^40).
struct PageLayout {
  std::int32_t layers;     // QSA layers
  std::int32_t page_size;  // tokens per page
  std::int32_t kv_heads;
  std::int32_t head_dim;
  std::int32_t code_bytes;       // bytes per element: 2 (bf16) or 1 (fp8 e4m3)
  std::int32_t banks_per_layer;  // 2 (bf16) or 4 (fp8: codes + scales)

  KVT_HD static PageLayout make(std::int32_t layers, std::int32_t page_size, std::int32_t kv_heads,
                                std::int32_t head_dim, bool fp8) {
    return {layers, page_size, kv_heads, head_dim, fp8 ? 1 : 2, fp8 ? 4 : 2};
  }
  KVT_HD bool fp8() const { return banks_per_layer == 4; }
  KVT_HD std::int32_t banks() const { return layers * banks_per_layer; }
  KVT_HD static BankKind kind_of(std::int32_t bank_in_layer) {
    return static_cast<BankKind>(bank_in_layer);
  }
  KVT_HD std::int64_t token_bytes(BankKind kind) const {
    return kind == BankKind::k || kind == BankKind::v
               ? std::int64_t{kv_heads} * head_dim * code_bytes
               : std::int64_t{kv_heads} * 4;
  }
  KVT_HD std::int64_t page_bytes(BankKind kind) const { return token_bytes(kind) * page_size; }
  // Offset of (page, token) inside one bank's array of pages.
  KVT_HD std::int64_t offset(BankKind kind, std::int64_t page, std::int32_t token) const {
    return page * page_bytes(kind) + std::int64_t{token} * token_bytes(kind);
  }
  // All banks of one page of one layer, codes and scales: what a per-layer miss moves.
  KVT_HD std::int64_t layer_page_bytes() const {
    std::int64_t b = page_bytes(BankKind::k) + page_bytes(BankKind::v);
    if (fp8()) b += page_bytes(BankKind::k_scale) + page_bytes(BankKind::v_scale);
    return b;
  }
};

}  // namespace kvtier
