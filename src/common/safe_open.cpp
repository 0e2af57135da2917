#include "common/safe_open.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <vector>

#include "sandboxrun/error.hpp"

namespace sandboxrun {

namespace fs = std::filesystem;

namespace {

const char* const kSymlinkHint =
    "give the real path (no symlink anywhere in it); a symlink there may have been planted to "
    "redirect what is written";

std::string octal_mode(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}

// One component below `dirfd`, never through a symlink; O_CLOEXEC added. -1 with errno set.
int open_component(int dirfd, const char* name, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH;
  for (;;) {
    const long fd = ::syscall(SYS_openat2, dirfd, name, &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN) return static_cast<int>(fd);
  }
}

// StrictModes: who besides root and the caller (`me`) could change what this directory holds?
bool trusted(const struct stat& st, uid_t me) {
  const bool group_writable = (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0;
  return (st.st_uid == 0 || st.st_uid == me) &&
         (!(group_writable || (st.st_mode & S_IWOTH) != 0) || (st.st_mode & S_ISVTX) != 0);
}

// The same answer as the walk in open_trusted_dir, in fewer system calls (a run opens ~7 such
// directories, and the walk cost 3 calls a component): the whole path in one openat2 that
// follows no symlink anywhere, then the directory and each one above it checked where it is
// now, through "..", "../.." up to "/". Invalid on any doubt (something missing, a symlink, a
// directory that fails the check, the path moved meanwhile): the walk then creates what is
// missing or names what is wrong.
UniqueFd open_trusted_fast(const fs::path& abs, size_t depth, uid_t me) {
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd;
  while ((fd = ::syscall(SYS_openat2, AT_FDCWD, abs.c_str(), &how, sizeof how)) < 0 && errno == EAGAIN) {}
  if (fd < 0) return UniqueFd();
  UniqueFd dir(static_cast<int>(fd));
  struct stat st {}, root {};
  if (::stat("/", &root) != 0 || ::fstat(dir.get(), &st) != 0 || !trusted(st, me)) return UniqueFd();
  std::string up;
  for (size_t i = 0; i < depth; ++i) {
    up += i ? "/.." : "..";
    if (::fstatat(dir.get(), up.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !trusted(st, me)) return UniqueFd();
  }
  if (st.st_dev != root.st_dev || st.st_ino != root.st_ino) return UniqueFd();
  return dir;
}

void check_dir(int fd, const fs::path& shown, uid_t me) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("cannot stat directory " + shown.string());
  if (trusted(st, me)) return;
  // Which half of trusted() failed, said.
  if (st.st_uid != 0 && st.st_uid != me)
    throw Error("directory " + shown.string() + " is owned by uid " + std::to_string(st.st_uid) +
                    ", not by root or you (uid " + std::to_string(me) + "): its owner could redirect files in it",
                "use a directory owned by you or root, or chown it");
  const bool group_writable = (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0;
  throw Error("directory " + shown.string() + " is writable by " +
                  (group_writable ? "group " + std::to_string(st.st_gid) : std::string("others")) + " (mode " +
                  octal_mode(st.st_mode) + ") and not sticky: other users could plant symlinks in it",
              "chmod go-w " + shown.string() + ", or use another directory");
}

}  // namespace

UniqueFd open_trusted_dir(const fs::path& dir, bool create, mode_t mode) {
  const fs::path abs = fs::absolute(dir).lexically_normal();
  const uid_t me = ::geteuid();
  std::vector<std::string> parts;
  for (const auto& c : abs.relative_path())
    if (!c.empty()) parts.push_back(c.string());
  if (!parts.empty())
    if (UniqueFd fast = open_trusted_fast(abs, parts.size(), me)) return fast;
  // O_PATH is enough to walk; the directory itself is opened for reading (callers fsync and
  // list directories), which a walk of ~4 components a cache load or audit write makes often.
  UniqueFd cur(::open("/", (parts.empty() ? O_RDONLY : O_PATH) | O_DIRECTORY | O_CLOEXEC));
  if (!cur) throw_errno("cannot open /");
  check_dir(cur.get(), "/", me);
  fs::path so_far = "/";
  for (size_t i = 0; i < parts.size(); ++i) {
    so_far /= parts[i];
    const bool last = i + 1 == parts.size();
    const int flags = (last ? O_RDONLY : O_PATH) | O_DIRECTORY;
    int fd = open_component(cur.get(), parts[i].c_str(), flags);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), parts[i].c_str(), last ? mode : 0755) != 0 && errno != EEXIST)
        throw_errno("cannot create directory " + so_far.string());
      fd = open_component(cur.get(), parts[i].c_str(), flags);
    }
    if (fd < 0) {
      if (errno == ELOOP) throw Error(so_far.string() + " is a symlink; refusing to follow it", kSymlinkHint);
      if (errno == ENOTDIR) throw Error(so_far.string() + " is not a directory");
      throw_errno("cannot open directory " + so_far.string());
    }
    cur.reset(fd);
    check_dir(cur.get(), so_far, me);
  }
  return cur;
}

UniqueFd open_trusted_at(int dir_fd, const std::string& name, int flags, mode_t mode, const fs::path& shown) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode));
  if (!fd) {
    if (errno == ELOOP) throw Error(shown.string() + " is a symlink; refusing to follow it", kSymlinkHint);
    throw_errno("cannot open " + shown.string());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + shown.string());
  if (!S_ISREG(st.st_mode)) throw Error(shown.string() + " is not a regular file", "remove it or choose another path");
  if ((flags & O_ACCMODE) != O_RDONLY) {
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
      throw Error(shown.string() + " is owned by uid " + std::to_string(st.st_uid) + ", not by root or you",
                  "remove it (another user may have planted it) or choose another path");
    if (st.st_nlink != 1)
      throw Error(shown.string() + " has " + std::to_string(st.st_nlink) + " hard links",
                  "remove it (a hard link may have been planted to redirect what is written)");
  }
  return fd;
}

UniqueFd open_trusted_file(const fs::path& path, int flags, mode_t mode, bool create_parent) {
  const fs::path abs = fs::absolute(path).lexically_normal();
  if (!abs.has_filename()) throw Error(path.string() + " names no file");
  const UniqueFd dir = open_trusted_dir(abs.parent_path(), create_parent);
  return open_trusted_at(dir.get(), abs.filename().string(), flags, mode, abs);
}

std::string random_name_suffix() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v))
    v = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
        static_cast<uint64_t>(::getpid());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace sandboxrun
