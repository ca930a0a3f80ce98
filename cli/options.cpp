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

}  // namespace kvtier::cli
