#include "io/input_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace kvtier::io {

std::string read_text_file(const std::string& path, const std::string& what) {
  const std::string named = (what.empty() ? "" : what + " ") + "'" + path + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error("cannot read " + named + ": it is a directory, not a file");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + named + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + named);
  return ss.str();
}

}  // namespace kvtier::io
