// One proxied connection, on its own thread: request head, policy, resolve, connect, SNI, relay.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "common/printable.hpp"
#include "net/net_parse.hpp"
#include "net/proxy_internal.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::net::proxy {

namespace {

// One proxied connection, run start to end on its own thread.
class Connection {
 public:
  Connection(Shared& proxy, UniqueFd client) : p_(proxy), client_(std::move(client)) {}

  void run() noexcept {
    try {
      serve();
    } catch (const std::exception& e) {
      end(std::string("internal error: ") + e.what());
    }
    try {
      record();
    } catch (const std::bad_alloc&) {
      // Out of memory: the connection goes unrecorded rather than taking the launcher down.
    }
  }

 private:
  enum class Io { ok, eof, timeout, stopped, error };

  void record() {
    if (recorded_) return;
    recorded_ = true;
    rec_.host = printable(rec_.host, kMaxRecordHost);
    rec_.reason = printable(rec_.reason, kMaxRecordReason);
    p_.finish(rec_);
  }

  // Denied before anything was forwarded. Recorded before the answer, so that a client that
  // got its 403 can rely on the denial being in records().
  void deny(int status, const std::string& reason) {
    rec_.verdict = Verdict::denied;
    rec_.reason = reason;
    record();
    if (status != 0) reply(status, rec_.reason);
  }
  void end(const std::string& reason) {
    if (rec_.reason.empty()) rec_.reason = reason;
  }

  Io wait(int fd, short events, Clock::time_point deadline) {
    while (true) {
      pollfd fds[2] = {{fd, events, 0}, {p_.stop_fd.get(), POLLIN, 0}};
      const int r = poll(fds, 2, millis_until(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Io::error;
      if (fds[1].revents) return Io::stopped;
      if (fds[0].revents) return Io::ok;
      if (Clock::now() >= deadline) return Io::timeout;
    }
  }

  // Appends up to `max` bytes to `buf`.
  Io read_some(int fd, std::string& buf, size_t max, Clock::time_point deadline) {
    while (true) {
      const size_t old = buf.size();
      buf.resize(old + max);
      const ssize_t n = recv(fd, buf.data() + old, max, 0);
      buf.resize(old + std::max<ssize_t>(n, 0));
      if (n > 0) return Io::ok;
      if (n == 0) return Io::eof;
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return Io::error;
      if (auto w = wait(fd, POLLIN, deadline); w != Io::ok) return w;
    }
  }

  Io write_all(int fd, std::string_view data, Clock::time_point deadline) {
    while (!data.empty()) {
      const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) return Io::error;
      if (auto w = wait(fd, POLLOUT, deadline); w != Io::ok) return w;
    }
    return Io::ok;
  }

  // Best effort: send the answer, then read what the client already sent for a moment so that
  // closing does not reset the connection before the client reads the answer.
  void reply(int status, const std::string& reason) {
    if (write_all(client_.get(), error_response(status, reason), Clock::now() + kReplyTimeout) != Io::ok) return;
    shutdown(client_.get(), SHUT_WR);
    const auto deadline = Clock::now() + kDrainTimeout;
    std::string sink;
    while (sink.size() < kDrainBytes && read_some(client_.get(), sink, 4096, deadline) == Io::ok) {
    }
  }

  Clock::time_point idle_deadline() const { return Clock::now() + p_.config.idle; }

  void serve() {
    // 1. The request head.
    std::string buf;
    const auto head_deadline = idle_deadline();
    HeadParse parsed;
    while ((parsed = parse_request_head(buf)).status == ParseStatus::incomplete) {
      switch (read_some(client_.get(), buf, kMaxRequestHead - buf.size(), head_deadline)) {
        case Io::ok: continue;
        case Io::eof: return deny(0, "client closed before sending a request");
        case Io::timeout: return deny(408, "timeout reading the request head");
        case Io::stopped: return deny(0, "proxy stopped");
        case Io::error: return deny(0, std::string("reading the request: ") + std::strerror(errno));
      }
    }
    if (parsed.status == ParseStatus::too_large) return deny(431, parsed.error);
    if (parsed.status == ParseStatus::invalid) return deny(400, "malformed request: " + parsed.error);
    auto check = interpret_request(parsed.head);
    rec_.host = check.host;
    rec_.port = check.port;
    if (!check.request) return deny(check.status, check.error);
    const ProxyRequest& req = *check.request;

    // 2. Policy on the name, then on every address it resolves to.
    if (!p_.config.allowlist.allows(req.host)) return deny(403, "host '" + req.host.text + "' is not in the network allowlist");
    if (p_.budget_used.load() >= p_.config.max_bytes) return deny(403, "byte limit reached for this run");
    std::vector<IpAddress> addresses;
    bool explicit_address = true;  // listed literals and extra_hosts entries are allowed by definition
    if (req.host.ip) {
      addresses.push_back(*req.host.ip);
    } else if (auto it = p_.config.extra_hosts.find(req.host.text); it != p_.config.extra_hosts.end()) {
      addresses.push_back(it->second);
    } else {
      explicit_address = false;
      auto job = start_resolve(req.host.text);
      switch (wait(job->done.get(), POLLIN, idle_deadline())) {
        case Io::ok: break;
        case Io::stopped: return deny(0, "proxy stopped");
        default: return deny(502, "timeout resolving '" + req.host.text + "'");
      }
      std::lock_guard lock(job->mu);
      if (job->rc != 0 || job->addresses.empty())
        return deny(502, "cannot resolve '" + req.host.text + "': " + (job->rc ? gai_strerror(job->rc) : "no address"));
      addresses = job->addresses;
    }
    if (!explicit_address) {
      for (const auto& a : addresses)
        if (auto why = p_.config.policy.deny_reason(a)) return deny(403, "'" + req.host.text + "': " + *why);
    }

    // 3. The upstream connection. From here on the policy allowed it.
    rec_.verdict = Verdict::allowed;
    std::string connect_error;
    const auto connect_deadline = idle_deadline();  // for all addresses together
    for (const auto& a : addresses) {
      auto r = connect_to(a, req.port, connect_deadline);
      if (r.stopped) return end("proxy stopped");
      if (r.fd) {
        upstream_ = std::move(r.fd);
        rec_.address = a.to_string();
        break;
      }
      connect_error = std::move(r.error);
    }
    if (!upstream_) {
      rec_.reason = connect_error;
      record();
      reply(502, rec_.reason);
      return;
    }
    const int one = 1;
    setsockopt(client_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(upstream_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    std::string pending = buf.substr(parsed.head.size);
    uint64_t upload_left = UINT64_MAX;
    if (req.kind == ProxyRequest::Kind::connect) {
      if (write_all(client_.get(), "HTTP/1.1 200 Connection established\r\n\r\n", idle_deadline()) != Io::ok)
        return end("client gone before the tunnel started");
      if (!check_sni(req, pending)) return;
    } else {
      const auto body = std::min<uint64_t>(pending.size(), req.content_length);
      upload_left = req.content_length - body;
      pending = upstream_head(parsed.head, req) + pending.substr(0, body);
    }
    // 4. What was read ahead (ClientHello, or head and body start), then the relay.
    if (const auto grant = p_.reserve(pending.size()); grant < pending.size()) {
      p_.give_back(grant);
      return end("byte limit reached");
    }
    if (write_all(upstream_.get(), pending, idle_deadline()) != Io::ok) return end("destination closed early");
    count(rec_.bytes_up, p_.bytes_up, pending.size());
    relay(upload_left, req.kind == ProxyRequest::Kind::connect);
  }

  struct Connected {
    UniqueFd fd;
    std::string error;
    bool stopped = false;
  };

  Connected connect_to(const IpAddress& a, uint16_t port, Clock::time_point deadline) {
    const std::string where = "connect to " + (a.v6 ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(port);
    auto failed = [&](int err) { return Connected{{}, where + " failed: " + std::strerror(err)}; };
    UniqueFd fd(socket(a.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return failed(errno);
    sockaddr_storage ss;
    const socklen_t len = a.to_sockaddr(port, ss);
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
      if (errno != EINPROGRESS) return failed(errno);
      switch (wait(fd.get(), POLLOUT, deadline)) {
        case Io::ok: break;
        case Io::stopped: return {{}, {}, true};
        case Io::timeout: return {{}, where + " timed out"};
        default: return failed(errno);
      }
      int err = 0;
      socklen_t elen = sizeof err;
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
      if (err != 0) return failed(err);
    }
    return {std::move(fd), {}};
  }

  // Reads the ClientHello that opens the tunnel; true when its SNI names the CONNECT host.
  bool check_sni(const ProxyRequest& req, std::string& pending) {
    const auto deadline = idle_deadline();
    const size_t cap = kMaxClientHello + 1024;  // the hello plus its record headers
    auto refuse = [&](const std::string& reason) {
      rec_.verdict = Verdict::denied;
      rec_.reason = reason;
      return false;
    };
    while (true) {
      const auto sni = parse_client_hello_sni(pending);
      switch (sni.status) {
        case SniStatus::found: {
          const auto name = normalize_host(sni.server_name);
          if (!name.host || name.host->text != req.host.text)
            return refuse("SNI '" + sni.server_name.substr(0, 80) + "' does not match CONNECT host '" + req.host.text +
                          "' (domain fronting)");
          return true;
        }
        case SniStatus::absent:
          // TLS clients send no SNI for an address; a listed literal needs none.
          if (req.host.kind == Host::Kind::ip) return true;
          return refuse("TLS ClientHello without SNI for '" + req.host.text + "'");
        case SniStatus::not_tls: return refuse("CONNECT tunnel did not start with a TLS ClientHello");
        case SniStatus::malformed:
        case SniStatus::ech: return refuse(sni.error);
        case SniStatus::incomplete: break;
      }
      if (pending.size() >= cap) return refuse("ClientHello larger than " + std::to_string(cap) + " bytes");
      switch (read_some(client_.get(), pending, cap - pending.size(), deadline)) {
        case Io::ok: continue;
        case Io::timeout: return refuse("timeout waiting for the TLS ClientHello");
        case Io::stopped: return refuse("proxy stopped");
        default: return refuse("client closed before the TLS ClientHello");
      }
    }
  }

  void count(uint64_t& mine, std::atomic<uint64_t>& total, uint64_t n) {
    mine += n;
    total += n;
  }

  // One direction of the relay: socket -> pipe -> socket with splice(2), so the payload is
  // moved between the two sockets' buffers without being copied through user space.
  struct Pump {
    int from;
    int to;
    Pipe pipe;
    size_t capacity = 0;
    size_t len = 0;             // bytes in the pipe
    bool eof = false;           // nothing more will be read from `from`
    uint64_t allowance;         // bytes `from` may still send
    bool propagate_eof = true;  // half-close `to` once `from` ended and all is written
  };

  static Pump make_pump(int from, int to, uint64_t allowance) {
    Pump pump{from, to, make_pipe(O_NONBLOCK), 0, 0, false, allowance};
    // A larger pipe means fewer wake-ups per megabyte; keep the default when not permitted.
    int size = fcntl(pump.pipe.write.get(), F_SETPIPE_SZ, kPipeSize);
    if (size < 0) size = fcntl(pump.pipe.write.get(), F_GETPIPE_SZ);
    if (size <= 0) throw_errno("egress proxy: pipe size");
    pump.capacity = static_cast<size_t>(size);
    return pump;
  }

  // Moves bytes both ways until done, idle, over budget, or stopped. For plain HTTP
  // (!tunnel) the upload ends after the request body and the connection after the response.
  void relay(uint64_t upload_left, bool tunnel) {
    Pump up = make_pump(client_.get(), upstream_.get(), upload_left);
    Pump down = make_pump(upstream_.get(), client_.get(), UINT64_MAX);
    while (true) {
      for (Pump* pump : {&up, &down}) {
        if (!pump->eof && pump->allowance == 0) {
          pump->eof = true;
          pump->propagate_eof = false;  // the request body is complete; keep the socket open
        }
        if (pump->eof && pump->len == 0 && pump->propagate_eof) {
          shutdown(pump->to, SHUT_WR);
          pump->propagate_eof = false;
        }
      }
      const bool down_done = down.eof && down.len == 0;
      const bool up_done = up.eof && up.len == 0;
      if (down_done && (up_done || !tunnel)) return;

      const short client_events = static_cast<short>((wants_read(up) ? POLLIN : 0) | (down.len ? POLLOUT : 0));
      const short upstream_events = static_cast<short>((wants_read(down) ? POLLIN : 0) | (up.len ? POLLOUT : 0));
      pollfd fds[3] = {{client_events ? client_.get() : -1, client_events, 0},
                       {upstream_events ? upstream_.get() : -1, upstream_events, 0},
                       {p_.stop_fd.get(), POLLIN, 0}};
      const int r = poll(fds, 3, static_cast<int>(p_.config.idle.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return end(std::string("poll: ") + std::strerror(errno));
      if (r == 0) return end("idle timeout");
      if (fds[2].revents) return end("proxy stopped");
      constexpr short kReady = POLLIN | POLLOUT | POLLHUP | POLLERR;
      for (Pump* pump : {&up, &down}) {
        const bool ready = ((pump == &up ? fds[0] : fds[1]).revents | (pump == &up ? fds[1] : fds[0]).revents) & kReady;
        if (!ready) continue;
        switch (move(*pump, pump == &up ? rec_.bytes_up : rec_.bytes_down, pump == &up ? p_.bytes_up : p_.bytes_down)) {
          case Moved::ok: break;
          case Moved::closed: return;  // a reset or a peer gone: nothing more to do
          case Moved::limit: return end("byte limit reached");
        }
      }
    }
  }

  static bool wants_read(const Pump& pump) { return !pump.eof && pump.len < pump.capacity; }

  enum class Moved { ok, closed, limit };

  // Moves what can move without blocking, a bounded number of rounds so that stop() and the
  // other direction are seen between bursts.
  Moved move(Pump& pump, uint64_t& mine, std::atomic<uint64_t>& total) {
    constexpr unsigned kSplice = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
    constexpr int kRounds = 16;
    for (int round = 0; round < kRounds; ++round) {
      bool progressed = false;
      if (wants_read(pump) && pump.allowance > 0) {
        const uint64_t grant = p_.reserve(std::min<uint64_t>(pump.capacity - pump.len, pump.allowance));
        if (grant == 0) return Moved::limit;
        const ssize_t n = splice(pump.from, nullptr, pump.pipe.write.get(), nullptr, grant, kSplice);
        p_.give_back(grant - static_cast<uint64_t>(std::max<ssize_t>(n, 0)));
        if (n < 0 && errno != EAGAIN && errno != EINTR) return Moved::closed;
        if (n == 0) pump.eof = true;
        if (n > 0) {
          pump.len += static_cast<size_t>(n);
          pump.allowance -= static_cast<uint64_t>(n);
          progressed = true;
        }
      }
      if (pump.len > 0) {
        // EPIPE here raises SIGPIPE, which the proxy's threads block (see accept_loop).
        const ssize_t n = splice(pump.pipe.read.get(), nullptr, pump.to, nullptr, pump.len, kSplice);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return Moved::closed;
        if (n > 0) {
          pump.len -= static_cast<size_t>(n);
          count(mine, total, static_cast<uint64_t>(n));
          progressed = true;
        }
      }
      if (!progressed) break;
    }
    return Moved::ok;
  }

  Shared& p_;
  UniqueFd client_;
  UniqueFd upstream_;
  ConnectionRecord rec_;
  bool recorded_ = false;
};

}  // namespace

void serve_connection(Shared& shared, UniqueFd client) noexcept { Connection(shared, std::move(client)).run(); }

}  // namespace sandboxrun::net::proxy
