// Sessions that outlive one command, without a central daemon (docs/sessions.md): a holder
// process keeps one Session and serves it on a unix socket in the sessions directory; clients
// (`sandboxrun session run|put|get|files|stop`, the Python package) connect, send one request
// and read one reply. Only the holder's own user and root may connect (SO_PEERCRED), and the
// directory is 0700.
//
// Frames both ways: a 4-byte big-endian length, then UTF-8 JSON.
//   {"op": "run", "code": TEXT, "stdin": BASE64?, "timeout": S?, "override_reason": TEXT?}
//                                              -> CellResult::to_json()
//   {"op": "put", "path": P, "data": BASE64, "override_reason": TEXT?} -> FilePut::to_json()
//   {"op": "get", "path": P}                   -> {"path": P, "size": N, "data": BASE64}
//   {"op": "files", "path": P?}                -> {"files": [WorkFile...]}
//   {"op": "info"}                             -> SessionInfo
//   {"op": "stop"}                             -> RunResult::to_json() of the session's sandbox
//   any failure                                -> {"error": TEXT, "kind": ErrorKind}
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandboxrun/executor.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/record.hpp"

namespace sandboxrun::holder {

using record::from_json;
using record::to_json;

// What `session ls` and the info request show of a session.
struct SessionInfo {
  std::string session_id{};
  int64_t pid = 0;         // the holder's
  int64_t uid = 0;         // the holder's user
  std::string trust{};
  std::optional<std::string> image{};
  std::optional<std::string> caller{};
  std::map<std::string, std::string> labels{};
  std::string started_at{};  // UTC, ISO 8601
  uint64_t cells = 0;        // cells run so far
  bool alive = false;
  // What the session costs: its sandbox's cgroup as last sampled (none with monitoring off) and
  // the holder process's proportional set size.
  std::optional<uint64_t> memory_bytes{};
  uint64_t holder_pss_bytes = 0;
  static constexpr auto fields = std::tuple{
      record::field("session_id", &SessionInfo::session_id), record::field("pid", &SessionInfo::pid),
      record::field("uid", &SessionInfo::uid), record::field("trust", &SessionInfo::trust),
      record::field("image", &SessionInfo::image), record::field("caller", &SessionInfo::caller),
      record::field("labels", &SessionInfo::labels), record::field("started_at", &SessionInfo::started_at),
      record::field("cells", &SessionInfo::cells), record::field("alive", &SessionInfo::alive),
      record::field("memory_bytes", &SessionInfo::memory_bytes),
      record::field("holder_pss_bytes", &SessionInfo::holder_pss_bytes)};
  bool operator==(const SessionInfo&) const = default;
};

// Where the sockets are: $SANDBOXRUN_SESSIONS_DIR when set; else /run/sandboxrun/sessions for
// root, $XDG_RUNTIME_DIR/sandboxrun/sessions or /tmp/sandboxrun-UID/sessions for others.
std::filesystem::path sessions_dir();

// Serves `session` at sessions_dir()/ID.sock until a stop request, the session's end (idle
// timeout, lifetime, lost) or SIGTERM/SIGINT/SIGHUP, which the caller must have blocked in every
// thread (before the Executor was opened) so that the session's monitor takes them. Calls
// `ready` once the socket listens. Throws Error when the socket cannot be made. Returns the
// session's run result; the socket is gone on return.
RunResult serve(Session& session, SessionInfo info, const std::function<void()>& ready);

// One connection to a holder, for one request.
class Client {
 public:
  // By id, or a unique prefix of at least 4 characters. Throws Error (usage) naming what was
  // found when none or several match, or when the holder is gone (its socket is then removed).
  static Client connect(const std::string& id);
  const std::string& id() const { return id_; }
  // Sends `request` and returns the reply; a reply {"error", "kind"} is thrown as that Error.
  nlohmann::json call(const nlohmann::json& request);
  // The requests above, one per connection: run (CellResult::to_json()), put (FilePut::to_json()),
  // get (the file's bytes), files, stop (the sandbox's RunResult::to_json()).
  nlohmann::json run(const CellRequest& cell);
  nlohmann::json put(const std::string& path, std::string_view data, const std::optional<std::string>& override_reason);
  std::string get(const std::string& path);
  std::vector<WorkFile> files(const std::string& dir);
  nlohmann::json stop();

 private:
  friend std::vector<SessionInfo> list_sessions();
  Client(std::string id, UniqueFd fd) : id_(std::move(id)), fd_(std::move(fd)) {}
  std::string id_;
  UniqueFd fd_;
};

// The sessions in sessions_dir() whose holders answer; sockets of holders that died are removed.
std::vector<SessionInfo> list_sessions();

}  // namespace sandboxrun::holder
