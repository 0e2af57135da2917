#include "etc_files.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "child_plan.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

namespace {

constexpr const char* managed[] = {"hosts", "hostname", "resolv.conf", "passwd", "group"};
constexpr size_t kMaxAccountsFile = 1 << 20;

// The image's /etc/NAME when it is a regular file (never followed: an image's symlink may name
// a file of the host); else empty. Over kMaxAccountsFile bytes is an error naming the file.
std::string image_file(const std::string& host_etc, const char* name) {
  const std::string path = host_etc + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  return read_fd(fd.get(), kMaxAccountsFile, path, "an image's account file is at most 1 MiB");
}

// `text` (passwd or group lines, whose third field is the id) with `line` added when no entry
// has the id `id`: the sandbox's user exists for getpwuid() (getpass, pip, ~ expansion) in
// any image, as a named, unprivileged account.
std::string with_account(std::string text, uint32_t id, const std::string& line) {
  const std::string want = std::to_string(id);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view l(text.data() + start, end - start);
    const size_t a = l.find(':'), b = a == std::string_view::npos ? a : l.find(':', a + 1);
    if (b != std::string_view::npos && l.substr(b + 1, l.find(':', b + 1) - b - 1) == want) return text;
    start = end + 1;
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text + line + "\n";
}

std::string hosts_file(const SandboxSpec& spec) {
  // Docker's layout; the hostname maps to 127.0.1.1 (Debian's convention) as `lo` is the only
  // interface.
  std::string out =
      "127.0.0.1\tlocalhost\n"
      "::1\tlocalhost ip6-localhost ip6-loopback\n"
      "fe00::0\tip6-localnet\n"
      "ff00::0\tip6-mcastprefix\n"
      "ff02::1\tip6-allnodes\n"
      "ff02::2\tip6-allrouters\n"
      "127.0.1.1\t" + spec.hostname + "\n";
  // Names and addresses were validated when the config was read: one token each, no newline.
  for (const auto& [name, address] : spec.network.extra_hosts) out += address + "\t" + name + "\n";
  return out;
}

std::string resolv_conf(const SandboxSpec& spec) {
  // No nameserver line: glibc then tries 127.0.0.1:53, where nothing listens, and fails at once.
  if (spec.network.mode == NetworkMode::allowlist)
    return "# sandboxrun: no DNS in the sandbox; the egress proxy (HTTP(S)_PROXY) resolves names\n";
  return "# sandboxrun: network_mode none, no DNS\n";
}

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

size_t EtcPlan::bytes() const {
  size_t n = 0;
  for (const auto& c : file_content) n += c.size() + 4096;  // a page per file at least
  return n;
}

void plan_etc_files(const SandboxSpec& spec, const std::string& host_rootfs, const std::string& rootfs,
                    unsigned long root_remount_flags, EtcPlan& out) {
  out.dir = rootfs + "/run/sandboxrun";
  out.image_etc = rootfs + "/etc";
  const std::string host_etc = host_rootfs + "/etc";
  struct stat st {};
  if (::lstat(host_etc.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("image rootfs " + host_rootfs + " has no directory /etc (or it is a symlink)",
                "the sandbox's /etc/hosts, /etc/hostname and /etc/resolv.conf are mounted there; "
                "use an image with an /etc directory")
        .as(ErrorKind::image);
  const std::string uid = std::to_string(spec.uid), gid = std::to_string(spec.gid);
  out.file_content = {hosts_file(spec), spec.hostname + "\n", resolv_conf(spec),
                      with_account(image_file(host_etc, "passwd"), spec.uid,
                                   "sandbox:x:" + uid + ":" + gid + ":sandbox:/tmp:/usr/sbin/nologin"),
                      with_account(image_file(host_etc, "group"), spec.gid, "sandbox:x:" + gid + ":")};
  for (const char* name : managed) {
    out.file_path.push_back(out.dir + "/" + name);
    out.target.push_back(out.image_etc + "/" + name);
    if (!is_regular(host_etc + "/" + name)) out.shadow = true;
  }
  if (!out.shadow) return;
  out.image_etc_copy = out.dir + "/image-etc";
  out.image_remount_flags = root_remount_flags;
  for (const auto& e : std::filesystem::directory_iterator(host_etc)) {
    const std::string name = e.path().filename().string();
    if (std::find_if(std::begin(managed), std::end(managed), [&](const char* m) { return name == m; }) !=
        std::end(managed))
      continue;
    out.link_path.push_back(out.image_etc + "/" + name);
    // A symlink keeps its own target (relative ones stay relative to /etc); anything else is
    // reached through the read-only bind of the image's /etc.
    out.link_target.push_back(e.is_symlink() ? std::filesystem::read_symlink(e.path()).string()
                                             : "/run/sandboxrun/image-etc/" + name);
  }
}

}  // namespace sandboxrun::launch
