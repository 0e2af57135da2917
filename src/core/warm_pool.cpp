#include "warm_pool.hpp"

#include <utility>

namespace sandboxrun::core {

bool fits_warm(const RunRequest& req, uint64_t max_script) {
  const RunOverrides& l = req.limits;
  return req.inputs.empty() && !req.output_dir && req.stdin_fd < 0 && !req.stdin_data && req.requirements.empty() &&
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
}

void WarmPool::want(Trust trust) {
  {
    std::lock_guard lock(mu_);
    wanted_ = trust;
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

void WarmPool::loop() noexcept {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (wanted_ && (!ready_ || ready_->trust != *wanted_)); });
    if (stop_) return;
    const Trust trust = *wanted_;
    wanted_.reset();  // a failure waits for the next take instead of retrying at once
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
    if (made && !stop_) ready_ = std::move(made);
    if (stop_) {
      lock.unlock();
      made.reset();
      return;
    }
  }
}

}  // namespace sandboxrun::core
