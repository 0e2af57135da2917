// Sandboxes set up ahead of their runs for a long-lived Executor (ExecutorOptions::warm): a run
// that fits takes the one prepared for its trust level and only sends its release; meanwhile the
// next is prepared. The sandboxes are made on the pool's own thread, which lives as long as the
// pool: pid 1 dies with the thread that cloned it (PR_SET_PDEATHSIG). The same thread finishes
// the teardown of the Executor's runs after their results are returned.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sandboxrun/executor.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/launch.hpp"
#include "sandboxrun/spec.hpp"

namespace sandboxrun::core {

struct WarmSandbox {
  Trust trust = Trust::untrusted;
  LaunchRequest base;        // what it was prepared from: spec, seccomp, run id, id slot, netns
  std::string image_digest;  // of the image it mounted
  UniqueFd netns;            // its network namespace, open until the run ends
  std::unique_ptr<PreparedSandbox> sandbox;
};

// A request a sandbox set up ahead can run: the default image, the trust level's own limits, no
// inputs, stdin, requirements or run id of its own, a script of at most max_script. Outputs fit:
// every sandbox set up ahead passes /work back (the MCP server asks for outputs on every run).
bool fits_warm(const RunRequest& req, uint64_t max_script);

class WarmPool {
 public:
  // `make` prepares a sandbox for a trust level, on the pool's thread; it throws Error when it
  // cannot (or when the level's runs cannot use one), and the pool then waits for the next take.
  using Maker = std::function<WarmSandbox(Trust)>;
  explicit WarmPool(Maker make);
  ~WarmPool();  // stops the thread; an unused sandbox is discarded (pid 1 killed, cgroup removed)
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // Asks for a sandbox for `trust` (replacing one prepared for another level).
  void want(Trust trust);
  // The sandbox prepared for `trust` when one is ready, else none: the run goes the usual way.
  // Either way the caller asks for the next (want) once its payload runs.
  std::optional<WarmSandbox> take(Trust trust);
  // Waits until the sandbox for `trust` is ready (true), none is wanted or being made for it,
  // or `timeout` passes (false).
  bool wait_ready(Trust trust, std::chrono::milliseconds timeout);
  // What is left of a finished run (LaunchRequest::defer_teardown), dropped on the pool's thread
  // after its next preparation, or kRemainsDelay after it came: reaping its pid 1 and removing
  // its cgroup then delay no run's start. Past kMaxRemains waiting, the caller drops them itself.
  void dispose(std::shared_ptr<void> remains);
  static constexpr size_t kMaxRemains = 16;
  static constexpr std::chrono::milliseconds kRemainsDelay{20};

 private:
  void loop() noexcept;

  Maker make_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<WarmSandbox> ready_;
  std::optional<Trust> wanted_;
  std::optional<Trust> making_;  // the level being prepared now, outside the lock
  std::vector<std::shared_ptr<void>> remains_;
  std::chrono::steady_clock::time_point remains_due_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest exists, joined first
};

}  // namespace sandboxrun::core
