// The monitor's timings when the launcher wakes late: a run so short (or a launcher so starved of
// CPU) that the payload's execve and its exit status arrive in one wake-up must still be timed
// as the exec, then the exit — never as a run that ended before it began.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>

#include "launch/monitor.hpp"

namespace sandboxrun::launch {
namespace {

UniqueFd read_end_at_eof() {
  int p[2];
  EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ::close(p[1]);
  return UniqueFd(p[0]);
}

TEST(Monitor, ExecAndExitSeenInOneWakeUpAreTimedInThatOrder) {
  for (int round = 0; round < 20; ++round) {
    // pid 1 stands in as a child that waits to be killed: with defer_teardown the monitor
    // returns once the status is in, without reaping it.
    pid_t pid1 = ::fork();
    ASSERT_GE(pid1, 0);
    if (pid1 == 0) {
      ::pause();
      ::_exit(0);
    }
    MonitorFds fds;
    fds.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid1, 0)));
    ASSERT_TRUE(fds.pidfd) << "pidfd_open: " << std::strerror(errno);
    fds.stdout_read = read_end_at_eof();
    fds.stderr_read = read_end_at_eof();
    fds.error_read = read_end_at_eof();  // EOF: the payload's execve succeeded
    int status_pipe[2];
    ASSERT_EQ(::pipe2(status_pipe, O_CLOEXEC), 0);
    int wait_status = 0;  // exited, code 0
    ASSERT_EQ(::write(status_pipe[1], &wait_status, sizeof wait_status), static_cast<ssize_t>(sizeof wait_status));
    ::close(status_pipe[1]);
    fds.status_read.reset(status_pipe[0]);

    LaunchRequest req;
    req.capture = true;
    req.spec.limits.timeout_s = 10;
    req.defer_teardown = [](std::shared_ptr<void>) {};
    RunOutcome out;
    bool reaped = monitor_sandbox(req, pid1, fds, nullptr, out, std::chrono::steady_clock::now(), SignalGuard(true));
    ::kill(pid1, SIGKILL);
    ::waitpid(pid1, nullptr, 0);

    EXPECT_FALSE(reaped);
    EXPECT_EQ(out.status, RunStatus::exited);
    EXPECT_GE(out.timings.spawn.count(), 0) << "round " << round;
    EXPECT_GE(out.timings.run.count(), 0) << "round " << round << ": the exit was timed before the exec";
  }
}

}  // namespace
}  // namespace sandboxrun::launch
