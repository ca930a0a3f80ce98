// PendingOutput (io/pending_output.hpp): an output appears only when complete; the temporary
// goes on commit, on destruction without commit, on a failed rename and on SIGINT / SIGTERM.
#include "io/pending_output.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

namespace kvtier {
namespace {

namespace fs = std::filesystem;

// An empty directory of the test's own, removed when the test ends.
struct Dir {
  std::string path;
  explicit Dir(const std::string& name) : path(::testing::TempDir() + "kvtier-io-" + name) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(PendingOutput, AppearsOnlyOnCommit) {
  const Dir dir("commit");
  const std::string path = dir.path + "/out.txt";
  {
    io::PendingOutput out(path);
    EXPECT_EQ(out.write_path(), path + ".tmp");
    EXPECT_EQ(io::registered_temporaries(), 1);
    std::ofstream(out.write_path()) << "done";
    EXPECT_FALSE(fs::exists(path));
    out.commit();
    EXPECT_EQ(io::registered_temporaries(), 0);
  }
  EXPECT_EQ(read(path), "done");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(PendingOutput, AnAbandonedOutputLeavesTheOldFileAndNoTemporary) {
  const Dir dir("abandon");
  const std::string path = dir.path + "/out.txt";
  std::ofstream(path) << "old";
  {
    io::PendingOutput out(path);
    std::ofstream(out.write_path()) << "half";
  }
  EXPECT_EQ(read(path), "old");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(io::registered_temporaries(), 0);
}

TEST(PendingOutput, AFailedRenameRemovesTheTemporary) {
  const Dir dir("rename");
  const std::string path = dir.path + "/taken";
  fs::create_directories(path + "/inside");  // a directory with something in it
  io::PendingOutput out(path);
  std::ofstream(out.write_path()) << "x";
  EXPECT_TRUE(static_cast<bool>(out.try_commit()));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_TRUE(fs::is_directory(path));
  io::PendingOutput again(path);
  std::ofstream(again.write_path()) << "x";
  try {
    again.commit();
    FAIL() << "renamed over a directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot rename '" + path + ".tmp'"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(PendingOutput, ADeviceIsWrittenInPlace) {
  io::PendingOutput out("/dev/null");
  EXPECT_EQ(out.write_path(), "/dev/null");
  EXPECT_EQ(io::registered_temporaries(), 0);
  out.commit();
  EXPECT_TRUE(fs::exists("/dev/null"));
}

// A child writes a temporary, installs the handlers and is signalled: it dies of the signal
// and its temporary is gone; the output never appeared.
void expect_signal_removes(int sig) {
  const Dir dir("signal" + std::to_string(sig));
  const std::string path = dir.path + "/out.bin";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(sig, SIG_DFL);  // the handler is installed only over the default action
    io::install_cleanup_on_signals();
    io::PendingOutput out(path);
    std::ofstream(out.write_path()) << "partial";
    const char c = 'r';
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    for (;;)
      ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_TRUE(fs::exists(path + ".tmp"));
  ::kill(child, sig);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), sig);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_FALSE(fs::exists(path));
}

TEST(PendingOutput, SigintAndSigtermRemoveTheTemporary) {
  expect_signal_removes(SIGINT);
  expect_signal_removes(SIGTERM);
}

}  // namespace
}  // namespace kvtier
