// Thread per connection: the accept thread admits at most max_connections at a time and each
// connection runs its steps (request head, policy, resolve, connect, SNI, relay) as blocking
// code over non-blocking sockets, where every wait is a poll() that also watches the stop
// eventfd and a deadline. That keeps each step readable in order, stop() prompt, and the
// relay loop simple enough to audit.
#include "net/egress_proxy.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "common/printable.hpp"
#include "sandboxrun/error.hpp"
#include "net/net_parse.hpp"
#include "net/net_policy.hpp"

namespace sandboxrun::net {

const char* to_string(Verdict v) { return v == Verdict::allowed ? "allowed" : "denied"; }

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPipeSize = 256 << 10;  // per direction
constexpr size_t kMaxConnectionsCap = 1024;  // one thread each
constexpr auto kReplyTimeout = std::chrono::seconds(2);
constexpr auto kDrainTimeout = std::chrono::milliseconds(200);
constexpr size_t kDrainBytes = 64 * 1024;
constexpr size_t kMaxRecordHost = 256;
constexpr size_t kMaxRecordReason = 512;

struct Config {
  Allowlist allowlist;
  AddressPolicy policy;
  std::map<std::string, IpAddress> extra_hosts;  // normalised name -> address
  uint32_t max_connections;
  uint64_t max_bytes;
  std::chrono::milliseconds idle;
};

std::vector<Cidr> parse_networks(const std::vector<std::string>& nets) {
  std::vector<Cidr> out;
  for (const auto& n : nets) {
    try {
      out.push_back(parse_cidr(n));
    } catch (const Error& e) {
      throw Error(std::string("allow_networks: ") + e.what(), e.hint());
    }
  }
  return out;
}

Config validate(const NetworkSettings& s) {
  if (s.mode != NetworkMode::allowlist)
    throw Error("egress proxy: network_mode is not allowlist", "the proxy only runs for network_mode: allowlist");
  Config c{Allowlist(s.allowlist), AddressPolicy(parse_networks(s.allow_networks)), {}, s.max_connections, s.max_bytes,
           std::chrono::seconds(s.idle_timeout_s)};
  for (const auto& [name, address] : s.extra_hosts) {
    const std::string where = "extra_hosts entry '" + name + "'";
    const auto host = normalize_host(name);
    if (!host.host || host.host->kind != Host::Kind::name)
      throw Error(where + ": " + (host.host ? "the name is an address" : host.reason), "map a host name to an address");
    const auto ip = parse_ip(address);
    if (!ip) throw Error(where + ": '" + address + "' is not an IP address", "write e.g. pypi.internal: 10.0.0.5");
    const auto [it, inserted] = c.extra_hosts.emplace(host.host->text, *ip);
    if (!inserted && !(it->second == *ip))
      throw Error(where + ": the same name is mapped twice to different addresses", "keep one entry per name");
  }
  if (s.max_connections == 0 || s.max_connections > kMaxConnectionsCap)
    throw Error("network max_connections: " + std::to_string(s.max_connections) + " is out of range",
                "use 1 to " + std::to_string(kMaxConnectionsCap));
  if (s.max_bytes == 0) throw Error("network max_bytes: must be greater than 0");
  if (s.idle_timeout_s == 0) throw Error("network idle_timeout_s: must be greater than 0");
  return c;
}

void check_listening(int fd) {
  int accepting = 0, type = 0;
  socklen_t len = sizeof accepting;
  if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting)
    throw Error("egress proxy: fd " + std::to_string(fd) + " is not a listening socket", "pass the proxy's listening socket", errno);
  len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    throw Error("egress proxy: fd " + std::to_string(fd) + " is not a stream socket");
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_errno("egress proxy: set O_NONBLOCK on the listening socket");
}

int millis_until(Clock::time_point deadline) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, INT_MAX));
}

std::string status_text(int status) {
  switch (status) {
    case 200: return "Connection established";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

std::string error_response(int status, const std::string& reason) {
  const std::string body = "sandboxrun egress proxy: " + reason + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// Name resolution on a helper thread so that a slow resolver cannot outlive the deadline or
// stop(): the thread owns its share of the job and finishes on its own if nobody waits.
struct ResolveJob {
  UniqueFd done{eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::mutex mu;
  int rc = EAI_SYSTEM;
  std::vector<IpAddress> addresses;
};

std::shared_ptr<ResolveJob> start_resolve(const std::string& name) {
  auto job = std::make_shared<ResolveJob>();
  if (!job->done) throw_errno("egress proxy: eventfd for name resolution");
  std::thread([job, name] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
    std::vector<IpAddress> out;
    for (auto* ai = res; rc == 0 && ai; ai = ai->ai_next) {
      if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
      auto a = IpAddress::from_sockaddr(ai->ai_addr);
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
    if (res) freeaddrinfo(res);
    std::lock_guard lock(job->mu);
    job->rc = rc;
    job->addresses = std::move(out);
    const uint64_t one = 1;
    [[maybe_unused]] auto n = write(job->done.get(), &one, sizeof one);
  }).detach();
  return job;
}

// What the accept thread and every connection thread share.
struct Shared {
  explicit Shared(Config c) : config(std::move(c)) {}

  const Config config;
  UniqueFd stop_fd;  // eventfd; readable from stop() on, which wakes every poll

  std::atomic<uint32_t> active{0};
  std::atomic<uint64_t> budget_used{0};  // bytes read for forwarding, both ways
  std::atomic<uint64_t> bytes_up{0};
  std::atomic<uint64_t> bytes_down{0};

  mutable std::mutex records_mu;
  std::vector<ConnectionRecord> records;
  uint64_t allowed = 0;
  uint64_t denied = 0;
  uint64_t records_dropped = 0;

  void finish(ConnectionRecord rec) {
    std::lock_guard lock(records_mu);
    ++(rec.verdict == Verdict::allowed ? allowed : denied);
    if (records.size() < EgressProxy::kMaxRecords)
      records.push_back(std::move(rec));
    else
      ++records_dropped;
  }

  // Takes up to `want` bytes from the run's byte budget; returns what was granted.
  uint64_t reserve(uint64_t want) {
    uint64_t used = budget_used.load();
    while (true) {
      if (used >= config.max_bytes) return 0;
      const uint64_t grant = std::min(want, config.max_bytes - used);
      if (budget_used.compare_exchange_weak(used, used + grant)) return grant;
    }
  }
  void give_back(uint64_t n) { budget_used -= n; }
};

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
      Connection(shared, UniqueFd(fd)).run();
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
