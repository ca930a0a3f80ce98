#pragma once
// Deterministic synthetic weights of a QSA stack (`kvtier weights gen`), scaled so that
// activations stay O(1): embeddings ~ unit variance, every projection [out, in] with standard
// deviation 1/sqrt(in) (outputs of unit variance for a normed input), zero-centred norm
// weights of standard deviation 0.05. Values are uniform, drawn from a counter-based generator
// keyed by (seed, tensor name, element index): a tensor's bytes do not depend on chunking, on
// the other tensors, or on the platform's <random>. Stored as BF16 (round to nearest even).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cuda/weights/needle.hpp"
#include "cuda/weights/qsa_tensors.hpp"

namespace kvtier::weights {

// Value of element `index` (row-major) of tensor `t`, before rounding to BF16. With a needle
// plan the planted entries (docs/needle.md) override the random ones.
float synth_value(const QsaTensor& t, std::int64_t index, std::uint64_t seed,
                  const NeedlePlan* needle);

// Fills `out` (BF16 codes, little-endian) with the bytes [offset, offset + out.size()) of `t`.
void synth_fill(const QsaTensor& t, std::uint64_t seed, const NeedlePlan* needle,
                std::int64_t offset, std::span<std::byte> out);

struct SynthOptions {
  std::uint64_t seed = 1;
  bool needle = false;  // plant the needle construction
};

// Bytes of tensor data written so far and in all, reported as the file is written.
using WriteProgress = std::function<void(std::int64_t done, std::int64_t total)>;

// Writes the whole stack to `path` with metadata (geometry, vocab, seed, needle plan).
void write_synthetic_weights(const std::string& path, const Geometry& g, std::int64_t vocab,
                             const SynthOptions& opt, const WriteProgress& progress = {});

}  // namespace kvtier::weights
