#pragma once
// Shared by the runner's gpu tests: device detection and the small geometry with the
// compiled head sizes.
#include "cuda/host_bank.hpp"
#include "model/geometry.hpp"

namespace kvtier::runner_test {

inline bool have_device() {
  return cuda::device_count() > 0;
}

// hidden 256, 24 query heads / 2 KV heads of 256 (64 rotated; group 12 as compiled), indexer
// 4 x 128, ratio 4, budget 64 tokens (16 blocks), pages of 64, two QSA layers of four.
inline Geometry small_gpu_geometry() {
  Geometry g;
  g.total_layers = 4;
  g.qsa_layer_ids = {1, 3};
  g.hidden_size = 256;
  g.q_heads = 24;
  g.kv_heads = 2;
  g.head_dim = 256;
  g.rope_dims = 64;
  g.rope_theta = 10000.0;
  g.index_q_heads = 4;
  g.index_kv_heads = 1;
  g.index_head_dim = 128;
  g.compress_ratio = 4;
  g.select_budget = 64;
  g.page_size = 64;
  g.rope_max_positions = 65536;
  g.validate();
  return g;
}

}  // namespace kvtier::runner_test
