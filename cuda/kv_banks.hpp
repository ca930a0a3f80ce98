#pragma once
// One QSA layer's banks of a PageLayout (device pool, mapped host bank or staging window) in
// the form the QSA kernels take (qsa::KvBanks): K, V and, for fp8, the K / V scales.
#include <cstddef>

#include "cuda/qsa/qsa_kernels.hpp"
#include "model/page_layout.hpp"

namespace kvtier::cuda {

// `banks` holds the layout's bank addresses (layer l's first bank at l * banks_per_layer);
// `host`: they are mapped host memory, read in place over the link.
inline qsa::KvBanks layer_kv_banks(const PageLayout& layout, int layer, std::byte* const* banks,
                                   bool host) {
  const int b = layer * layout.banks_per_layer;
  qsa::KvBanks kv;
  kv.k = banks[b];
  kv.v = banks[b + 1];
  if (layout.fp8()) {
    kv.k_scale = reinterpret_cast<float*>(banks[b + 2]);
    kv.v_scale = reinterpret_cast<float*>(banks[b + 3]);
  }
  kv.fp8 = layout.fp8();
  kv.page_size = layout.page_size;
  kv.kv_heads = layout.kv_heads;
  kv.host = host;
  return kv;
}

}  // namespace kvtier::cuda
