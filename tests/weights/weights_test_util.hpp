#pragma once
// Helpers of the weights tests: a small geometry, temporary files, raw safetensors bytes.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/geometry.hpp"

namespace kvtier::weights::test {

// hidden 64, 4 query heads / 2 KV heads of 32 (8 rope dims), indexer 2 heads of 16, ratio 4,
// budget 64 tokens (16 blocks), pages of 16 tokens, three QSA layers of a 6-layer model.
inline Geometry small_geometry() {
  Geometry g;
  g.total_layers = 6;
  g.qsa_layer_ids = {1, 3, 5};
  g.hidden_size = 64;
  g.q_heads = 4;
  g.kv_heads = 2;
  g.head_dim = 32;
  g.rope_dims = 8;
  g.rope_theta = 10000.0;
  g.index_q_heads = 2;
  g.index_kv_heads = 1;
  g.index_head_dim = 16;
  g.compress_ratio = 4;
  g.select_budget = 64;
  g.page_size = 16;
  g.rope_max_positions = 65536;
  g.validate();
  return g;
}

// A directory of its own under the system's temporary directory, removed at destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() /
             ("kvtier-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file of the format written by hand: 8-byte length, `header` verbatim, `data_bytes` bytes.
inline std::vector<char> raw_file(const std::string& header, std::size_t data_bytes) {
  std::vector<char> b(8);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    b[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  b.insert(b.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_bytes; ++i)
    b.push_back(static_cast<char>(i * 7 + 1));
  return b;
}

}  // namespace kvtier::weights::test
