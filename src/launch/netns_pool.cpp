// The pool's thread: unshare(CLONE_NEWNET) makes a namespace for this thread alone (namespaces
// are per thread), an fd of it is kept, and the thread goes back to where it was.
#include "netns_pool.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include "child_plan.hpp"

namespace sandboxrun::launch {

namespace {

// One fresh namespace with lo up, or an empty fd when this host does not let us make one.
UniqueFd make_namespace(int home) {
  if (::unshare(CLONE_NEWNET) != 0) return UniqueFd();
  UniqueFd ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  const bool lo_up = ns && bring_up_loopback() == 0;
  // Back home: the thread must not keep a namespace it hands out alive, nor stay in one.
  if (::setns(home, CLONE_NEWNET) != 0 || !lo_up) return UniqueFd();
  return ns;
}

}  // namespace

NetnsPool::NetnsPool(size_t size, size_t budget) : size_(size), budget_(budget) {
  if (::geteuid() != 0 || size_ == 0 || budget_ == 0) return;
  thread_ = std::thread([this] { fill(); });
}

NetnsPool::~NetnsPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

UniqueFd NetnsPool::take() {
  UniqueFd ns;
  {
    std::lock_guard lock(mu_);
    if (ready_.empty()) return ns;
    ns = std::move(ready_.front());
    ready_.pop_front();
  }
  return ns;
}

void NetnsPool::replenish() { cv_.notify_all(); }

void NetnsPool::fill() {
  const UniqueFd home(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!home) return;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || ready_.size() < size_; });
      if (stop_) return;
      if (budget_ != kUnlimited) --budget_;
    }
    UniqueFd ns = make_namespace(home.get());
    // A host that refuses once refuses again (no CAP_SYS_ADMIN, user.max_net_namespaces):
    // the pool stays empty and each clone makes its own, which reports the host's error.
    if (!ns) return;
    std::lock_guard lock(mu_);
    ready_.push_back(std::move(ns));
    if (budget_ == 0) return;
  }
}

}  // namespace sandboxrun::launch
