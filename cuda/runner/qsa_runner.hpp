#pragma once
// The QSA model runner, device placement (issue 7, first part): one request, all KV pages in
// GPU memory. Per QSA layer: zero-centred RMSNorm, Q/K/V, indexer and gate projections
// (cuBLAS, bf16 in, fp32 accumulate), the QSA layer through cuda/qsa (RoPE, index queries,
// store, compress, index, top-k, expand, attend), sigmoid gate, output projection added to the
// fp32 residual stream. Embedding before, final norm, LM head and greedy argmax after.
//
// Not yet: the mirror and host placements, several requests, the stand-in MLP layers, fp8
// pages, CUDA graphs (the forward uploads its row table with a synchronous copy).
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/weights/safetensors.hpp"
#include "model/geometry.hpp"

namespace kvtier::runner {

struct RunnerConfig {
  int max_rows = 512;               // rows of one forward (prefill chunk)
  std::int64_t max_context = 4096;  // positions of the request
  bool yarn = false;
  int splits = 0;  // attend splits; 0 = the kernels' default for the rows
  float norm_eps = 1e-6f;
};

class QsaRunner {
 public:
  // Uploads the weights (checked against the geometry) and allocates every buffer. Throws
  // ConfigError for a geometry the compiled kernels do not support (head_dim 256, index dim
  // 128, GQA group 12, index_kv_heads 1) or a context past the rope table, WeightsError for a bad
  // file.
  QsaRunner(const weights::SafetensorsFile& file, const Geometry& g, std::int64_t vocab,
            const RunnerConfig& c);
  ~QsaRunner();
  QsaRunner(const QsaRunner&) = delete;
  QsaRunner& operator=(const QsaRunner&) = delete;

  // Appends `tokens` at the request's next positions as one forward (at most max_rows) and
  // returns the greedy next token after the last of them.
  std::int32_t forward(const std::vector<std::int32_t>& tokens);
  // Prefill in chunks of `chunk` rows, then `decode` greedy steps; returns the decoded tokens.
  std::vector<std::int32_t> generate(const std::vector<std::int32_t>& prompt, int chunk,
                                     int decode);
  std::int64_t position() const { return pos_; }

  // Tests: when on, every forward appends each QSA layer's output hidden states (fp32
  // [rows][hidden], residual added) to captured()[layer index], and the last row's logits are
  // kept in last_logits().
  void set_capture(bool on) { capture_ = on; }
  const std::vector<std::vector<float>>& captured() const { return captured_; }
  const std::vector<float>& last_logits() const { return last_logits_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::int64_t pos_ = 0;
  bool capture_ = false;
  std::vector<std::vector<float>> captured_;
  std::vector<float> last_logits_;
};

}  // namespace kvtier::runner
