// Runs the real sandboxrun binary, as a user or a service would.
#pragma once

#include <nlohmann/json.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sandboxrun::testing {

struct Exec {
  int exit_code = -1;
  std::string out, err;
};

// Runs sandboxrun with args; env entries "K=V" are added to a minimal environment. With
// as_uid >= 0 the binary runs as that unprivileged user (uid and gid), with no groups.
// Runs the sandboxrun binary; with as_uid >= 0, the copy of it in reachable_source_dir().
Exec run_binary(const std::vector<std::string>& args, const std::vector<std::string>& env = {}, int as_uid = -1);
// The same for another program (an installed copy, a service).
Exec run_program(const std::string& program, const std::vector<std::string>& args,
                 const std::vector<std::string>& env = {}, int as_uid = -1);

// A temp directory removed at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

struct Sandboxed {
  Exec exec;
  nlohmann::json result;  // parsed --json output (empty object if it did not parse)
  std::string stdout_text() const { return result.value("stdout", ""); }
};

// Writes `script` to a temp file and runs it with --json plus extra options; "--" and what
// follows in `extra` become the program's arguments.
Sandboxed run_python(const std::string& script, const std::vector<std::string>& extra = {},
                     const std::vector<std::string>& env = {});

std::string source_dir();
// The source tree as every user can reach it: source_dir() itself, or, for a checkout under a
// 0700 directory (/root/src/sandboxrun), the tree bind-mounted onto a world-reachable directory
// in a mount namespace private to this test process (nothing shows outside it). "" on failure
// (with a test failure added).
std::string reachable_source_dir();

// A TCP socket listening on 127.0.0.1 at a free port (stored in *port), for the tests' own servers.
int listen_on_loopback(int backlog, uint16_t* port);
// Reads an HTTP request's head from a connection of such a server and returns its target
// ("/simple/pkg/"), empty when the peer closed first.
std::string read_request_target(int fd);

// The whole file as text (empty when it cannot be read).
std::string read_text(const std::string& path);
// This process's mount table (/proc/self/mountinfo lines) without the mounts of container
// runtimes, which tests running beside (podman_test) add and remove: what a run could leave.
std::vector<std::string> mounts_of_interest();
// The records of audit log `log`, in order; a line that is not JSON throws.
std::vector<nlohmann::json> audit_records(const std::string& log);

// Copies the project's config/ (sandbox, security, audit) into dir with every relative path made
// absolute, replacing the security.yaml keys given in `security_extra` (appended YAML), and
// returns the path of the copy's sandbox.yaml. Files are world-readable. `src`: the tree the
// paths point into (reachable_source_dir() for a config an unprivileged user reads).
std::string write_config(const TempDir& dir, const std::string& sandbox_extra = "",
                         const std::string& security_extra = "", const std::string& src = source_dir());

// Cgroups whose name carries a run id, in any hierarchy the launcher uses, under `parent` (the
// config's cgroup.parent).
size_t cgroups_named(const std::string& run_id, const std::string& parent = "sandboxrun");
// Whether `done` holds within `within`, asked every 20 ms (at once when it already does): for
// what the sandbox finishes on its own time (a pid 1 reaped, a cgroup removed).
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds within = std::chrono::seconds(30));
// Removes the (empty) cgroup `parent` from every hierarchy: a test's own cgroup.parent.
void remove_cgroup_parent(const std::string& parent);
// The most processes any of the run's cgroups holds (its hierarchies all hold the same ones).
size_t processes_in_cgroups_named(const std::string& run_id);
// Processes whose parent is this one (any of its threads): a run's processes must all be gone.
size_t children_of_this_process();

}  // namespace sandboxrun::testing
