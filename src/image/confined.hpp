// Confined filesystem helpers: openat2 beneath a directory fd, tree removal that never follows a
// symlink, and a temporary directory removed unless released. Internal to sandboxrun_image.
#pragma once

#include <linux/openat2.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::image::detail {

// Resolution for every path inside an image: symlinks are followed only while they stay beneath
// the directory fd (absolute links and '..' escapes fail with EXDEV), never through /proc magic.
inline constexpr uint64_t resolve_beneath = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

// openat2(2) (glibc 2.36 has no wrapper); O_CLOEXEC is added. Returns -1 with errno set.
int openat2_fd(int dirfd, const char* path, int flags, uint64_t resolve, unsigned mode = 0) noexcept;

// Removes `name` in dirfd: a file, a symlink (never followed) or a whole directory tree. Uses two
// fds at most whatever the depth. A missing name is not an error. Throws Error naming `what`.
void remove_tree_at(int dirfd, const std::string& name, const std::string& what);

// remove_tree_at on a path's parent and file name; false (and nothing thrown) on failure.
bool remove_tree(const std::filesystem::path& path) noexcept;

// A regular file beneath dirfd, at most max_bytes; throws Error naming `what`.
std::string read_small_file(int dirfd, const std::string& rel, uint64_t max_bytes,
                            const std::string& what);

// mkdtemp("<beside>.tmp-XXXXXX"), removed with everything in it unless released.
class TempDir {
 public:
  explicit TempDir(const std::filesystem::path& beside);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

}  // namespace sandboxrun::image::detail
