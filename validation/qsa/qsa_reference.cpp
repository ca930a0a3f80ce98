#include "validation/qsa/qsa_reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>

namespace kvtier::qsa_ref {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
}  // namespace

// ---- number formats ----

std::uint16_t bf16_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

float bf16_value(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

float round_bf16(float x) {
  return bf16_value(bf16_bits(x));
}

float fp8_e4m3_decode(std::uint8_t code) {
  const int sign = code >> 7;
  const int exp = (code >> 3) & 0xf;
  const int man = code & 0x7;
  if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

std::uint8_t fp8_e4m3_encode(float x) {
  if (std::isnan(x)) return 0x7f;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kFp8Max) return sign | 0x7e;  // saturate (satfinite)
  // Nearest representable magnitude by search over the 127 codes, ties to the even code.
  std::uint8_t best = 0;
  float best_err = std::numeric_limits<float>::infinity();
  for (int c = 0; c <= 0x7e; ++c) {
    const float err = std::fabs(fp8_e4m3_decode(static_cast<std::uint8_t>(c)) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best_err = err;
      best = static_cast<std::uint8_t>(c);
    }
  }
  return sign | best;
}

float fp8_quantize(const float* x, int n, std::uint8_t* codes) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  const float scale = std::max(amax / kFp8Max, kFp8ScaleFloor);
  for (int i = 0; i < n; ++i)
    codes[i] = fp8_e4m3_encode(x[i] / scale);
  return scale;
}

// ---- RoPE ----

std::vector<double> rope_inv_freq(const Dims& d) {
  const int half = d.rope_dims / 2;
  std::vector<double> f(half);
  for (int i = 0; i < half; ++i)
    f[i] = std::pow(d.rope_theta, -2.0 * i / d.rope_dims);
  if (!d.yarn) return f;
  const double dim = d.rope_dims;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(d.yarn_original_max / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(d.rope_theta));
  };
  double low = std::max(std::floor(correction_dim(32.0)), 0.0);
  double high = std::min(std::ceil(correction_dim(1.0)), dim - 1.0);
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    f[i] = f[i] / d.yarn_factor * (1.0 - extrapolation) + f[i] * extrapolation;
  }
  return f;
}

double rope_attention_factor(const Dims& d) {
  return d.yarn ? 0.1 * std::log(d.yarn_factor) + 1.0 : 1.0;
}

void apply_rope(double* x, std::int64_t pos, const Dims& d) {
  const std::vector<double> f = rope_inv_freq(d);
  const double m = rope_attention_factor(d);
  const int half = d.rope_dims / 2;
  for (int i = 0; i < half; ++i) {
    const double a = static_cast<double>(pos) * f[i];
    const double c = std::cos(a) * m;
    const double s = std::sin(a) * m;
    const double x1 = x[i];
    const double x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

Vec rms_norm(const Vec& x, const Vec& weight, double eps) {
  const double ms = x.squaredNorm() / static_cast<double>(x.size());
  return (x / std::sqrt(ms + eps)).cwiseProduct((weight.array() + 1.0).matrix());
}

// ---- index ----

Vec compress_key(const Mat& raw, const Vec& weight, std::int64_t first_pos, const Dims& d) {
  Vec mean = raw.colwise().mean().transpose();
  Vec k = rms_norm(mean, weight, d.norm_eps);
  apply_rope(k.data(), first_pos, d);
  return k;
}

Mat index_query(const Mat& raw, const Vec& weight, std::int64_t pos, const Dims& d) {
  Mat q(raw.rows(), raw.cols());
  for (Eigen::Index h = 0; h < raw.rows(); ++h) {
    Vec r = rms_norm(raw.row(h).transpose(), weight, d.norm_eps);
    apply_rope(r.data(), pos, d);
    q.row(h) = r.transpose();
  }
  return q;
}

Vec index_scores(const Mat& iq, const Mat& slab, std::int64_t n_visible, const Dims& d) {
  Vec s = Vec::Zero(n_visible);
  const double inv = 1.0 / std::sqrt(static_cast<double>(d.index_dim));
  for (std::int64_t b = 0; b < n_visible; ++b)
    for (Eigen::Index h = 0; h < iq.rows(); ++h)
      s[b] += std::max(0.0, iq.row(h).dot(slab.row(b))) * inv;
  return s;
}

std::vector<std::int32_t> topk_blocks(const std::vector<float>& scores, std::int64_t n_valid,
                                      int k) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n_valid));
  std::iota(ids.begin(), ids.end(), 0);
  auto key = [&](std::int32_t b) {
    const float s = scores[b];
    return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s;
  };
  std::stable_sort(ids.begin(), ids.end(),
                   [&](std::int32_t a, std::int32_t b) { return key(a) > key(b); });
  if (static_cast<std::int64_t>(ids.size()) > k) ids.resize(k);
  std::sort(ids.begin(), ids.end());
  ids.resize(k, -1);
  return ids;
}

std::vector<std::int32_t> expand_tokens(const std::vector<std::int32_t>& blocks, std::int64_t pos,
                                        int ratio, int width) {
  std::vector<std::int32_t> t;
  for (std::int32_t b : blocks)
    if (b >= 0)
      for (int o = 0; o < ratio; ++o)
        t.push_back(b * ratio + o);
  for (std::int64_t p = (pos + 1) / ratio * ratio; p <= pos; ++p)
    t.push_back(static_cast<std::int32_t>(p));
  t.resize(static_cast<std::size_t>(width), -1);
  return t;
}

// ---- attention ----

AttnOut attend(const Mat& q, const Mat& k, const Mat& v, const std::vector<std::int32_t>& tokens,
               const Dims& d) {
  const double scale2 = std::numbers::log2e / std::sqrt(static_cast<double>(d.head_dim));
  AttnOut out{Mat::Zero(d.q_heads, d.head_dim), Vec::Constant(d.q_heads, kNegInf)};
  for (int h = 0; h < d.q_heads; ++h) {
    const int kvh = h / d.group();
    std::vector<double> logit;
    std::vector<std::int32_t> used;
    for (std::int32_t t : tokens) {
      if (t < 0) continue;
      logit.push_back(q.row(h).dot(k.row(t).segment(kvh * d.head_dim, d.head_dim)) * scale2);
      used.push_back(t);
    }
    if (used.empty()) continue;
    const double m = *std::max_element(logit.begin(), logit.end());
    double sum = 0.0;
    Vec acc = Vec::Zero(d.head_dim);
    for (std::size_t j = 0; j < used.size(); ++j) {
      const double p = std::exp2(logit[j] - m);
      sum += p;
      acc += p * v.row(used[j]).segment(kvh * d.head_dim, d.head_dim).transpose();
    }
    out.o.row(h) = (acc / sum).transpose();
    out.lse[h] = m + std::log2(sum);
  }
  return out;
}

AttnOut dense_causal(const Mat& q, const Mat& k, const Mat& v, std::int64_t pos, const Dims& d) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(pos + 1));
  std::iota(all.begin(), all.end(), 0);
  return attend(q, k, v, all, d);
}

AttnOut fold(const AttnOut& a, const AttnOut& b) {
  AttnOut r{Mat::Zero(a.o.rows(), a.o.cols()), Vec::Constant(a.lse.size(), kNegInf)};
  for (Eigen::Index h = 0; h < a.lse.size(); ++h) {
    const double m = std::max(a.lse[h], b.lse[h]);
    if (m == kNegInf) continue;
    const double wa = std::exp2(a.lse[h] - m);
    const double wb = std::exp2(b.lse[h] - m);
    r.o.row(h) = (wa * a.o.row(h) + wb * b.o.row(h)) / (wa + wb);
    r.lse[h] = m + std::log2(wa + wb);
  }
  return r;
}

// ---- layer ----

namespace {

double round_as(double x, Storage s) {
  return s == Storage::none ? x : static_cast<double>(round_bf16(static_cast<float>(x)));
}

// K or V of one row as stored: bf16, or fp8 codes x scale per (token, KV head).
void store_row(Eigen::Ref<Eigen::Matrix<double, 1, Eigen::Dynamic>> row, const Dims& d, Storage s) {
  for (Eigen::Index i = 0; i < row.size(); ++i)
    row[i] = round_as(row[i], s);
  if (s != Storage::fp8) return;
  std::vector<float> x(d.head_dim);
  std::vector<std::uint8_t> c(d.head_dim);
  for (int h = 0; h < d.kv_heads; ++h) {
    for (int i = 0; i < d.head_dim; ++i)
      x[i] = static_cast<float>(row[h * d.head_dim + i]);
    const float scale = fp8_quantize(x.data(), d.head_dim, c.data());
    for (int i = 0; i < d.head_dim; ++i)
      row[h * d.head_dim + i] = static_cast<double>(fp8_e4m3_decode(c[i]) * scale);
  }
}

}  // namespace

LayerOutput qsa_layer(const LayerInput& in, const Dims& d, Storage s) {
  LayerOutput out;
  const std::int64_t n = in.n;
  out.q_rot = in.q;
  out.k_stored = in.k;
  out.v_stored = in.v;
  for (std::int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < d.q_heads; ++h)
      apply_rope(out.q_rot.row(t).data() + h * d.head_dim, t, d);
    for (int h = 0; h < d.kv_heads; ++h)
      apply_rope(out.k_stored.row(t).data() + h * d.head_dim, t, d);
    for (Eigen::Index i = 0; i < out.q_rot.cols(); ++i)
      out.q_rot(t, i) = round_as(out.q_rot(t, i), s);
    store_row(out.k_stored.row(t), d, s);
    store_row(out.v_stored.row(t), d, s);
  }
  // Compressed keys of every closed group.
  const std::int64_t n_blocks = n / d.ratio;
  out.slab = Mat::Zero(std::max<std::int64_t>(n_blocks, 1), d.index_dim);
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    Vec key = compress_key(in.ik.middleRows(b * d.ratio, d.ratio), in.k_norm_w, b * d.ratio, d);
    for (Eigen::Index i = 0; i < key.size(); ++i)
      out.slab(b, i) = round_as(key[i], s);
  }
  for (std::int64_t t = 0; t < n; ++t) {
    Mat raw = Eigen::Map<const Mat>(in.iq.row(t).data(), d.index_heads, d.index_dim);
    Mat iq = index_query(raw, in.q_norm_w, t, d);
    for (Eigen::Index i = 0; i < iq.size(); ++i)
      iq.data()[i] = round_as(iq.data()[i], s);
    const std::int64_t visible = (t + 1) / d.ratio;
    Vec sc = index_scores(iq, out.slab, visible, d);
    std::vector<float> scores(static_cast<std::size_t>(visible));
    for (std::int64_t b = 0; b < visible; ++b)
      scores[b] = static_cast<float>(sc[b]);
    std::vector<std::int32_t> blocks = topk_blocks(scores, visible, d.block_topk);
    std::vector<std::int32_t> tokens = expand_tokens(blocks, t, d.ratio, d.select_width());
    Mat q = Eigen::Map<const Mat>(out.q_rot.row(t).data(), d.q_heads, d.head_dim);
    AttnOut a = attend(q, out.k_stored, out.v_stored, tokens, d);
    out.o.push_back(a.o);
    out.lse.push_back(a.lse);
    out.blocks.push_back(std::move(blocks));
    out.scores.push_back(std::move(scores));
  }
  return out;
}

LayerInput random_input(std::int64_t n, const Dims& d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](Mat& m, std::int64_t rows, std::int64_t cols, float sd) {
    m.resize(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i)
      m.data()[i] = static_cast<double>(round_bf16(normal(rng) * sd));
  };
  LayerInput in;
  in.n = n;
  fill(in.q, n, std::int64_t{d.q_heads} * d.head_dim, 0.25f);
  fill(in.k, n, std::int64_t{d.kv_heads} * d.head_dim, 0.25f);
  fill(in.v, n, std::int64_t{d.kv_heads} * d.head_dim, 1.0f);
  fill(in.iq, n, std::int64_t{d.index_heads} * d.index_dim, 1.0f);
  fill(in.ik, n, d.index_dim, 1.0f);
  Mat w;
  fill(w, 2, d.index_dim, 0.1f);
  in.q_norm_w = w.row(0).transpose();
  in.k_norm_w = w.row(1).transpose();
  return in;
}

}  // namespace kvtier::qsa_ref
