#pragma once
// Small inputs for CLI tests that make their own: a tiny geometry, a trace of it and a weights
// file of it, in a directory of the test process's own, and an output directory to check for
// debris.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.hpp"

namespace kvtier::testing {

// 2 QSA layers, hidden 64, pages of 16, 16 blocks of top-k, 4,096 positions (16,384 with YaRN).
inline const char* kTinyGeometry =
    R"({"total_layers": 4, "qsa_layer_ids": [1, 3], "hidden_size": 64, "q_heads": 4,
        "kv_heads": 2, "head_dim": 16, "rope_dims": 8, "index_q_heads": 2,
        "index_kv_heads": 1, "index_head_dim": 16, "compress_ratio": 4, "select_budget": 64,
        "page_size": 16, "rope_max_positions": 4096, "yarn_factor": 4})";

// The inputs of one test process, made when constructed and removed (with `out`) when
// destroyed: a directory named after the process, since ctest runs the tests of a binary as
// processes side by side.
struct TinyInputs {
  std::string root;      // holds `dir` and `out`
  std::string dir;       // inputs
  std::string out;       // where outputs go: empty after every refused command
  std::string geometry;  // kTinyGeometry
  std::string trace;     // 2 requests of 200 prompt tokens, 12 decode steps
  std::string weights;   // vocab 64

  TinyInputs() {
    namespace fs = std::filesystem;
    root = ::testing::TempDir() + "kvtier-cli-" + std::to_string(::getpid());
    fs::remove_all(root);
    dir = root + "/in";
    out = root + "/out";
    fs::create_directories(dir);
    fs::create_directories(out);
    geometry = dir + "/tiny.json";
    std::ofstream(geometry) << kTinyGeometry;
    trace = dir + "/tiny.ktr";
    const CliRun gen = run_kvtier_argv(
        {"trace", "gen", "--geometry", geometry, "--requests", "2", "--concurrent", "2", "--prompt",
         "200", "--decode", "12", "--prefill-chunk", "64", "--zstd-level", "1", "-o", trace},
        30);
    EXPECT_EQ(gen.exit_code, 0) << gen.out;
    weights = dir + "/tiny.safetensors";
    const CliRun w = run_kvtier_argv(
        {"weights", "gen", "--geometry", geometry, "--vocab", "64", "--out", weights}, 30);
    EXPECT_EQ(w.exit_code, 0) << w.out;
  }
  ~TinyInputs() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  TinyInputs(const TinyInputs&) = delete;
  TinyInputs& operator=(const TinyInputs&) = delete;
};

// The files in `dir` (names only).
inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  return names;
}

inline void empty_dir(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    std::filesystem::remove_all(e.path());
}

// This process's inputs, made on first use, their output directory emptied for the caller.
inline const TinyInputs& tiny_inputs() {
  static const TinyInputs inputs;
  empty_dir(inputs.out);
  return inputs;
}

}  // namespace kvtier::testing
