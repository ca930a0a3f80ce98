#pragma once
// Runs the built `kvtier` executable (path from KVTIER_EXE) and captures what it printed.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kvtier::testing {

struct CliResult {
  int exit_code;
  std::string out;  // stdout, then stderr (2>&1)
};

inline CliResult run_kvtier(const std::string& args) {
  const std::string cmd = std::string(KVTIER_EXE) + " " + args + " 2>&1";
  CliResult r{-1, {}};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kvtier::testing
