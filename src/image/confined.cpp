#include "confined.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "sandboxrun/error.hpp"

namespace sandboxrun::image::detail {

int openat2_fd(int dirfd, const char* path, int flags, uint64_t resolve, unsigned mode) noexcept {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = resolve;
  // EAGAIN: a concurrent rename somewhere on the system made RESOLVE_BENEATH retry-worthy.
  for (int attempt = 0;; ++attempt) {
    const long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0 || (errno != EAGAIN && errno != EINTR) || attempt == 16) return static_cast<int>(fd);
  }
}

namespace {

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};

// Names in the directory (not "." or ".."), with whether each is a directory.
std::vector<std::pair<std::string, bool>> list_dir(int fd, const std::string& what) {
  const int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup_fd < 0) throw_errno("cannot list " + what);
  std::unique_ptr<DIR, DirCloser> dir(fdopendir(dup_fd));
  if (!dir) {
    close(dup_fd);
    throw_errno("cannot list " + what);
  }
  std::vector<std::pair<std::string, bool>> names;
  errno = 0;
  while (dirent* d = readdir(dir.get())) {
    const std::string_view name = d->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = d->d_type == DT_DIR;
    if (d->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    names.emplace_back(std::string(name), is_dir);
  }
  if (errno) throw_errno("cannot list " + what);
  return names;
}

// An unprivileged owner needs write and search permission to empty a directory.
void make_writable(int fd) {
  struct stat st {};
  if (fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700) fchmod(fd, (st.st_mode & 07777) | 0700);
}

UniqueFd open_subdir(int dirfd, const std::string& name, const std::string& what) {
  UniqueFd fd(openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd && errno == EACCES) {
    fchmodat(dirfd, name.c_str(), 0700, 0);
    fd.reset(openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!fd) throw_errno("cannot open " + what + " to remove it");
  return fd;
}

}  // namespace

void remove_tree_at(int dirfd, const std::string& name, const std::string& what) {
  if (unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR) throw_errno("cannot remove " + what);

  // Depth-first without recursion: descend into the first subdirectory left, go back up
  // through ".." once a directory is empty. Only this tree's owner writes to it meanwhile.
  std::vector<std::string> stack{name};
  UniqueFd cur = open_subdir(dirfd, name, what);
  while (true) {
    make_writable(cur.get());
    std::string subdir;
    for (const auto& [child, is_dir] : list_dir(cur.get(), what)) {
      if (is_dir) {
        subdir = child;
        break;
      }
      if (unlinkat(cur.get(), child.c_str(), 0) != 0 && errno != ENOENT)
        throw_errno("cannot remove '" + child + "' in " + what);
    }
    if (!subdir.empty()) {
      cur = open_subdir(cur.get(), subdir, what);
      stack.push_back(std::move(subdir));
      continue;
    }
    if (stack.size() == 1) break;
    UniqueFd up(openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!up) throw_errno("cannot go back up while removing " + what);
    if (unlinkat(up.get(), stack.back().c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      throw_errno("cannot remove directory '" + stack.back() + "' in " + what);
    stack.pop_back();
    cur = std::move(up);
  }
  cur.reset();
  if (unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    throw_errno("cannot remove " + what);
}

bool remove_tree(const std::filesystem::path& path) noexcept {
  try {
    const auto parent = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    UniqueFd dir(open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) throw_errno("cannot open " + parent.string());
    remove_tree_at(dir.get(), path.filename(), path.string());
    return true;
  } catch (const std::exception&) {
    return false;  // callers say what could not be removed
  }
}

std::string read_small_file(int dirfd, const std::string& rel, uint64_t max_bytes,
                            const std::string& what) {
  UniqueFd fd(openat2_fd(dirfd, rel.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK, resolve_beneath));
  if (!fd) throw_errno("cannot open " + what);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + what);
  if (!S_ISREG(st.st_mode)) throw Error(what + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw Error(what + " is " + std::to_string(st.st_size) + " bytes, more than the " +
                std::to_string(max_bytes) + " allowed");
  std::string data = read_fd(fd.get(), max_bytes, what);
  if (data.size() != static_cast<uint64_t>(st.st_size)) throw Error(what + " changed size while it was read");
  return data;
}

TempDir::TempDir(const std::filesystem::path& beside) {
  std::string tmpl = beside.string() + ".tmp-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    throw_errno("cannot create a temporary directory beside " + beside.string(),
                "check that the parent directory exists and is writable");
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (!path_.empty()) remove_tree(path_);
}

}  // namespace sandboxrun::image::detail
