#include "model/kv_dtype.hpp"

#include "model/config_error.hpp"

namespace kvtier {

std::string_view to_string(KvDtype d) {
  return d == KvDtype::bf16 ? "bf16" : "fp8";
}

KvDtype parse_kv_dtype(std::string_view text, std::string_view field) {
  if (text == "bf16") return KvDtype::bf16;
  if (text == "fp8") return KvDtype::fp8;
  throw ConfigError(std::string(field) + ": expected bf16 or fp8, got '" + std::string(text) + "'");
}

}  // namespace kvtier
