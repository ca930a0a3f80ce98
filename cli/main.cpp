#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "io/pending_output.hpp"

namespace kvtier::cli {

void register_command(const Command& c) {
  auto& list = const_cast<std::vector<Command>&>(commands());
  list.push_back(c);
  std::sort(list.begin(), list.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
}

const std::vector<Command>& commands() {
  static std::vector<Command> list;
  return list;
}

}  // namespace kvtier::cli

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "kvtier: a host-RAM KV tier for sparse-attention models\n\n"
               "usage: kvtier <command> [options]   (kvtier <command> --help for its options)\n"
               "       kvtier --version\n\n"
               "commands:\n");
  for (const auto& c : kvtier::cli::commands()) {
    std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C or a kill mid-write removes the output's temporary (io/pending_output.hpp).
  kvtier::io::install_cleanup_on_signals();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version") name = "version";  // the conventional spelling of the command
  for (const auto& c : kvtier::cli::commands()) {
    if (c.name == name) {
      std::vector<std::string> args;
      args.push_back("kvtier " + name);
      for (int i = 2; i < argc; ++i)
        args.emplace_back(argv[i]);
      try {
        return c.run(args);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kvtier %s: error: %s\n", name.c_str(), e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "kvtier: unknown command '%s'\n\n", name.c_str());
  usage(stderr);
  return 2;
}
