#include "cuda/calibrate/points.hpp"

#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "io/output_file.hpp"
#include "model/calibration_terms.hpp"
#include "model/config_error.hpp"

namespace kvtier::calibrate {
namespace {

std::string where(const Series& s) {
  return "series '" + s.term + "' (" + s.sweep + ")";
}

void check_series(const Series& s) {
  if (s.inputs != term_inputs(s.term)) {
    std::string want;
    for (const auto& n : term_inputs(s.term))
      want += (want.empty() ? "" : ", ") + n;
    throw std::invalid_argument(where(s) + ": inputs must be [" + want + "]");
  }
  const std::size_t len = s.inputs.size() + 1;
  for (std::size_t i = 0; i < s.points.size(); ++i) {
    const auto& pt = s.points[i];
    if (pt.size() != len)
      throw std::invalid_argument(where(s) + ": point " + std::to_string(i) + " has " +
                                  std::to_string(pt.size()) + " numbers, expected " +
                                  std::to_string(len));
    for (const double x : pt)
      if (!std::isfinite(x) || x < 0)
        throw std::invalid_argument(where(s) + ": point " + std::to_string(i) +
                                    " holds a negative or non-finite number");
  }
}

}  // namespace

const std::vector<std::string>& term_inputs(const std::string& term) {
  // The core's list (model/calibration_terms.hpp), as strings, once.
  static const std::vector<std::pair<std::string, std::vector<std::string>>> table = [] {
    std::vector<std::pair<std::string, std::vector<std::string>>> t;
    for (const CalibrationTerm& c : calibration_terms())
      t.emplace_back(std::string(c.term),
                     std::vector<std::string>(c.inputs.begin(), c.inputs.end()));
    return t;
  }();
  for (const auto& [name, inputs] : table)
    if (name == term) return inputs;
  throw std::invalid_argument("points file: unknown term '" + term +
                              "' (docs/validation.md lists the terms)");
}

const std::vector<std::string>& points_file_terms() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const CalibrationTerm& c : calibration_terms())
      v.emplace_back(c.term);
    return v;
  }();
  return names;
}

namespace {
std::size_t file_points(const Points& p, const std::string& term) {
  std::size_t n = 0;
  for (const Series& s : p.series)
    if (s.in_points_file && s.term == term) n += s.points.size();
  return n;
}
}  // namespace

std::vector<std::string> leave_out_short_terms(Points& p) {
  std::vector<std::string> out;
  for (const std::string& term : points_file_terms()) {
    const std::size_t n = file_points(p, term);
    if (n == 0 || n >= term_inputs(term).size() + 2) continue;
    out.push_back(term);
    for (Series& s : p.series)
      if (s.term == term) s.in_points_file = false;
  }
  return out;
}

std::string points_file_json(const Points& p) {
  for (const Series& s : p.series)
    if (s.in_points_file) check_series(s);
  boost::json::array series;
  for (const std::string& term : points_file_terms()) {
    boost::json::array pts;
    for (const Series& s : p.series) {
      if (!s.in_points_file || s.term != term) continue;
      for (const auto& pt : s.points) {
        boost::json::array a;
        for (const double x : pt)
          a.push_back(x);
        pts.push_back(std::move(a));
      }
    }
    if (pts.empty()) continue;
    const auto& inputs = term_inputs(term);
    if (pts.size() < inputs.size() + 2)
      throw std::invalid_argument("series '" + term + "': " + std::to_string(pts.size()) +
                                  " points, at least " + std::to_string(inputs.size() + 2) +
                                  " needed for a fit");
    boost::json::array names;
    for (const auto& n : inputs)
      names.push_back(boost::json::string(n));
    series.push_back(boost::json::object{
        {"term", term}, {"inputs", std::move(names)}, {"unit", "us"}, {"points", std::move(pts)}});
  }
  const boost::json::object o{{"card", p.card},
                              {"driver", p.driver},
                              {"date", p.date},
                              {"command", p.command},
                              {"series", std::move(series)}};
  return boost::json::serialize(o) + "\n";
}

// Through io::OutputFile, like every output of kvtier: PATH.tmp, renamed when complete,
// removed on any failure and on signals.
void check_points_path(const std::string& path) {
  try {
    const io::OutputFile probe(path);  // never closed: its temporary is removed
  } catch (const std::exception& e) {
    throw ConfigError(std::string("cannot write the points file: ") + e.what());
  }
}

void write_points_file(const Points& p, const std::string& path) {
  const std::string text = points_file_json(p);
  try {
    io::OutputFile out(path);
    out.stream() << text;
    out.close();
  } catch (const std::exception& e) {
    throw ConfigError(std::string("cannot write the points file: ") + e.what());
  }
}

std::string utc_date(std::time_t t) {
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) throw std::invalid_argument("utc_date: time out of range");
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string nvidia_driver_version(const std::string& proc_version_text) {
  // The first word of the first line made of digits and dots (at least one dot): the proprietary
  // module says "Kernel Module  580.65.06", the open one "Kernel Module for x86_64  580.65.06".
  std::istringstream in(proc_version_text.substr(0, proc_version_text.find('\n')));
  std::string word;
  while (in >> word) {
    const bool digits_and_dots = word.find_first_not_of("0123456789.") == std::string::npos;
    if (digits_and_dots && std::isdigit(static_cast<unsigned char>(word.front())) &&
        word.find('.') != std::string::npos)
      return word;
  }
  return "";
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace kvtier::calibrate
