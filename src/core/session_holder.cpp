// A session's holder (session_holder.hpp): serves one Session on a unix socket until it is
// stopped or ends. One thread per connection, one request per connection; Session serialises
// what touches its interpreter.
#include "sandboxrun/session_holder.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <list>
#include <thread>

#include "common/base64.hpp"
#include "holder_wire.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::holder {

namespace {

constexpr size_t kMaxConnections = 32;

// Only the holder's user and root: the directory is 0700 already; this holds when it is not.
bool peer_allowed(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == 0 || cred.uid == ::geteuid();
}

std::optional<std::string> opt_text(const nlohmann::json& req, const char* key) {
  const auto it = req.find(key);
  if (it == req.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw Error(std::string("'") + key + "' must be a string").as(ErrorKind::usage);
  return it->get<std::string>();
}

std::string text(const nlohmann::json& req, const char* key) {
  auto v = opt_text(req, key);
  if (!v) throw Error(std::string("the request has no '") + key + "'").as(ErrorKind::usage);
  return *v;
}

std::string decoded(const nlohmann::json& req, const char* key) {
  auto data = base64_decode(opt_text(req, key).value_or(""));
  if (!data) throw Error(std::string("'") + key + "' is not base64").as(ErrorKind::usage);
  return std::move(*data);
}

// This process's proportional set size (shared pages counted by share, so that N holders sum to
// what they cost together); 0 where smaps_rollup cannot be read (kernels before 4.14).
uint64_t holder_pss_bytes() {
  FILE* f = std::fopen("/proc/self/smaps_rollup", "re");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "Pss: %llu kB", &kib) == 1;
  std::fclose(f);
  return found ? kib * 1024 : 0;
}

class Holder {
 public:
  Holder(Session& s, SessionInfo info, std::filesystem::path socket)
      : session_(s), info_(std::move(info)), socket_(std::move(socket)) {}

  nlohmann::json handle(const nlohmann::json& req, bool& stop) {
    const std::string op = text(req, "op");
    if (op == "run") {
      CellRequest cell{.code = text(req, "code"), .stdin_data = decoded(req, "stdin"), .timeout_s = {},
                       .override_reason = opt_text(req, "override_reason")};
      if (const auto t = req.find("timeout"); t != req.end() && !t->is_null()) {
        if (!t->is_number() || t->get<double>() <= 0)
          throw Error("'timeout' must be a number of seconds above 0").as(ErrorKind::usage);
        cell.timeout_s = t->get<double>();
      }
      ++cells_;
      return session_.run(cell).to_json();
    }
    if (op == "put") return session_.put_file(text(req, "path"), decoded(req, "data"), opt_text(req, "override_reason")).to_json();
    if (op == "get") {
      const std::string path = text(req, "path");
      const std::string data = session_.get_file(path);
      return {{"path", path}, {"size", data.size()}, {"data", base64_encode(data)}};
    }
    if (op == "files") return {{"files", session_.list_files(opt_text(req, "path").value_or(""))}};
    if (op == "info") {
      SessionInfo i = info_;
      i.cells = cells_;
      i.alive = session_.alive();
      if (const auto u = session_.usage()) i.memory_bytes = u->memory_current;
      i.holder_pss_bytes = holder_pss_bytes();
      return i;
    }
    if (op == "stop") {
      stop = true;
      ::unlink(socket_.c_str());  // gone for the next client at once, not at the next turn of the loop
      return session_.close().to_json();
    }
    throw Error("unknown request '" + op + "'", "run, put, get, files, info or stop").as(ErrorKind::usage);
  }

 private:
  Session& session_;
  SessionInfo info_;
  std::filesystem::path socket_;
  std::atomic<uint64_t> cells_{0};
};

class Listener {
 public:
  explicit Listener(const std::filesystem::path& path) : path_(path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.native().size() >= sizeof addr.sun_path)
      throw Error("the socket path " + path.string() + " is too long for a unix socket",
                  "set SANDBOXRUN_SESSIONS_DIR to a shorter directory")
          .as(ErrorKind::usage);
    path.native().copy(addr.sun_path, sizeof addr.sun_path - 1);
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd_) throw_errno("cannot make a unix socket");
    // 0600 from the start (the directory is 0700 too): nobody else can connect in between.
    const mode_t old = ::umask(0177);
    const int rc = ::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    ::umask(old);
    if (rc != 0) throw_errno("cannot bind the session's socket " + path.string());
    bound_ = true;
    if (::listen(fd_.get(), 64) != 0) throw_errno("cannot listen on " + path.string());
  }
  ~Listener() {
    if (bound_) ::unlink(path_.c_str());
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  int fd() const { return fd_.get(); }

 private:
  std::filesystem::path path_;
  UniqueFd fd_;
  bool bound_ = false;
};

}  // namespace

// A connection's thread; finished ones are joined as the loop goes, so a long session does not
// pile them up.
struct Worker {
  std::thread thread;
  std::atomic<bool> done{false};
};

RunResult serve(Session& session, SessionInfo info, const std::function<void()>& ready) {
  const std::filesystem::path socket = sessions_dir() / (session.id() + ".sock");
  Holder holder(session, std::move(info), socket);
  std::atomic<bool> stop{false};
  std::list<Worker> workers;
  auto reap = [&workers](bool all) {
    for (auto it = workers.begin(); it != workers.end();) {
      if (!all && !it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      it = workers.erase(it);
    }
  };
  {
    Listener listener(socket);
    ready();
    while (!stop && session.alive()) {
      reap(false);
      pollfd p{listener.fd(), POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      UniqueFd conn(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) continue;
      if (!peer_allowed(conn.get())) {
        send_frame(conn.get(), error_reply(Error("only the session's owner and root may use it").as(ErrorKind::usage)));
        continue;
      }
      if (workers.size() >= kMaxConnections) {
        send_frame(conn.get(), error_reply(Error("the session's holder serves " + std::to_string(kMaxConnections) +
                                                 " requests already; try again")));
        continue;
      }
      Worker& w = workers.emplace_back();
      w.thread = std::thread([&holder, &stop, &w, fd = std::move(conn)] {
        nlohmann::json reply;
        bool stopping = false;
        try {
          if (auto req = recv_frame(fd.get())) reply = holder.handle(*req, stopping);
        } catch (const std::exception& e) {
          reply = error_reply(e);
        }
        if (!reply.is_null()) send_frame(fd.get(), reply);
        if (stopping) stop = true;
        w.done = true;
      });
    }
  }  // the socket is gone: no new requests
  reap(true);  // a stop request closed the session in its thread; Session::close is not reentrant
  return session.close();
}

}  // namespace sandboxrun::holder
