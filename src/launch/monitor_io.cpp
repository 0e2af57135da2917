#include "monitor_io.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace sandboxrun::launch {

void OutputStream::pump() {
  char chunk[65536];
  const ssize_t n = ::read(fd, chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    open = false;
    return;
  }
  const auto len = static_cast<size_t>(n);
  if (sink >= 0) {
    // Past output_limit the stream is cut with one line saying so, and drained to nowhere.
    const size_t room = streamed < limit ? static_cast<size_t>(limit - streamed) : 0;
    write_all(sink, chunk, std::min(len, room));  // a closed caller stdout must not stop the drain
    streamed += std::min(len, room);
    if (len > room && !*truncated) {
      *truncated = true;
      const std::string notice = "\n[sandboxrun: output cut at output_limit (" + std::to_string(limit) + " bytes)]\n";
      write_all(sink, notice.data(), notice.size());
    }
  } else {
    const size_t room = buf->size() < limit ? static_cast<size_t>(limit - buf->size()) : 0;
    if (len > room) *truncated = true;
    buf->append(chunk, std::min(len, room));
  }
}

void StdinPump::read_some() {
  char chunk[65536];
  const ssize_t n = ::read(src, chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    src_open = false;
    finish();  // EOF passed on
    return;
  }
  chunk_buf.assign(chunk, static_cast<size_t>(n));
  pending = chunk_buf;
  done = 0;
}

void StdinPump::write_some() {
  const ssize_t n = ::write(dst->get(), pending.data() + done, pending.size() - done);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0) return finish();  // EPIPE: the program closed its stdin
  done += static_cast<size_t>(n);
  if (done == pending.size() && !src_open) finish();
}

SignalGuard::SignalGuard(bool stop_signals) {
  sigemptyset(&set_);
  if (stop_signals) {
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    fd_.reset(::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
  }
  // SIGPIPE too (not read from the signalfd): a program that closes its stdin turns our next
  // write into EPIPE, which the stdin pump handles, instead of killing the launcher.
  sigaddset(&set_, SIGPIPE);
  ::sigprocmask(SIG_BLOCK, &set_, &old_);
}

SignalGuard::~SignalGuard() {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  const timespec now{0, 0};
  while (::sigtimedwait(&pipe_only, nullptr, &now) == SIGPIPE) {}  // discard, do not deliver
  ::sigprocmask(SIG_SETMASK, &old_, nullptr);
}

int SignalGuard::take() const {
  if (!fd_) return 0;
  signalfd_siginfo si;
  if (::read(fd_.get(), &si, sizeof si) != sizeof si) return 0;
  return static_cast<int>(si.ssi_signo);
}

}  // namespace sandboxrun::launch
