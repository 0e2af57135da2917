// The client side of a session's holder (session_holder.hpp), the sessions directory and the
// frames both sides speak.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/base64.hpp"
#include "holder_wire.hpp"
#include "session/protocol.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/session_holder.hpp"

namespace sandboxrun::holder {

namespace {

// Makes `dir` (and its parents) 0700 as this user, or checks an existing one: ours and closed to
// others, or refused (a directory another user prepared could be watched or swapped).
void ensure_private_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("cannot create the sessions directory " + dir.string());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) throw_errno("cannot stat " + dir.string());
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    throw Error("the sessions directory " + dir.string() + " is not a directory of this user's closed to others",
                "remove it, or set SANDBOXRUN_SESSIONS_DIR to a directory of your own with mode 0700")
        .as(ErrorKind::usage);
}

std::optional<UniqueFd> dial(const std::filesystem::path& path, int& err) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.native().size() >= sizeof addr.sun_path) {
    err = ENAMETOOLONG;
    return std::nullopt;
  }
  path.native().copy(addr.sun_path, sizeof addr.sun_path - 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("cannot make a unix socket");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    err = errno;
    return std::nullopt;
  }
  return fd;
}

ErrorKind kind_named(const std::string& name) {
  for (auto k : {ErrorKind::usage, ErrorKind::config, ErrorKind::image, ErrorKind::limits, ErrorKind::audit,
                 ErrorKind::deps, ErrorKind::host, ErrorKind::interrupted})
    if (name == to_string(k)) return k;
  return ErrorKind::other;
}

}  // namespace

std::filesystem::path sessions_dir() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("SANDBOXRUN_SESSIONS_DIR"); env && *env) dir = env;
  else if (::geteuid() == 0) dir = "/run/sandboxrun/sessions";
  else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) dir = std::filesystem::path(xdg) / "sandboxrun" / "sessions";
  else dir = "/tmp/sandboxrun-" + std::to_string(::geteuid()) + "/sessions";
  ensure_private_dir(dir);
  return dir;
}

bool send_frame(int fd, const nlohmann::json& j) {
  const std::string frame = session::framed(j);
  // MSG_NOSIGNAL: a client that went away is an EPIPE here, not a SIGPIPE for the holder.
  for (size_t done = 0; done < frame.size();) {
    const ssize_t n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<nlohmann::json> recv_frame(int fd) {
  auto read_n = [fd](char* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd, p + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  };
  unsigned char head[4];
  const size_t got = read_n(reinterpret_cast<char*>(head), 4);
  if (got == 0) return std::nullopt;
  if (got < 4) throw Error("the session's connection ended inside a frame").as(ErrorKind::host);
  const size_t n = size_t{head[0]} << 24 | size_t{head[1]} << 16 | size_t{head[2]} << 8 | head[3];
  if (n > kMaxFrame) throw Error("a frame of " + std::to_string(n) + " bytes, over the holder's limit").as(ErrorKind::usage);
  std::string body(n, '\0');
  if (read_n(body.data(), n) != n) throw Error("the session's connection ended inside a frame").as(ErrorKind::host);
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw Error("a frame that is not a JSON object").as(ErrorKind::usage);
  return j;
}

nlohmann::json error_reply(const std::exception& e) {
  if (const auto* err = dynamic_cast<const Error*>(&e)) return {{"error", err->describe()}, {"kind", to_string(err->kind())}};
  return {{"error", e.what()}, {"kind", "other"}};
}

Client Client::connect(const std::string& id) {
  const std::filesystem::path dir = sessions_dir();
  std::vector<std::string> matches;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".sock")) continue;
    const std::string sid = name.substr(0, name.size() - 5);
    if (sid == id) {
      matches = {sid};
      break;
    }
    if (id.size() >= 4 && sid.starts_with(id)) matches.push_back(sid);
  }
  if (matches.empty())
    throw Error("no session " + id + " in " + dir.string(), "`sandboxrun session ls` lists the open ones")
        .as(ErrorKind::usage);
  if (matches.size() > 1)
    throw Error("'" + id + "' names " + std::to_string(matches.size()) + " sessions", "give more of the id")
        .as(ErrorKind::usage);
  int err = 0;
  auto fd = dial(dir / (matches[0] + ".sock"), err);
  if (!fd) {
    if (err == ECONNREFUSED) {
      ::unlink((dir / (matches[0] + ".sock")).c_str());
      throw Error("session " + matches[0] + " has ended (its holder is gone)", "start a new one").as(ErrorKind::usage);
    }
    throw Error("cannot connect to session " + matches[0] + ": " + std::strerror(err)).as(ErrorKind::host);
  }
  return Client(matches[0], std::move(*fd));
}

nlohmann::json Client::call(const nlohmann::json& request) {
  // A holder that refuses the connection answers at once and closes: its answer says why.
  const bool sent = send_frame(fd_.get(), request);
  std::optional<nlohmann::json> reply;
  try {
    reply = recv_frame(fd_.get());
  } catch (const Error&) {
    if (sent) throw;
  }
  if (!sent && !reply)
    throw Error("session " + id_ + " closed the connection before the request was sent").as(ErrorKind::host);
  if (!reply) throw Error("session " + id_ + " ended without a reply", "start a new one").as(ErrorKind::host);
  if (const auto e = reply->find("error"); e != reply->end() && e->is_string()) {
    const auto k = reply->find("kind");
    throw Error(e->get<std::string>()).as(kind_named(k != reply->end() && k->is_string() ? k->get<std::string>() : ""));
  }
  return std::move(*reply);
}

nlohmann::json Client::run(const CellRequest& cell) {
  nlohmann::json req = {{"op", "run"}, {"code", cell.code}, {"stdin", base64_encode(cell.stdin_data)}};
  if (cell.timeout_s) req["timeout"] = *cell.timeout_s;
  if (cell.override_reason) req["override_reason"] = *cell.override_reason;
  return call(req);
}

nlohmann::json Client::put(const std::string& path, std::string_view data,
                           const std::optional<std::string>& override_reason) {
  nlohmann::json req = {{"op", "put"}, {"path", path}, {"data", base64_encode(data)}};
  if (override_reason) req["override_reason"] = *override_reason;
  return call(req);
}

std::string Client::get(const std::string& path) {
  const nlohmann::json reply = call({{"op", "get"}, {"path", path}});
  const auto data = reply.find("data");
  std::optional<std::string> bytes;
  if (data != reply.end() && data->is_string()) bytes = base64_decode(data->get_ref<const std::string&>());
  if (!bytes) throw Error("session " + id_ + " sent a reply to get without the file's data").as(ErrorKind::host);
  return std::move(*bytes);
}

std::vector<WorkFile> Client::files(const std::string& dir) {
  return call({{"op", "files"}, {"path", dir}}).at("files").get<std::vector<WorkFile>>();
}

nlohmann::json Client::stop() { return call({{"op", "stop"}}); }

std::vector<SessionInfo> list_sessions() {
  const std::filesystem::path dir = sessions_dir();
  std::vector<SessionInfo> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".sock")) continue;
    int err = 0;
    auto fd = dial(entry.path(), err);
    if (!fd) {
      if (err == ECONNREFUSED) ::unlink(entry.path().c_str());  // its holder died
      continue;
    }
    Client c(name.substr(0, name.size() - 5), std::move(*fd));
    try {
      auto info = c.call({{"op", "info"}}).get<SessionInfo>();
      if (info.alive) out.push_back(std::move(info));
    } catch (const std::exception&) {
      // a holder that is going away as we ask
    }
  }
  std::sort(out.begin(), out.end(), [](const SessionInfo& a, const SessionInfo& b) { return a.started_at < b.started_at; });
  return out;
}

}  // namespace sandboxrun::holder
