// One file descriptor over a unix socket (SCM_RIGHTS) with a one-byte payload: the child sends the
// proxy's listening socket (network_setup.cpp) and the payload its seccomp listener (reaper.cpp);
// the launcher receives them (monitor.cpp).
// send_fd runs in the cloned child between clone() and execve(): no allocation, no exceptions.
#pragma once

#include <sys/socket.h>

#include <cstring>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

// A msghdr for one payload byte and room for one fd; it points into itself, so it stays put.
struct FdMessage {
  explicit FdMessage(char b) noexcept : byte(b) {
    iov.iov_base = &byte;
    iov.iov_len = 1;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;

  char byte;
  iovec iov{};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
};

// Sends `fd` with the payload byte `tag`; true when sent, else false with errno set.
inline bool send_fd(int sock, int fd, char tag) noexcept {
  FdMessage m(tag);
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return ::sendmsg(sock, &m.msg, MSG_NOSIGNAL) == 1;
}

// Receives one fd (close-on-exec) and, when `tag` is given, its payload byte; empty at EOF, on
// error, or when the message carries none.
inline UniqueFd receive_fd(int sock, char* tag = nullptr) noexcept {
  FdMessage m(0);
  if (::recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC) <= 0) return UniqueFd();
  if (tag) *tag = m.byte;
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return UniqueFd();
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return UniqueFd(fd);
}

}  // namespace sandboxrun::launch
