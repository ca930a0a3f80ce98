#include "cli/options.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

#include "model/config_error.hpp"

namespace kvtier::cli {

bool parse_options(const std::vector<std::string>& args, const po::options_description& desc,
                   po::variables_map& vm, const std::string& usage_line,
                   const po::positional_options_description* positional) {
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    po::command_line_parser parser(rest);
    parser.options(desc);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << usage_line << "\n\n" << desc << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string(e.what()) + " (see " + args[0] + " --help)");
  }
  return true;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigError("cannot read '" + path + "'");
  return ss.str();
}

std::vector<std::int64_t> parse_positive_list(const std::string& text, const std::string& option,
                                              const std::string& what) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw ConfigError(option + ": expected positive " + what + " separated by commas, got '" +
                        item + "'");
    }
  }
  return out;
}

}  // namespace kvtier::cli
