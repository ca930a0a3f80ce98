// `kvtier run`: real work on the GPU, in one of two modes chosen by the arguments. With
// --trace it replays a selection trace through the residency engine and the QSA attention;
// with --weights it runs the QSA model from a weights file (prompts in, tokens out).
#include <cstdio>

#include "cli/command.hpp"
#include "cli/run_modes.hpp"
#include "model/config_error.hpp"

namespace kvtier::cli {
namespace {

bool has_flag(const std::vector<std::string>& args, const std::string& name) {
  for (std::size_t i = 1; i < args.size(); ++i)
    if (args[i] == name || args[i].rfind(name + "=", 0) == 0) return true;
  return false;
}

int run_run(const std::vector<std::string>& args) {
  const bool trace = has_flag(args, "--trace");
  const bool weights = has_flag(args, "--weights");
  if (trace && weights) throw ConfigError("run: give --trace FILE or --weights FILE, not both");
  if (trace) return run_trace(args);
  if (weights) return run_model(args);
  if (has_flag(args, "--help") || has_flag(args, "-h") || args.size() <= 1) {
    std::printf(
        "kvtier run: real work on the GPU, in one of two modes\n\n"
        "  kvtier run --trace FILE --placement device|mirror|host [--pool-pages N] ...\n"
        "      replay a selection trace through the residency engine and the QSA attention\n"
        "  kvtier run --weights FILE --prompt-tokens N --decode N --placement ... ...\n"
        "      run the QSA model from a weights file: prefill in chunks, decode greedily\n\n"
        "'kvtier run --trace X --help' and 'kvtier run --weights X --help' list each mode's "
        "options.\n");
    return 0;
  }
  throw ConfigError("run: give --trace FILE or --weights FILE (see kvtier run --help)");
}

const CommandRegistrar reg{{"run", "run on the GPU: replay a trace, or the QSA model", run_run}};

}  // namespace
}  // namespace kvtier::cli
