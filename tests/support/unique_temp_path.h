#pragma once
// A temp file path that no other test process can be using. ctest runs every test as its own
// process, in parallel, so a fixed name under TempDir() lets one test rewrite a file that another
// has mmapped (SIGBUS) or is reading. The name carries the pid and the running test (or, from
// SetUpTestSuite, the test suite), then `name`. Whatever the test writes there (a file or a
// directory) is removed when the process exits, so runs do not pile files up in TempDir().

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

namespace cutline::test {

// The paths handed out by this process; removed by its destructor at exit.
class TempPaths {
 public:
  ~TempPaths() {
    for (const std::string& p : paths_) {
      std::error_code ignored;
      std::filesystem::remove_all(p, ignored);
    }
  }
  void add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.push_back(path);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};

inline std::string unique_temp_path(const std::string& name) {
  static TempPaths paths;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  std::string who = "none";
  if (const ::testing::TestInfo* info = unit.current_test_info()) {
    who = std::string(info->test_suite_name()) + "." + info->name();
  } else if (const ::testing::TestSuite* suite = unit.current_test_suite()) {
    who = suite->name();
  }
  for (char& c : who) {
    if (c == '/') c = '_';  // parameterized tests are named "Prefix/Suite.Name/0"
  }
  const std::string prefix =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + who + "_";
  paths.add(prefix + name.substr(0, name.find('/')));  // "dir/file": the whole directory goes
  return prefix + name;
}

}  // namespace cutline::test
