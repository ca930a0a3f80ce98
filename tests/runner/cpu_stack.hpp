#pragma once
// A CPU forward of the QSA stack in fp64 over a weights file of ours, built on the QSA layer
// reference (validation/qsa): embedding, per QSA layer the zero-centred input RMSNorm, the
// projections, the QSA attention, the sigmoid output gate, the output projection and the
// residual; final norm and LM head. For tests on small geometries (dense Eigen products).
#include <Eigen/Dense>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/weights/qsa_tensors.hpp"
#include "cuda/weights/safetensors.hpp"
#include "validation/qsa/qsa_reference.hpp"

namespace kvtier::runner_test {

using qsa_ref::Mat;
using qsa_ref::Vec;

// A BF16 tensor of the file as a matrix ([rows, cols]; a 1-D tensor is one row).
inline Mat tensor_mat(const weights::SafetensorsFile& f, const std::string& name) {
  const weights::TensorInfo* t = f.find(name);
  if (!t) throw weights::WeightsError(f.path() + ": tensor '" + name + "' is missing");
  if (t->spec.dtype != weights::Dtype::bf16)
    throw weights::WeightsError(f.path() + ": tensor '" + name + "' is not BF16");
  const auto& s = t->spec.shape;
  const std::int64_t rows = s.size() == 2 ? s[0] : 1;
  const std::int64_t cols = s.size() == 2 ? s[1] : (s.empty() ? 1 : s[0]);
  const auto d = f.data(*t);
  Mat m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const auto lo = static_cast<std::uint16_t>(d[static_cast<std::size_t>(2 * i)]);
    const auto hi = static_cast<std::uint16_t>(d[static_cast<std::size_t>(2 * i + 1)]);
    m.data()[i] = weights::bf16_to_float(static_cast<std::uint16_t>(lo | (hi << 8)));
  }
  return m;
}

inline qsa_ref::Dims dims_of(const Geometry& g, bool yarn) {
  qsa_ref::Dims d;
  d.q_heads = g.q_heads;
  d.kv_heads = g.kv_heads;
  d.head_dim = g.head_dim;
  d.rope_dims = g.rope_dims;
  d.rope_theta = g.rope_theta;
  d.index_heads = g.index_q_heads;
  d.index_dim = g.index_head_dim;
  d.ratio = g.compress_ratio;
  d.block_topk = g.block_topk();
  d.yarn = yarn;
  d.yarn_factor = g.yarn_factor;
  d.yarn_original_max = static_cast<double>(g.rope_max_positions);
  return d;
}

// Zero-centred RMSNorm of every row.
inline Mat rms_norm_rows(const Mat& x, const Vec& w, double eps) {
  Mat y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    y.row(r) = qsa_ref::rms_norm(x.row(r).transpose(), w, eps).transpose();
  return y;
}

struct CpuLayerWeights {
  Vec input_norm, index_q_norm, index_k_norm;
  Mat q, k, v, index_q, index_k, gate, o;
};

inline CpuLayerWeights load_layer(const weights::SafetensorsFile& f, int layer_id) {
  const weights::LayerNames n = weights::layer_names(layer_id);
  CpuLayerWeights w;
  w.input_norm = tensor_mat(f, n.input_norm).row(0).transpose();
  w.index_q_norm = tensor_mat(f, n.index_q_norm).row(0).transpose();
  w.index_k_norm = tensor_mat(f, n.index_k_norm).row(0).transpose();
  w.q = tensor_mat(f, n.q_proj);
  w.k = tensor_mat(f, n.k_proj);
  w.v = tensor_mat(f, n.v_proj);
  w.index_q = tensor_mat(f, n.index_q);
  w.index_k = tensor_mat(f, n.index_k);
  w.gate = tensor_mat(f, n.gate_proj);
  w.o = tensor_mat(f, n.o_proj);
  return w;
}

struct CpuLayerResult {
  qsa_ref::LayerInput in;    // the projections fed to the QSA layer
  qsa_ref::LayerOutput qsa;  // its output and intermediates
  Mat attn;                  // [n, q_heads * head_dim] attention output
  Mat y;                     // [n, hidden] the layer's output (residual added)
};

// One QSA layer over hidden states x ([n, hidden], rows at positions 0..n-1).
inline CpuLayerResult cpu_layer(const CpuLayerWeights& w, const Mat& x, const qsa_ref::Dims& d,
                                qsa_ref::Storage s) {
  CpuLayerResult r;
  const Mat xn = rms_norm_rows(x, w.input_norm, d.norm_eps);
  r.in.n = x.rows();
  r.in.q = xn * w.q.transpose();
  r.in.k = xn * w.k.transpose();
  r.in.v = xn * w.v.transpose();
  r.in.iq = xn * w.index_q.transpose();
  r.in.ik = xn * w.index_k.transpose();
  r.in.q_norm_w = w.index_q_norm;
  r.in.k_norm_w = w.index_k_norm;
  r.qsa = qsa_ref::qsa_layer(r.in, d, s);
  r.attn.resize(x.rows(), std::int64_t{d.q_heads} * d.head_dim);
  for (Eigen::Index t = 0; t < x.rows(); ++t)
    r.attn.row(t) = Eigen::Map<const Eigen::RowVectorXd>(
        r.qsa.o[static_cast<std::size_t>(t)].data(), r.attn.cols());
  const Mat g =
      (xn * w.gate.transpose()).unaryExpr([](double z) { return 1.0 / (1.0 + std::exp(-z)); });
  r.y = x + g.cwiseProduct(r.attn) * w.o.transpose();
  return r;
}

inline Mat embed(const weights::SafetensorsFile& f, const std::vector<std::int64_t>& tokens) {
  const Mat table = tensor_mat(f, weights::kEmbedName);
  Mat x(static_cast<Eigen::Index>(tokens.size()), table.cols());
  for (std::size_t i = 0; i < tokens.size(); ++i)
    x.row(static_cast<Eigen::Index>(i)) = table.row(tokens[i]);
  return x;
}

inline double cosine(const Eigen::Ref<const Eigen::RowVectorXd>& a,
                     const Eigen::Ref<const Eigen::RowVectorXd>& b) {
  return a.dot(b) / (a.norm() * b.norm());
}

}  // namespace kvtier::runner_test
