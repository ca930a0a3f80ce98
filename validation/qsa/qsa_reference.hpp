#pragma once
// CPU reference of one QSA attention layer (docs/architecture.md, "The QSA model"), in fp64 with
// Eigen, written for clarity and small geometries. The GPU kernels in cuda/qsa are checked against
// it.
//
// Conventions shared with the kernels:
// - RoPE: NeoX halves on the first rope_dims of a head: pairs (i, i + rope_dims/2) for
//   i < rope_dims/2, angle = pos * inv_freq[i], inv_freq[i] = theta^(-2i/rope_dims); YaRN
//   (beta_fast 32, beta_slow 1, original max positions, factor) blends interpolated and
//   extrapolated frequencies and scales cos/sin by 0.1 ln(factor) + 1.
// - RMSNorm is zero-centred: y = x / sqrt(mean(x^2) + eps) * (weight + 1).
// - LSE is in base 2 of the scaled logits: lse = log2 sum_j 2^(q.k_j * scale * log2 e).
#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace kvtier::qsa_ref {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXd;

struct Dims {
  int q_heads = 24;
  int kv_heads = 2;
  int head_dim = 256;
  int rope_dims = 64;
  double rope_theta = 1e7;
  int index_heads = 4;
  int index_dim = 128;
  int ratio = 4;         // raw tokens per compressed key ("block")
  int block_topk = 512;  // budget / ratio
  bool yarn = false;
  double yarn_factor = 4.0;
  double yarn_original_max = 262144.0;
  double norm_eps = 1e-6;

  int group() const { return q_heads / kv_heads; }
  int select_width() const { return block_topk * ratio + ratio - 1; }
};

// How the stored K/V (and the bf16 activations) are rounded before use, to compare with a GPU
// that stores bf16 or fp8 pages honestly. none: pure fp64.
enum class Storage { none, bf16, fp8 };

// ---- number formats ----
float round_bf16(float x);                 // round to nearest even, NaN kept
std::uint16_t bf16_bits(float x);          // the bf16 code of round_bf16(x)
float bf16_value(std::uint16_t bits);      // the float a bf16 code stands for
std::uint8_t fp8_e4m3_encode(float x);     // RNE, saturating to +-448, NaN -> 0x7f
float fp8_e4m3_decode(std::uint8_t code);  // exact
constexpr float kFp8Max = 448.0f;
constexpr float kFp8ScaleFloor = 1e-12f;  // scale = max(amax / 448, floor)
// One (token, head) vector quantised as the store kernel does: returns the scale, fills codes.
float fp8_quantize(const float* x, int n, std::uint8_t* codes);

// ---- the seven steps ----
std::vector<double> rope_inv_freq(const Dims& d);  // rope_dims / 2 entries
double rope_attention_factor(const Dims& d);       // 1 without YaRN
// Rotates the first rope_dims of one head vector in place.
void apply_rope(double* x, std::int64_t pos, const Dims& d);
Vec rms_norm(const Vec& x, const Vec& weight, double eps);
// Compressed key of the group starting at first_pos from its `ratio` raw keys ([ratio][dim]):
// fp32-style mean (here fp64), norm, RoPE at first_pos.
Vec compress_key(const Mat& raw, const Vec& weight, std::int64_t first_pos, const Dims& d);
// Index query of one row: each head normed with `weight` and rotated at pos. [heads][dim].
Mat index_query(const Mat& raw, const Vec& weight, std::int64_t pos, const Dims& d);
// Scores of the visible blocks b < n_visible: sum_h relu(q_h . k_b) / sqrt(index_dim).
Vec index_scores(const Mat& iq, const Mat& slab, std::int64_t n_visible, const Dims& d);
// Exact top-k as a set: highest score first, ties to the lower block id, NaN as -inf; the
// result ascending, padded with -1 to k.
std::vector<std::int32_t> topk_blocks(const std::vector<float>& scores, std::int64_t n_valid,
                                      int k);
// Token positions: block*ratio + {0..ratio-1} per chosen block, then the causal tail of pos;
// padded with -1 to `width`.
std::vector<std::int32_t> expand_tokens(const std::vector<std::int32_t>& blocks, std::int64_t pos,
                                        int ratio, int width);

struct AttnOut {
  Mat o;    // [q_heads][head_dim]
  Vec lse;  // [q_heads], base 2 (see above); -inf when no token was attended
};
// Sparse GQA attention of one row over `tokens` (-1 entries skipped). q: [q_heads][head_dim]
// (rotated); k, v: [positions][kv_heads * head_dim] (rotated, already rounded as stored).
AttnOut attend(const Mat& q, const Mat& k, const Mat& v, const std::vector<std::int32_t>& tokens,
               const Dims& d);
// Dense causal attention of the row at pos over positions 0..pos.
AttnOut dense_causal(const Mat& q, const Mat& k, const Mat& v, std::int64_t pos, const Dims& d);
// Merges passes over disjoint token sets by their LSE.
AttnOut fold(const AttnOut& a, const AttnOut& b);

// ---- one layer over one request, rows at positions 0..n-1 ----
struct LayerInput {
  std::int64_t n = 0;
  Mat q;         // [n][q_heads * head_dim] before RoPE
  Mat k, v;      // [n][kv_heads * head_dim] before RoPE (k)
  Mat iq;        // [n][index_heads * index_dim] raw index queries
  Mat ik;        // [n][index_dim] raw index keys
  Vec q_norm_w;  // [index_dim] zero-centred RMSNorm weight of the index queries
  Vec k_norm_w;  // [index_dim] same, index keys
};
struct LayerOutput {
  std::vector<Mat> o;  // per row [q_heads][head_dim]
  std::vector<Vec> lse;
  std::vector<std::vector<std::int32_t>> blocks;  // per row, ascending, padded
  std::vector<std::vector<float>> scores;         // per row, visible blocks
  Mat q_rot, k_stored, v_stored, slab;            // intermediates, for the GPU tests
};
LayerOutput qsa_layer(const LayerInput& in, const Dims& d, Storage s);
// Random inputs of the layer for tests (fixed seed, values ~ N(0, 1) scaled to keep softmax
// non-trivial).
LayerInput random_input(std::int64_t n, const Dims& d, std::uint64_t seed);

}  // namespace kvtier::qsa_ref
