#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

// Network namespaces made ahead of the runs that use them, for a long-lived launcher (the
// Executor). Creating one is the costliest part of the sandbox's clone (~0.5 ms: loopback device,
// sysctl tables); a thread makes them while the runs go on, and a run's clone enters one instead
// (clone_sandbox's netns_fd). Each is fresh (only `lo`, up), handed out once, and owned by the
// initial user namespace, so that the sandbox's root has no capability over it, where a namespace
// made in the clone belongs to the sandbox's own user namespace. Root only: without
// CAP_SYS_ADMIN on the host the pool stays empty and every clone makes its own.
// Size 0: no thread and nothing made ahead, each take() makes its namespace. For a one-run
// caller (the CLI): a spare made and never used costs as much again to tear down, and a thread
// of the pool's gains nothing on a host that packs threads onto one CPU (a new thread that goes
// straight into unshare() holds up its creator ~0.5 ms there).
class NetnsPool {
 public:
  explicit NetnsPool(size_t size = 2);
  ~NetnsPool();
  NetnsPool(const NetnsPool&) = delete;
  NetnsPool& operator=(const NetnsPool&) = delete;

  // A namespace (an fd of it, to setns): a ready one; when none is ready but one is being made,
  // that one for the first caller; else one made on the caller's thread. An empty fd when this
  // host does not let us make them: the caller then has the clone make one.
  UniqueFd take();
  // Makes up for the namespaces taken, in the background. Called when a run is over rather than
  // at take(): making one while a sandbox sets itself up would compete with it for the CPUs.
  void replenish();

 private:
  void fill();

  const size_t size_;
  bool making_ = false;  // the thread is making one; guarded by mu_
  size_t waiting_ = 0;   // take() calls waiting for it; guarded by mu_
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<UniqueFd> ready_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sandboxrun::launch
