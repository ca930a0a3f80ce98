// Where the bundled sample traces are found at run time (traces::samples_dir()): the
// environment variable KVTIER_SAMPLES_DIR first (ctest sets it for every test), refused by
// name when it is not a directory; without it the repository layout around the working
// directory; and an error that lists where it looked and names the variable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "traces/trace_io.hpp"

namespace kvtier::traces {
namespace {

namespace fs = std::filesystem;

// Sets (or, with nullopt, unsets) an environment variable and restores it on destruction.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Changes the working directory and restores it on destruction.
class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() { fs::current_path(old_); }
  ScopedCwd(const ScopedCwd&) = delete;
  ScopedCwd& operator=(const ScopedCwd&) = delete;

 private:
  fs::path old_;
};

// A fresh empty directory under the test's temporary directory, removed on destruction.
class TempDirectory {
 public:
  explicit TempDirectory(const std::string& name)
      : path_(fs::path(::testing::TempDir()) /
              ("kvtier-samples-dir-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDirectory() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string error_of(void (*f)()) {
  try {
    f();
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(SamplesDir, CtestPointsTheVariableAtTheBundledSamples) {
  const char* env = std::getenv(kSamplesDirVariable);
  ASSERT_NE(env, nullptr) << "ctest sets " << kSamplesDirVariable;
  EXPECT_EQ(fs::path(samples_dir()), fs::path(env).lexically_normal());
  EXPECT_TRUE(fs::is_regular_file(default_sample_path())) << default_sample_path();
}

TEST(SamplesDir, FollowsTheEnvironmentVariable) {
  const TempDirectory tmp("follows");
  const fs::path& d = tmp.path();
  const ScopedEnv env(kSamplesDirVariable, d.string());
  EXPECT_EQ(samples_dir(), d.lexically_normal().string());
  EXPECT_EQ(default_sample_path(), d.lexically_normal().string() + "/concurrent8-16k-128k.ktr");
}

TEST(SamplesDir, AWrongVariableIsRefusedByName) {
  const TempDirectory tmp("wrong");
  const fs::path missing = tmp.path() / "no-such-dir";
  {
    const ScopedEnv env(kSamplesDirVariable, missing.string());
    const std::string e = error_of([] { samples_dir(); });
    EXPECT_TRUE(has(e, "KVTIER_SAMPLES_DIR='" + missing.string() + "' is not a directory")) << e;
    EXPECT_TRUE(has(error_of([] { default_sample_path(); }), "KVTIER_SAMPLES_DIR"));
  }
  // a trace file is not the directory either, even where the repository layout is at hand
  const fs::path samples = samples_dir();
  const std::string file = (samples / "prefill-shared-prefix.ktr").string();
  const ScopedCwd cwd(samples.parent_path().parent_path());
  const ScopedEnv env(kSamplesDirVariable, file);
  EXPECT_TRUE(has(error_of([] { samples_dir(); }), "'" + file + "' is not a directory"));
}

// Without the variable: the repository layout around the working directory (the repository
// root, or a build directory one level below it), as `kvtier plan` is run by
// scripts/main-job.sh and by hand.
TEST(SamplesDir, WithoutTheVariableTheRepositoryLayoutIsFound) {
  const fs::path samples = samples_dir();  // ctest's, or found from here when run by hand
  const fs::path repo = samples.parent_path().parent_path();
  const ScopedEnv env(kSamplesDirVariable, std::nullopt);
  {
    const ScopedCwd cwd(repo);
    EXPECT_TRUE(fs::equivalent(samples_dir(), samples)) << samples_dir();
  }
  const ScopedCwd cwd(repo / "traces");  // stands for build/: its parent is the root
  EXPECT_TRUE(fs::equivalent(samples_dir(), samples)) << samples_dir();
}

TEST(SamplesDir, NotFoundSaysWhereItLookedAndNamesTheVariable) {
  const TempDirectory tmp("nowhere");
  const fs::path nowhere = tmp.path() / "a" / "b";
  fs::create_directories(nowhere);
  const ScopedEnv env(kSamplesDirVariable, std::nullopt);
  const ScopedCwd cwd(nowhere);
  const std::string e = error_of([] { samples_dir(); });
  EXPECT_TRUE(has(e, "KVTIER_SAMPLES_DIR is not set")) << e;
  EXPECT_TRUE(has(e, (nowhere / "traces" / "samples").string())) << e;
  EXPECT_TRUE(has(e, (nowhere.parent_path() / "traces" / "samples").string())) << e;
  EXPECT_TRUE(has(e, "share/kvtier/samples")) << e;
  EXPECT_TRUE(has(e, "set KVTIER_SAMPLES_DIR")) << e;
}

}  // namespace
}  // namespace kvtier::traces
