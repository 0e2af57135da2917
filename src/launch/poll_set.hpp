// One turn of a poll loop as data: each fd with the events it waits for and what to do when it is
// ready, in the order they were added (the order the handlers then run in).
#pragma once

#include <poll.h>

#include <cerrno>
#include <functional>
#include <vector>

namespace sandboxrun::launch {

class PollSet {
 public:
  using Handler = std::function<void(short revents)>;

  void clear() {
    fds_.clear();
    handlers_.clear();
  }
  void add(int fd, short events, Handler handler) {
    fds_.push_back({fd, events, 0});
    handlers_.push_back(std::move(handler));
  }
  // Waits up to timeout_ms for any fd, then runs the handler of each ready one (revents != 0:
  // POLLHUP, POLLERR and POLLNVAL too, so that a handler sees its fd's end). False when poll
  // failed for another reason than a signal.
  bool dispatch(int timeout_ms) {
    const int r = ::poll(fds_.data(), static_cast<nfds_t>(fds_.size()), timeout_ms);
    if (r < 0) return errno == EINTR;
    for (size_t i = 0; r > 0 && i < fds_.size(); ++i)
      if (fds_[i].revents) handlers_[i](fds_[i].revents);
    return true;
  }

 private:
  std::vector<pollfd> fds_;
  std::vector<Handler> handlers_;
};

}  // namespace sandboxrun::launch
