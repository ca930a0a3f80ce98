#pragma once
#include <boost/json.hpp>
#include <optional>
#include <string>

namespace kvtier {

// Small pieces every strict JSON reader here shares (profiles, calibration points, run
// results). Errors are ConfigErrors that start with `what` (the file or format being read).

// The text parsed as one JSON object, or ConfigError "<what>: not valid JSON at line L, column
// C: <reason>" / "<what>: expected a JSON object".
boost::json::object parse_json_object(const std::string& text, const std::string& what);

// A JSON number of any of Boost.JSON's three kinds as a double; nullopt for anything else.
std::optional<double> json_number(const boost::json::value& v);

}  // namespace kvtier
