#include "model/json_read.hpp"

#include "model/config_error.hpp"

namespace kvtier {

boost::json::object parse_json_object(const std::string& text, const std::string& what) {
  boost::json::value root;
  try {
    root = boost::json::parse(text);
  } catch (const std::exception& e) {
    throw ConfigError(what + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) throw ConfigError(what + ": expected a JSON object");
  return std::move(root.as_object());
}

std::optional<double> json_number(const boost::json::value& v) {
  if (v.is_double()) return v.as_double();
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  return std::nullopt;
}

}  // namespace kvtier
