// The launcher's side of the sandbox's byte streams and of its own termination signals: the
// pieces monitor.cpp's loop polls.
#pragma once

#include <signal.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

// The program's stdout or stderr: copied to `sink` (streaming) or kept in `buf` (capture), cut
// at `limit` bytes either way, and drained to nowhere past it.
struct OutputStream {
  int fd;
  int sink;          // streaming: where to copy; capture: -1
  std::string* buf;  // capture buffer
  bool* truncated;
  uint64_t limit;
  bool open = true;
  uint64_t streamed = 0;  // bytes copied to sink so far

  // Reads what is there; closes the stream (open = false) at EOF or error.
  void pump();
};

// The launcher's stdin (or the caller's bytes) -> the program's stdin pipe, never blocking the
// loop: one chunk at a time, read only when the previous one is written. EOF (or the program
// closing its end: EPIPE is no error) closes ours.
struct StdinPump {
  int src = -1;
  UniqueFd* dst = nullptr;
  std::string chunk_buf;
  std::string_view pending;  // chunk_buf, or the caller's bytes (LaunchRequest::stdin_data)
  size_t done = 0;
  bool src_open = false;

  bool active() const { return dst && *dst; }
  bool wants_read() const { return active() && src_open && done == pending.size(); }
  bool wants_write() const { return active() && done < pending.size(); }
  void finish() { dst->reset(); }
  void read_some();
  void write_some();
};

// SIGINT, SIGTERM and SIGHUP arrive on fd() instead of killing the launcher (the loop kills the
// sandbox instead), unless `stop_signals` is false (fd() is then -1); SIGPIPE is held and
// discarded either way. The old mask is restored on destruction.
class SignalGuard {
 public:
  explicit SignalGuard(bool stop_signals);
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  int fd() const { return fd_.get(); }
  // The signal that arrived, or 0.
  int take() const;

 private:
  sigset_t set_, old_;
  UniqueFd fd_;
};

}  // namespace sandboxrun::launch
