#include "release.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>


namespace sandboxrun::launch {

std::string encode_release(std::string_view name, std::string_view script, const std::vector<std::string>& argv,
                           const std::vector<std::string>& envp) {
  std::string strings;
  for (const auto* list : {&argv, &envp})
    for (const auto& s : *list) strings.append(s.c_str(), s.size() + 1);
  const ReleaseHeader h{static_cast<uint32_t>(name.size()), static_cast<uint32_t>(script.size()),
                        static_cast<uint32_t>(argv.size()), static_cast<uint32_t>(envp.size()),
                        static_cast<uint32_t>(strings.size())};
  std::string out(1, 'E');
  out.append(reinterpret_cast<const char*>(&h), sizeof h);
  out.append(name);
  out.append(script);
  out.append(strings);
  return out;
}

namespace {

// Exactly `len` bytes, or false (EOF, error).
bool read_exact(int fd, void* buf, size_t len) noexcept {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    const ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// The script is root's and read-only: the program cannot change what was assessed.
bool write_script(const ChildPlan& plan, const char* dir, const Release& rel) noexcept {
  const int dfd = ::open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    report_error(plan, "open directory for the script", errno, dir);
    return false;
  }
  const bool ok = write_new_file(plan, dfd, rel.name, rel.script, rel.script_len, 0444, false);
  ::close(dfd);
  return ok;
}

}  // namespace

bool read_release(const ChildPlan& plan, Release& out) noexcept {
  char tag = 0;
  if (!read_exact(plan.sync_read, &tag, 1)) return false;  // the launcher gave up
  ReleaseHeader h{};
  if (tag != 'E' || !read_exact(plan.sync_read, &h, sizeof h)) {
    report_error(plan, "read the release", EPROTO, "not a release");
    return false;
  }
  if (h.name_len == 0 || h.name_len > 255 || h.script_len > plan.max_script || h.argc == 0 ||
      h.argc > kMaxReleaseStrings || h.envc > kMaxReleaseStrings || h.strings_len > kMaxReleaseStringBytes) {
    report_error(plan, "read the release", EMSGSIZE, "sizes out of bounds");
    return false;
  }
  // One mapping: the pointer arrays, the name with its NUL, the script, the strings.
  const size_t pointers = (static_cast<size_t>(h.argc) + h.envc + 2) * sizeof(char*);
  const size_t size = pointers + h.name_len + 1 + h.script_len + h.strings_len;
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    report_error(plan, "map the release", errno, "mmap");
    return false;
  }
  char** ptrs = static_cast<char**>(map);
  char* name = static_cast<char*>(map) + pointers;
  char* script = name + h.name_len + 1;
  char* strings = script + h.script_len;
  if (!read_exact(plan.sync_read, name, h.name_len) || !read_exact(plan.sync_read, script, h.script_len) ||
      !read_exact(plan.sync_read, strings, h.strings_len)) {
    report_error(plan, "read the release", EPROTO, "short release");
    return false;
  }
  name[h.name_len] = '\0';
  if (std::memchr(name, '/', h.name_len) || std::memchr(name, '\0', h.name_len) || name[0] == '.') {
    report_error(plan, "read the release", EINVAL, "bad script name");
    return false;
  }
  // Split the strings; the last must end in its NUL, and there must be exactly argc + envc.
  const uint32_t want = h.argc + h.envc;
  uint32_t n = 0, ptr = 0;
  for (size_t at = 0; at < h.strings_len && n < want; ++n) {
    const void* nul = std::memchr(strings + at, '\0', h.strings_len - at);
    if (!nul) break;
    ptrs[ptr++] = strings + at;
    if (n + 1 == h.argc) ptrs[ptr++] = nullptr;  // argv's terminator
    at = static_cast<size_t>(static_cast<const char*>(nul) - strings) + 1;
  }
  if (n != want) {
    report_error(plan, "read the release", EPROTO, "bad argument strings");
    return false;
  }
  ptrs[ptr] = nullptr;  // envp's terminator
  out.name = name;
  out.script = script;
  out.script_len = h.script_len;
  out.argv = ptrs;
  out.envp = ptrs + h.argc + 1;
  return true;
}

bool place_script(const ChildPlan& plan, const Release& rel) noexcept {
  if (!write_script(plan, "/work", rel) || !write_script(plan, "/run/sandbox", rel)) return false;
  if (::mount(nullptr, "/run", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, plan.run_opts.c_str()) != 0) {
    report_error(plan, "remount /run read-only", errno, "/run");
    return false;
  }
  return true;
}

}  // namespace sandboxrun::launch
