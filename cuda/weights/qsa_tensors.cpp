#include "cuda/weights/qsa_tensors.hpp"

#include <charconv>

#include "model/config_error.hpp"

namespace kvtier::weights {

LayerNames layer_names(int layer_id) {
  const std::string p = "model.layers." + std::to_string(layer_id) + ".";
  return LayerNames{
      p + "input_layernorm.weight",          p + "self_attn.q_proj.weight",
      p + "self_attn.k_proj.weight",         p + "self_attn.v_proj.weight",
      p + "self_attn.indexer.wq.weight",     p + "self_attn.indexer.wk.weight",
      p + "self_attn.indexer.q_norm.weight", p + "self_attn.indexer.k_norm.weight",
      p + "self_attn.gate_proj.weight",      p + "self_attn.o_proj.weight",
  };
}

std::vector<QsaTensor> qsa_tensors(const Geometry& g, std::int64_t vocab) {
  g.validate();
  if (vocab < 1 || vocab > kMaxVocab)
    throw ConfigError("vocab: 1.." + std::to_string(kMaxVocab) + " token ids, got " +
                      std::to_string(vocab));
  const std::int64_t h = g.hidden_size;
  const std::int64_t qd = std::int64_t{g.q_heads} * g.head_dim;
  const std::int64_t kvd = std::int64_t{g.kv_heads} * g.head_dim;
  const std::int64_t iqd = std::int64_t{g.index_q_heads} * g.index_head_dim;
  const std::int64_t ikd = std::int64_t{g.index_kv_heads} * g.index_head_dim;
  std::vector<QsaTensor> t;
  auto add = [&](std::string name, Shape shape, TensorKind kind, Role role, int layer) {
    t.push_back(
        QsaTensor{TensorSpec{std::move(name), Dtype::bf16, std::move(shape)}, kind, role, layer});
  };
  add(kEmbedName, {vocab, h}, TensorKind::embedding, Role::embed, -1);
  for (int id : g.qsa_layer_ids) {
    const LayerNames n = layer_names(id);
    add(n.input_norm, {h}, TensorKind::norm, Role::input_norm, id);
    add(n.q_proj, {qd, h}, TensorKind::projection, Role::q, id);
    add(n.k_proj, {kvd, h}, TensorKind::projection, Role::k, id);
    add(n.v_proj, {kvd, h}, TensorKind::projection, Role::v, id);
    add(n.index_q, {iqd, h}, TensorKind::projection, Role::index_q, id);
    add(n.index_k, {ikd, h}, TensorKind::projection, Role::index_k, id);
    add(n.index_q_norm, {g.index_head_dim}, TensorKind::norm, Role::index_q_norm, id);
    add(n.index_k_norm, {g.index_head_dim}, TensorKind::norm, Role::index_k_norm, id);
    add(n.gate_proj, {qd, h}, TensorKind::projection, Role::gate, id);
    add(n.o_proj, {h, qd}, TensorKind::output_projection, Role::o, id);
  }
  add(kFinalNormName, {h}, TensorKind::norm, Role::final_norm, -1);
  add(kLmHeadName, {vocab, h}, TensorKind::lm_head, Role::lm_head, -1);
  return t;
}

void check_qsa_weights(const SafetensorsFile& file, const Geometry& g, std::int64_t vocab) {
  for (const QsaTensor& q : qsa_tensors(g, vocab)) {
    const TensorSpec& want = q.spec;
    const TensorInfo* got = file.find(want.name);
    const std::string ctx = file.path() + ": tensor '" + want.name + "'";
    if (!got) throw WeightsError(ctx + " is missing");
    if (got->spec.dtype != want.dtype) {
      throw WeightsError(ctx + " has dtype " + dtype_name(got->spec.dtype) + ", expected " +
                         dtype_name(want.dtype));
    }
    if (got->spec.shape != want.shape) {
      throw WeightsError(ctx + " has shape " + shape_string(got->spec.shape) + ", expected " +
                         shape_string(want.shape));
    }
  }
}

Geometry file_geometry(const SafetensorsFile& file) {
  auto it = file.metadata().find(kMetaGeometry);
  if (it == file.metadata().end())
    throw WeightsError(file.path() + ": no '" + kMetaGeometry + "' in __metadata__");
  try {
    return geometry_from_json(it->second);
  } catch (const ConfigError& e) {
    throw WeightsError(file.path() + ": __metadata__ '" + kMetaGeometry + "': " + e.what());
  }
}

std::int64_t file_vocab(const SafetensorsFile& file) {
  auto it = file.metadata().find(kMetaVocab);
  if (it == file.metadata().end())
    throw WeightsError(file.path() + ": no '" + kMetaVocab + "' in __metadata__");
  std::int64_t v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1)
    throw WeightsError(file.path() + ": __metadata__ '" + kMetaVocab +
                       "' is not a positive integer: '" + s + "'");
  return v;
}

}  // namespace kvtier::weights
