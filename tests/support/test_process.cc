// Linked into every gtest binary of the suite (with its own main or gtest_main):
//  - SIGPIPE is ignored, as cutline-gateway and cutline-backend do, so that a peer closing
//    mid-write gives an error value (EPIPE) instead of killing the test process;
//  - a fatal failure in a fixture's SetUpTestSuite fails the process. GoogleTest would report
//    each test of that suite as "[  SKIPPED ]", and ctest, which marks a test skipped when its
//    output says so, would then count a suite that never started as skipped, not failed.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace {

const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

class SuiteSetUpFailureFails final : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& info) override {
    const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
    if (suite == nullptr || !suite->ad_hoc_test_result().Failed()) return;
    std::fprintf(stdout, "\n[  FAILED  ] %s: SetUpTestSuite failed (see above); %s not run\n",
                 info.test_suite_name(), info.name());
    std::fflush(stdout);
    std::_Exit(1);
  }
};

const bool kSuiteSetUpGuarded = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SuiteSetUpFailureFails);
  return true;
}();

}  // namespace
