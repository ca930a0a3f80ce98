#include "model/mirror_policy.hpp"

#include <string>

#include "model/config_error.hpp"

namespace kvtier {

std::string_view to_string(MirrorPolicy p) {
  switch (p) {
    case MirrorPolicy::lru:
      return "lru";
    case MirrorPolicy::hybrid:
      return "hybrid";
    case MirrorPolicy::prefetch:
      return "prefetch";
  }
  return "?";
}

MirrorPolicy parse_mirror_policy(std::string_view text) {
  if (text == "lru") return MirrorPolicy::lru;
  if (text == "hybrid") return MirrorPolicy::hybrid;
  if (text == "prefetch") return MirrorPolicy::prefetch;
  throw ConfigError("policy: expected lru, hybrid or prefetch, got '" + std::string(text) + "'");
}

}  // namespace kvtier
