// ExecutorOptions::stop_signals: a command's runs end on SIGINT/SIGTERM/SIGHUP sent to the
// process (the monitor reads them from a signalfd); a service's runs leave them to the service.
// Every thread of this test blocks SIGTERM, so a process-directed one stays pending until some
// reader takes it: the run's monitor when it is the command's, else the test itself, afterwards.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "harness.hpp"
#include "sandboxrun/executor.hpp"

using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;

namespace sandboxrun {
namespace {

struct ExecutorSignals : ::testing::Test {
  TempDir d;
  sigset_t term{}, old{};
  void SetUp() override {
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &term, &old);  // before the Executor's threads exist
  }
  void TearDown() override {
    const timespec now{0, 0};
    while (::sigtimedwait(&term, nullptr, &now) == SIGTERM) {}
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  // A 3 s run with SIGTERM sent to the process 1 s in.
  RunResult run_with_sigterm(bool stop_signals) {
    Executor ex = Executor::open({.config = write_config(d), .audit_log = d.path() + "/audit.log",
                                  .stop_signals = stop_signals});
    RunRequest req;
    req.code = "import time\ntime.sleep(3)\nprint('slept')\n";
    std::thread sender([] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      ::kill(::getpid(), SIGTERM);
    });
    RunResult r = ex.run(req);
    sender.join();
    return r;
  }
  bool sigterm_pending() const {
    const timespec now{0, 0};
    return ::sigtimedwait(&term, nullptr, &now) == SIGTERM;
  }
};

TEST_F(ExecutorSignals, ACommandsRunEndsOnSigterm) {
  RunResult r = run_with_sigterm(true);
  EXPECT_EQ(r.outcome.interrupted_by, SIGTERM) << r.outcome.stdout_data << r.error;
  EXPECT_EQ(r.outcome.stdout_data, "");
  EXPECT_FALSE(sigterm_pending()) << "the run's monitor took it";
}

TEST_F(ExecutorSignals, AServicesRunLeavesSigtermToTheService) {
  RunResult r = run_with_sigterm(false);
  EXPECT_EQ(r.outcome.interrupted_by, 0) << r.error;
  EXPECT_EQ(r.status, RunStatus::exited) << r.error << r.outcome.stderr_data;
  EXPECT_EQ(r.outcome.stdout_data, "slept\n");
  EXPECT_TRUE(sigterm_pending()) << "the signal meant for the service was taken by its run";
}

}  // namespace
}  // namespace sandboxrun
