#include "harness.hpp"
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace sandboxrun::testing {

std::string source_dir() { return SANDBOXRUN_SOURCE_DIR; }

int listen_on_loopback(int backlog, uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("cannot listen on 127.0.0.1");
  *port = ntohs(a.sin_port);
  return fd;
}

std::string read_request_target(int fd) {
  char buf[4096];
  std::string req;
  while (req.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  const size_t start = req.find(' ');
  if (start == std::string::npos) return "";
  std::string target = req.substr(start + 1);
  return target.substr(0, target.find(' '));
}

Exec run_binary(const std::vector<std::string>& args, const std::vector<std::string>& env, int as_uid) {
  if (as_uid < 0) return run_program(SANDBOXRUN_BIN, args, env, as_uid);
  // The binary inside the reachable tree: its build directory's path relative to the source.
  const std::string rel = std::filesystem::path(SANDBOXRUN_BIN).lexically_relative(source_dir());
  return run_program(reachable_source_dir() + "/" + rel, args, env, as_uid);
}

namespace {

// Can every user reach `path` (search permission on each directory above it)?
bool reachable_by_all(const std::filesystem::path& path) {
  for (std::filesystem::path p = path; p != p.root_path(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
  }
  return true;
}

}  // namespace

std::string reachable_source_dir() {
  static const std::string path = []() -> std::string {
    const std::string src = source_dir();
    if (reachable_by_all(src)) return src;
    char tmpl[] = "/tmp/sandboxrun-test-src-XXXXXX";
    if (!::mkdtemp(tmpl) || ::chmod(tmpl, 0755) != 0) return "";
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount(src.c_str(), tmpl, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      ADD_FAILURE() << "cannot bind " << src << " onto " << tmpl << ": " << std::strerror(errno);
      return "";
    }
    // Only this process sees the mount; the directory under it goes when the process exits.
    static std::string to_remove = tmpl;
    std::atexit([] {
      ::umount2(to_remove.c_str(), MNT_DETACH);
      ::rmdir(to_remove.c_str());
    });
    return tmpl;
  }();
  return path;
}

Exec run_program(const std::string& program, const std::vector<std::string>& args, const std::vector<std::string>& env,
                 int as_uid) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  std::vector<std::string> argv_s{program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"};
  if (const char* ci = std::getenv("CI")) env_s.push_back(std::string("CI=") + ci);
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (as_uid >= 0 && (setgroups(0, nullptr) != 0 || setresgid(as_uid, as_uid, as_uid) != 0 ||
                        setresuid(as_uid, as_uid, as_uid) != 0))
      _exit(98);
    execve(argv[0], argv.data(), envp.data());
    _exit(99);
  }
  close(out[1]);
  close(err[1]);
  Exec r;
  pollfd pfd[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_count = 2;
  while (open_count > 0) {
    if (poll(pfd, 2, -1) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t n = read(pfd[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(pfd[i].fd);
        pfd[i].fd = -1;
        --open_count;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/sandboxrun-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string p = path_ + "/" + name;
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> mounts_of_interest() {
  std::vector<std::string> out;
  std::istringstream in(read_text("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    bool runtime = false;
    for (const std::string p : {"/var/lib/containers", "/run/containers", "/run/libpod", "/run/netns", "/var/lib/docker"})
      runtime = runtime || point == p || point.rfind(p + "/", 0) == 0;
    if (!runtime) out.push_back(line);
  }
  return out;
}

std::vector<nlohmann::json> audit_records(const std::string& log) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(log));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// yaml-cpp rejects duplicate top-level keys only sometimes; drop the keys we replace instead.
std::string drop_top_level_keys(const std::string& yaml, const std::string& extra) {
  std::vector<std::string> keys;
  std::istringstream ex(extra);
  for (std::string line; std::getline(ex, line);)
    if (!line.empty() && line[0] != ' ' && line[0] != '#' && line.find(':') != std::string::npos)
      keys.push_back(line.substr(0, line.find(':')));
  std::istringstream in(yaml);
  std::string out;
  bool skipping = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      std::string key = line.substr(0, line.find(':'));
      skipping = std::find(keys.begin(), keys.end(), key) != keys.end();
    }
    if (!skipping) out += line + "\n";
  }
  return out + extra;
}

}  // namespace

std::string write_config(const TempDir& dir, const std::string& sandbox_extra, const std::string& security_extra,
                         const std::string& src) {
  std::string sandbox = read_text(src + "/config/sandbox.yaml");
  // Absolute data paths, so the copy works from anywhere and for a binary outside the tree.
  replace_all(sandbox, "seccomp=policies/", "seccomp=" + src + "/policies/");
  replace_all(sandbox, "\nimage: default ", "\nimage: " + src + "/rootfs/default ");
  std::string security = read_text(src + "/config/security.yaml");
  replace_all(security, "rules: policies/", "rules: " + src + "/policies/");
  std::string audit = read_text(src + "/config/audit.yaml");
  std::string path = dir.write("sandbox.yaml", drop_top_level_keys(sandbox, sandbox_extra));
  dir.write("security.yaml", drop_top_level_keys(security, security_extra));
  dir.write("audit.yaml", audit);
  for (const char* f : {"sandbox.yaml", "security.yaml", "audit.yaml"}) chmod((dir.path() + "/" + f).c_str(), 0644);
  chmod(dir.path().c_str(), 0755);
  return path;
}

Sandboxed run_python(const std::string& script, const std::vector<std::string>& extra,
                     const std::vector<std::string>& env) {
  TempDir dir;
  std::string file = dir.write("job.py", script);
  // Options go before the file; "--" and what follows are the program's arguments.
  auto dashdash = std::find(extra.begin(), extra.end(), "--");
  std::vector<std::string> args{"--json"};
  args.insert(args.end(), extra.begin(), dashdash);
  args.push_back(file);
  args.insert(args.end(), dashdash, extra.end());
  Sandboxed s;
  s.exec = run_binary(args, env);
  s.result = nlohmann::json::parse(s.exec.out, nullptr, false);
  if (s.result.is_discarded()) s.result = nlohmann::json::object();
  return s;
}

namespace {
// Every hierarchy the host mounts: /sys/fs/cgroup itself (cgroup v2) and each directory in it
// (v1 controllers, the hybrid's unified).
std::vector<std::string> cgroup_roots() {
  std::vector<std::string> roots{"/sys/fs/cgroup"};
  std::error_code ec;
  struct stat top{};
  if (::stat("/sys/fs/cgroup", &top) != 0) return roots;
  for (const auto& e : std::filesystem::directory_iterator("/sys/fs/cgroup", ec)) {
    struct stat st{};
    if (::lstat(e.path().c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev != top.st_dev)
      roots.push_back(e.path().string());
  }
  return roots;
}
}  // namespace

size_t cgroups_named(const std::string& run_id, const std::string& parent) {
  size_t n = 0;
  for (const auto& root : cgroup_roots()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(root + "/" + parent, ec))
      if (e.path().filename().string().find(run_id) != std::string::npos) ++n;
  }
  return n;
}

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void remove_cgroup_parent(const std::string& parent) {
  for (const auto& root : cgroup_roots()) ::rmdir((root + "/" + parent).c_str());
}

size_t processes_in_cgroups_named(const std::string& run_id) {
  size_t most = 0;
  for (const auto& root : cgroup_roots()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(root + "/sandboxrun", ec)) {
      if (e.path().filename().string().find(run_id) == std::string::npos) continue;
      std::ifstream in(e.path() / "cgroup.procs");
      size_t n = 0;
      for (std::string line; std::getline(in, line);) ++n;
      most = std::max(most, n);
    }
  }
  return most;
}

size_t children_of_this_process() {
  size_t n = 0;
  const std::string me = "PPid:\t" + std::to_string(::getpid()) + "\n";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string status = read_text(e.path().string() + "/status");
    if (status.find(me) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace sandboxrun::testing
