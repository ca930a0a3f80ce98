#pragma once
// The tensors of a QSA stack of a given Geometry (docs/weights.md): names, shapes, dtypes, and
// the check of a weights file against them.
//
// Naming follows the usual "model.layers.<id>." convention with the layer ids of the full
// hybrid model (the QSA layers' ids from Geometry::qsa_layer_ids). Linear weights are
// [out_features, in_features], row-major (y = W x). All tensors are BF16. Every RMSNorm is
// zero-centred: y = x / rms(x) * (1 + w).
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/weights/safetensors.hpp"
#include "model/geometry.hpp"

namespace kvtier::weights {

// Names of one QSA layer's tensors.
struct LayerNames {
  std::string input_norm;    // [hidden]
  std::string q_proj;        // [q_heads * head_dim, hidden]
  std::string k_proj;        // [kv_heads * head_dim, hidden]
  std::string v_proj;        // [kv_heads * head_dim, hidden]
  std::string index_q;       // [index_q_heads * index_head_dim, hidden]
  std::string index_k;       // [index_kv_heads * index_head_dim, hidden]
  std::string index_q_norm;  // [index_head_dim]
  std::string index_k_norm;  // [index_head_dim]
  std::string gate_proj;     // [q_heads * head_dim, hidden]: sigmoid gate on the attention output
  std::string o_proj;        // [hidden, q_heads * head_dim]
};
LayerNames layer_names(int layer_id);

inline const char* kEmbedName = "model.embed_tokens.weight";  // [vocab, hidden]
inline const char* kFinalNormName = "model.norm.weight";      // [hidden]
inline const char* kLmHeadName = "lm_head.weight";            // [vocab, hidden]

// What a tensor is, for generators that treat kinds differently.
enum class TensorKind { embedding, norm, projection, output_projection, lm_head };
// Which tensor of a layer (or of the stack) it is.
enum class Role {
  embed,
  input_norm,
  q,
  k,
  v,
  index_q,
  index_k,
  index_q_norm,
  index_k_norm,
  gate,
  o,
  final_norm,
  lm_head
};

struct QsaTensor {
  TensorSpec spec;
  TensorKind kind = TensorKind::projection;
  Role role = Role::embed;
  int layer_id = -1;  // -1 for embedding, final norm, LM head
};

// The largest vocabulary of a stack: 2^20 token ids (the largest real vocabularies hold about
// 262k); token ids are 32-bit throughout.
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 20;

// Every tensor of the stack in file order: embedding, then per QSA layer (ascending id) the
// ten of LayerNames, then the final norm and the LM head. Throws ConfigError on a bad geometry
// or a vocabulary outside 1..kMaxVocab.
std::vector<QsaTensor> qsa_tensors(const Geometry& g, std::int64_t vocab);

// Checks that `file` holds every tensor of `qsa_tensors(g, vocab)` with the right dtype and
// shape; extra tensors are allowed. Throws WeightsError naming the file and the first tensor
// at fault (missing / wrong dtype / wrong shape).
void check_qsa_weights(const SafetensorsFile& file, const Geometry& g, std::int64_t vocab);

// Metadata keys our writer puts in __metadata__ (all values are strings).
inline const char* kMetaGeometry = "kvtier.geometry";  // geometry_to_json
inline const char* kMetaVocab = "kvtier.vocab";
inline const char* kMetaSeed = "kvtier.seed";
inline const char* kMetaNeedle = "kvtier.needle";  // JSON of the NeedlePlan, when planted

// The geometry and vocabulary a file of ours declares in its metadata; throws WeightsError when
// they are absent or unreadable.
Geometry file_geometry(const SafetensorsFile& file);
std::int64_t file_vocab(const SafetensorsFile& file);

}  // namespace kvtier::weights
