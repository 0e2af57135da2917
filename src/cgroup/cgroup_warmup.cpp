// MigrationWarmup (see cgroup.hpp): keeps the kernel's cgroup migration lock out of its
// idle state while the launcher prepares a run, so that the run's v1 placement is fast.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "cgroup_impl.hpp"
#include "sandboxrun/cgroup.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun {

using namespace cgroup_detail;

namespace {

// Re-arm well inside one grace period; stop on our own after the cap (a long assessment,
// e.g. with Bandit) so an idle launcher never keeps the lock in its slow mode for long.
constexpr auto kRearmEvery = std::chrono::milliseconds(4);
constexpr auto kCap = std::chrono::seconds(2);

// cgroup.procs of the launcher's own cgroup in a v1 hierarchy we would move the run into.
UniqueFd open_own_v1_procs() {
  try {
    HostMounts mounts = parse_mountinfo(read_file("/proc/self/mountinfo"));
    std::string self = read_file("/proc/self/cgroup");
    for (const char* controller : {"pids", "memory", "cpu"}) {
      auto mount = mounts.v1.find(controller);
      if (mount == mounts.v1.end()) continue;
      auto own = own_cgroup(self, controller);
      auto dir = own ? dir_of(mount->second, *own) : std::nullopt;
      if (!dir) continue;
      UniqueFd fd(::open((*dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
      if (fd) return fd;
    }
  } catch (const Error&) {
  }
  return UniqueFd();
}

}  // namespace

struct MigrationWarmup::State {
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::atomic<unsigned> writes{0};
};

MigrationWarmup::MigrationWarmup() : state_(std::make_unique<State>()) {
  thread_ = std::thread([state = state_.get()] {
    UniqueFd procs = open_own_v1_procs();
    if (!procs) return;
    const std::string pid = std::to_string(::getpid());
    const auto deadline = std::chrono::steady_clock::now() + kCap;
    std::unique_lock lock(state->mutex);
    while (!state->stopping && std::chrono::steady_clock::now() < deadline) {
      lock.unlock();
      // Moving ourselves to where we already are: the kernel takes the lock, changes nothing.
      if (::write(procs.get(), pid.data(), pid.size()) != static_cast<ssize_t>(pid.size())) return;
      state->writes.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      state->wake.wait_for(lock, kRearmEvery, [state] { return state->stopping; });
    }
  });
}

MigrationWarmup::~MigrationWarmup() { stop(); }

void MigrationWarmup::stop() noexcept {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
}

unsigned MigrationWarmup::writes() const noexcept { return state_->writes.load(std::memory_order_relaxed); }

}  // namespace sandboxrun
