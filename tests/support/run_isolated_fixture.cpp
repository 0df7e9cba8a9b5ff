// The fixture of run_isolated.py's self-test (meson suite `runner`): one test that aborts, one
// that blocks forever on a real wait, one that fails and one that passes, in that order, so the
// self-test can show that the runner names the crash, the hang and the failure, and that the
// passing test still ran after them. Run it only through `run_isolated.py --self-test`: on its
// own, HangsOnABlockingWait never returns.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

TEST(RunnerFixture, Aborts) { std::abort(); }

TEST(RunnerFixture, HangsOnABlockingWait) {
    std::promise<void> never;
    never.get_future().wait();  // nobody sets it: blocks until the runner kills the process
}

TEST(RunnerFixture, Fails) { ADD_FAILURE() << "this failure is expected by the self-test"; }

TEST(RunnerFixture, Passes) {
    const char *dir = std::getenv("QD_RUNNER_SELFTEST_DIR");
    ASSERT_NE(dir, nullptr) << "run this only through run_isolated.py --self-test";
    FILE *f = std::fopen((std::string(dir) + "/passes_ran").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
}
