#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "child_plan.hpp"
#include "monitor_io.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/launch.hpp"

namespace sandboxrun::launch {

// The launcher's ends of everything the sandbox talks through.
struct MonitorFds {
  UniqueFd pidfd;         // pid 1 of the sandbox
  UniqueFd stdout_read, stderr_read;
  UniqueFd status_read;   // payload wait status from pid 1
  UniqueFd error_read;    // ChildError from setup
  UniqueFd control_read;  // fds passed by the sandbox (proxy listening socket, /work)
  UniqueFd stdin_write;   // the program's stdin (non-blocking), fed from req.stdin_fd
  UniqueFd notify_read;   // the payload's seccomp listener, once it has loaded the filter
};

// Runs until the sandbox ends: streams or captures output, samples the cgroup, enforces the
// timeout, turns SIGINT/SIGTERM/SIGHUP (held by `signals`, which the caller sets up before the
// payload may start) into a kill of the whole sandbox. Fills `out`.
// Returns true once pid 1 has been reaped; with req.defer_teardown, false as soon as the
// payload's status and output are in (pid 1 is then on its way out, not yet reaped).
bool monitor_sandbox(const LaunchRequest& req, pid_t pid1, MonitorFds& fds, Cgroup* cgroup, RunOutcome& out,
                     std::chrono::steady_clock::time_point started, const SignalGuard& signals);

}  // namespace sandboxrun::launch
