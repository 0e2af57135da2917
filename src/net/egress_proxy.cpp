// Thread per connection: the accept thread admits at most max_connections at a time and each
// connection runs its steps (request head, policy, resolve, connect, SNI, relay) as blocking
// code over non-blocking sockets, where every wait is a poll() that also watches the stop
// eventfd and a deadline. That keeps each step readable in order, stop() prompt, and the
// relay loop simple enough to audit.
#include "net/egress_proxy.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <list>
#include <system_error>
#include <thread>

#include "net/proxy_internal.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::net {

using namespace proxy;

const char* to_string(Verdict v) { return v == Verdict::allowed ? "allowed" : "denied"; }

void validate_network_settings(const NetworkSettings& settings) { (void)validate(settings); }

struct EgressProxy::Impl {
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  Impl(UniqueFd fd, Config c) : listen_fd(std::move(fd)), shared(std::move(c)) {}

  UniqueFd listen_fd;
  Shared shared;
  bool started = false;
  bool stopped = false;
  std::thread acceptor;
  std::list<Worker> workers;  // only the accept thread touches this

  void accept_loop() noexcept;
  void admit(UniqueFd client);
  void reap(bool all);
};

void EgressProxy::Impl::reap(bool all) {
  for (auto it = workers.begin(); it != workers.end();) {
    if (all || it->done.load()) {
      it->thread.join();
      it = workers.erase(it);
    } else {
      ++it;
    }
  }
}

void EgressProxy::Impl::admit(UniqueFd client) {
  auto refuse = [&](int status, const std::string& reason) {
    ConnectionRecord rec;
    rec.reason = reason;
    shared.finish(std::move(rec));
    const auto answer = error_response(status, reason);
    [[maybe_unused]] auto n = send(client.get(), answer.data(), answer.size(), MSG_NOSIGNAL);
  };
  if (shared.active.load() >= shared.config.max_connections)
    return refuse(503, "connection limit (" + std::to_string(shared.config.max_connections) + ") reached");
  auto& w = workers.emplace_back();
  ++shared.active;
  try {
    w.thread = std::thread([this, &w, fd = client.get()] {
      serve_connection(shared, UniqueFd(fd));
      --shared.active;
      w.done = true;
    });
    client.release();  // the connection thread owns it now
  } catch (const std::system_error& e) {
    --shared.active;
    workers.pop_back();
    refuse(503, std::string("cannot start a connection thread: ") + e.what());
  }
}

void EgressProxy::Impl::accept_loop() noexcept {
  // splice(2) has no MSG_NOSIGNAL: a peer that went away must not kill the launcher with
  // SIGPIPE. Blocked here, the signal stays pending in the thread that caused it and is
  // discarded when that thread ends; connection threads inherit this mask.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  while (true) {
    pollfd fds[2] = {{listen_fd.get(), POLLIN, 0}, {shared.stop_fd.get(), POLLIN, 0}};
    const int r = poll(fds, 2, 1000);  // wakes now and then to join finished connections
    if (fds[1].revents || (r < 0 && errno != EINTR)) break;
    reap(false);
    if (r <= 0) continue;
    if (fds[0].revents & (POLLERR | POLLNVAL)) break;  // the listening socket is gone
    UniqueFd client(accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        pollfd s{shared.stop_fd.get(), POLLIN, 0};
        poll(&s, 1, 100);  // out of resources: back off instead of spinning
      }
      continue;
    }
    try {
      admit(std::move(client));
    } catch (const std::exception&) {
      // Out of memory while refusing: the client fd is closed; keep serving the others.
    }
  }
  reap(true);
}

EgressProxy::EgressProxy(UniqueFd listen_fd, const NetworkSettings& settings) {
  auto config = validate(settings);
  check_listening(listen_fd.get());
  impl_ = std::make_unique<Impl>(std::move(listen_fd), std::move(config));
}

EgressProxy::~EgressProxy() { stop(); }

void EgressProxy::start() {
  if (impl_->started) throw Error("egress proxy: already started", "start() runs once per proxy");
  impl_->shared.stop_fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->shared.stop_fd) throw_errno("egress proxy: eventfd");
  try {
    impl_->acceptor = std::thread([impl = impl_.get()] { impl->accept_loop(); });
  } catch (const std::system_error& e) {
    throw Error(std::string("egress proxy: cannot start the accept thread: ") + e.what(), "check the process and thread limits");
  }
  impl_->started = true;
}

void EgressProxy::stop() noexcept {
  if (!impl_ || !impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  const uint64_t one = 1;
  [[maybe_unused]] auto n = write(impl_->shared.stop_fd.get(), &one, sizeof one);
  impl_->acceptor.join();
  impl_->listen_fd.reset();
}

std::vector<ConnectionRecord> EgressProxy::records() const {
  std::lock_guard lock(impl_->shared.records_mu);
  return impl_->shared.records;
}

NetworkReport EgressProxy::report() const {
  const ProxyCounters c = counters();
  NetworkReport n{c.allowed, c.denied, c.bytes_up, c.bytes_down, c.records_dropped, {}};
  for (const auto& r : records())
    n.connections.push_back({r.host, r.port, r.address, to_string(r.verdict), r.reason, r.bytes_up, r.bytes_down});
  return n;
}

ProxyCounters EgressProxy::counters() const {
  ProxyCounters c;
  {
    const auto& s = impl_->shared;
    std::lock_guard lock(s.records_mu);
    c.allowed = s.allowed;
    c.denied = s.denied;
    c.records_dropped = s.records_dropped;
  }
  c.bytes_up = impl_->shared.bytes_up.load();
  c.bytes_down = impl_->shared.bytes_down.load();
  c.active = impl_->shared.active.load();
  return c;
}

}  // namespace sandboxrun::net
