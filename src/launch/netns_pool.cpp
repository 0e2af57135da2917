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

NetnsPool::NetnsPool(size_t size) : size_(size) {
  if (::geteuid() != 0 || size_ == 0) return;
  making_ = true;  // from now on: a take() may wait for the thread's first one
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
  {
    std::unique_lock lock(mu_);
    // The rest of one being made takes less than a whole one made here: wait for it, one taker
    // at a time (others make their own).
    if (ready_.empty() && making_ && waiting_ == 0) {
      ++waiting_;
      cv_.wait(lock, [this] { return !ready_.empty() || !making_; });
      --waiting_;
    }
    if (!ready_.empty()) {
      UniqueFd ns = std::move(ready_.front());
      ready_.pop_front();
      return ns;
    }
  }
  if (::geteuid() != 0) return UniqueFd();
  const UniqueFd home(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  return home ? make_namespace(home.get()) : UniqueFd();
}

void NetnsPool::replenish() { cv_.notify_all(); }

void NetnsPool::fill() {
  // Whatever ends this thread, no take() may wait for it any longer.
  struct Done {
    NetnsPool& pool;
    ~Done() {
      {
        std::lock_guard lock(pool.mu_);
        pool.making_ = false;
      }
      pool.cv_.notify_all();
    }
  } done{*this};
  const UniqueFd home(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!home) return;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (!stop_ && ready_.size() >= size_) {
        making_ = false;
        cv_.wait(lock, [this] { return stop_ || ready_.size() < size_; });
      }
      if (stop_) return;
      making_ = true;
    }
    UniqueFd ns = make_namespace(home.get());
    // A host that refuses once refuses again (no CAP_SYS_ADMIN, user.max_net_namespaces):
    // the pool stays empty and each clone makes its own, which reports the host's error.
    if (!ns) return;
    {
      std::lock_guard lock(mu_);
      ready_.push_back(std::move(ns));
    }
    cv_.notify_all();
  }
}

}  // namespace sandboxrun::launch
