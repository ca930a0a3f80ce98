#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::cli {

// One `kvtier <name> ...` subcommand. `run` gets the arguments after the subcommand name
// (args[0] is "kvtier <name>") and returns the process exit code. Errors are reported on
// stderr with a non-zero code; figures go to stdout (JSON with --json, a table otherwise).
struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(const std::vector<std::string>& args);
};

// Each cmd_*.cpp registers its command with a file-scope CommandRegistrar.
void register_command(const Command& c);
const std::vector<Command>& commands();

struct CommandRegistrar {
  explicit CommandRegistrar(const Command& c) { register_command(c); }
};

}  // namespace kvtier::cli
