#pragma once
// Runs the built `kvtier` executable (path from KVTIER_EXE) and captures what it printed.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

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

// stdout and stderr apart: what a JSON consumer reads, and what a log shows (progress lines
// of commands that print them when stderr is not a terminal).
struct CliSplit {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline CliSplit run_kvtier_split(const std::string& args) {
  char path[] = "/tmp/kvtier-stderr-XXXXXX";
  const int fd = ::mkstemp(path);
  CliSplit r{-1, {}, {}};
  if (fd < 0) return r;
  ::close(fd);
  const CliResult o = [&] {
    const std::string cmd = std::string(KVTIER_EXE) + " " + args + " 2>" + path;
    CliResult c{-1, {}};
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return c;
    std::array<char, 4096> buf{};
    std::size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
      c.out.append(buf.data(), n);
    const int status = pclose(p);
    c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return c;
  }();
  r.exit_code = o.exit_code;
  r.out = o.out;
  if (FILE* f = std::fopen(path, "r")) {
    std::array<char, 4096> buf{};
    std::size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), f)) > 0)
      r.err.append(buf.data(), n);
    std::fclose(f);
  }
  ::unlink(path);
  return r;
}

// How a run of kvtier ended, with no shell between: its exit code, or the signal that ended
// it, or that it ran past its time and was killed.
struct CliRun {
  int exit_code = -1;  // -1 unless it exited
  int signal = 0;      // the signal that ended it; 0: none
  bool timed_out = false;
  double seconds = 0;
  std::string out;  // stdout and stderr as they came
};

// Runs kvtier with `args` (argv[1..]), SIGKILLed after `timeout_s`. `watch`, when given, is
// called with the child's pid about every 10 ms while it runs (to signal it, for one).
inline CliRun run_kvtier_argv(const std::vector<std::string>& args, double timeout_s,
                              const std::function<void(pid_t)>& watch = {}) {
  CliRun r;
  int fds[2];
  if (::pipe(fds) != 0) return r;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(KVTIER_EXE));
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(KVTIER_EXE, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  int status = 0;
  bool reaped = false, open = true;
  while (!reaped || open) {
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      ::poll(&p, 1, 10);
      std::array<char, 4096> buf{};
      ssize_t n;
      while ((n = ::read(fds[0], buf.data(), buf.size())) > 0)
        r.out.append(buf.data(), static_cast<std::size_t>(n));
      if (n == 0) open = false;
    }
    if (!open) ::usleep(5000);  // output closed: wait for the exit without spinning
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (!reaped && watch) watch(pid);
    if (!reaped && elapsed() > timeout_s) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      reaped = true;
    }
    if (reaped && open && r.timed_out) break;
  }
  ::close(fds[0]);
  r.seconds = elapsed();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace kvtier::testing
