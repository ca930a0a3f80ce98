#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier {

// How a KV page holds its values. fp8 pages carry e4m3 codes plus one fp32 scale per
// (token, KV head, K|V); the scales travel with the codes wherever a page goes.
enum class KvDtype : std::uint8_t { bf16, fp8 };

std::string_view to_string(KvDtype d);
// Throws ConfigError naming `field` when `text` is neither "bf16" nor "fp8".
KvDtype parse_kv_dtype(std::string_view text, std::string_view field = "kv_dtype");

}  // namespace kvtier
