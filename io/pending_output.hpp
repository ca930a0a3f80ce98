#pragma once
// An output file that appears only when it is complete: every writer of kvtier (trace gen,
// convert and repair, weights gen) writes through one of these.
#include <string>
#include <system_error>

namespace kvtier::io {

// Written under a temporary name, PATH.tmp, and renamed to PATH by commit(). Until then the
// temporary is registered for removal: the destructor removes it (every error path,
// exceptions included), and so does the SIGINT / SIGTERM / SIGHUP handler that
// install_cleanup_on_signals() sets. A PATH that is a device, FIFO or socket (/dev/stdout, a
// pipe) is written in place: there is nothing to rename or remove.
class PendingOutput {
 public:
  explicit PendingOutput(std::string path);
  ~PendingOutput();
  PendingOutput(const PendingOutput&) = delete;
  PendingOutput& operator=(const PendingOutput&) = delete;

  const std::string& path() const { return path_; }
  // Where to write until commit(): PATH.tmp, or PATH itself when written in place.
  const std::string& write_path() const { return write_path_; }
  // Renames the temporary to PATH (the file written must be closed). On an error PATH is as
  // it was, the temporary is removed and the error returned for the caller to report.
  [[nodiscard]] std::error_code try_commit() noexcept;
  // try_commit(), throwing std::runtime_error "cannot rename 'PATH.tmp' to 'PATH': why".
  void commit();

 private:
  void discard() noexcept;

  std::string path_, write_path_;
  int slot_ = -1;         // index in the signal handler's registry; -1: not registered
  bool pending_ = false;  // a temporary of ours may exist
};

// Sets handlers for SIGINT, SIGTERM and SIGHUP (each unless it is ignored) that remove every
// registered temporary and then end the process by the same signal. Async-signal-safe: the
// handler calls unlink() on paths copied into a static registry when they were registered.
void install_cleanup_on_signals();

// Temporaries registered now (for tests).
int registered_temporaries();

}  // namespace kvtier::io
