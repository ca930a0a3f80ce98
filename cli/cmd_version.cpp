// `kvtier version` (also `kvtier --version`): the version and the commit it was built from,
// so that a figure in a report can be traced to the code that produced it.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.hpp"

// Both come from cli/CMakeLists.txt: the CMake project version, and the commit the build was
// configured from ("unknown" outside a git checkout, e.g. a source tarball).
#ifndef KVTIER_VERSION
#error "KVTIER_VERSION is set by cli/CMakeLists.txt"
#endif
#ifndef KVTIER_GIT_COMMIT
#error "KVTIER_GIT_COMMIT is set by cli/CMakeLists.txt"
#endif

namespace kvtier::cli {
namespace {

int run_version(const std::vector<std::string>& args) {
  if (args.size() > 1) {
    const bool help = args[1] == "--help" || args[1] == "-h";
    std::fprintf(help ? stdout : stderr, "usage: kvtier version   (or kvtier --version)\n");
    return help ? 0 : 2;
  }
  // The commit is read when cmake configures the build: a later commit without a re-run of
  // cmake still shows the earlier one.
  std::printf("kvtier %s (commit %s)\n", KVTIER_VERSION, KVTIER_GIT_COMMIT);
  return 0;
}

const CommandRegistrar reg{
    {"version", "print the version and the git commit the build was configured from", run_version}};

}  // namespace
}  // namespace kvtier::cli
