#include "warm_pool.hpp"

#include <utility>

namespace sandboxrun::core {

bool fits_warm(const RunRequest& req, uint64_t max_script) {
  const RunOverrides& l = req.limits;
  return req.inputs.empty() && req.stdin_fd < 0 && !req.stdin_data && req.requirements.empty() &&
         !req.image && !req.run_id && !l.timeout_s && !l.memory_bytes && !l.cpus && !l.pids && req.code.size() <= max_script;
}

WarmPool::WarmPool(Maker make) : make_(std::move(make)), thread_([this] { loop(); }) {}

WarmPool::~WarmPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ready_.reset();  // before the thread's exit would have killed its pid 1 anyway: say it here
  remains_.clear();
}

void WarmPool::want(Trust trust) {
  {
    std::lock_guard lock(mu_);
    wanted_ = trust;
  }
  cv_.notify_all();
}

void WarmPool::dispose(std::shared_ptr<void> remains) {
  {
    std::lock_guard lock(mu_);
    if (remains_.size() >= kMaxRemains) return;  // dropped here, by the caller, on return
    if (remains_.empty()) remains_due_ = std::chrono::steady_clock::now() + kRemainsDelay;
    remains_.push_back(std::exchange(remains, nullptr));
  }
  cv_.notify_all();
}

std::optional<WarmSandbox> WarmPool::take(Trust trust) {
  std::optional<WarmSandbox> out;
  {
    std::lock_guard lock(mu_);
    if (ready_ && ready_->trust == trust) out = std::exchange(ready_, std::nullopt);
  }
  return out;
}

bool WarmPool::wait_ready(Trust trust, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return ready_ && ready_->trust == trust; };
  cv_.wait_for(lock, timeout, [&] { return stop_ || ready() || (wanted_ != trust && making_ != trust); });
  return ready();
}

void WarmPool::loop() noexcept {
  std::unique_lock lock(mu_);
  for (;;) {
    auto work = [&] { return stop_ || (wanted_ && (!ready_ || ready_->trust != *wanted_)); };
    if (remains_.empty()) cv_.wait(lock, [&] { return work() || !remains_.empty(); });
    else cv_.wait_until(lock, remains_due_, work);
    if (stop_) return;  // remains_ left are dropped by the destructor
    bool prepared = false;
    if (work()) {
      const Trust trust = *wanted_;
      wanted_.reset();  // a failure waits for the next take instead of retrying at once
      making_ = trust;
      std::optional<WarmSandbox> old = std::exchange(ready_, std::nullopt);
      lock.unlock();
      old.reset();  // another level's: discarded outside the lock
      std::optional<WarmSandbox> made;
      try {
        made.emplace(make_(trust));
      } catch (...) {
        // Nothing prepared: runs go the usual way (which reports whatever is wrong).
      }
      lock.lock();
      making_.reset();
      if (stop_) {
        lock.unlock();
        made.reset();
        return;
      }
      if (made) ready_ = std::move(made);
      prepared = true;
      cv_.notify_all();  // wait_ready
    }
    // Finished runs' remains go right after a preparation: a run asks for one once its payload
    // runs, and then nothing else contends with that run's start. A service between runs drops
    // them after kRemainsDelay.
    if (!remains_.empty() && (prepared || std::chrono::steady_clock::now() >= remains_due_)) {
      std::vector<std::shared_ptr<void>> done = std::exchange(remains_, {});
      lock.unlock();
      done.clear();  // waits for each pid 1, removes each cgroup
      lock.lock();
    }
  }
}

}  // namespace sandboxrun::core
