#include "model/json_read.hpp"

#include <algorithm>

#include "model/config_error.hpp"

namespace kvtier {

boost::json::object parse_json_object(const std::string& text, const std::string& what) {
  boost::json::stream_parser parser;
  boost::json::error_code ec;
  const std::size_t used = parser.write(text.data(), text.size(), ec);
  if (!ec) parser.finish(ec);
  if (ec) {
    // Where it stopped, as an editor shows it: line and column, from 1 (the parser's own
    // message carries its source file and function, which say nothing about the input).
    const std::size_t at = std::min(used, text.size());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw ConfigError(what + ": not valid JSON at line " + std::to_string(line) + ", column " +
                      std::to_string(column) + ": " + ec.message());
  }
  boost::json::value root = parser.release();
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
