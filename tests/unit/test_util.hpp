// Helpers shared by the unit tests: a scratch directory, and whole-file put/slurp.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "sandboxrun/fd.hpp"

namespace test_util {

namespace fs = std::filesystem;

// How many members aggregate T has: the most initializers T{...} accepts, each of which converts
// to any member's type. For settings caches: a member added to a struct but not to its `fields`
// list would be parsed, then lost by the cache on the next run.
struct AnyMember {
  template <class M>
  operator M() const;  // declared only: used in unevaluated checks
};
template <class T, class... A>
constexpr size_t member_count() {
  if constexpr (requires { T{A{}..., AnyMember{}}; }) return member_count<T, A..., AnyMember>();
  else return sizeof...(A);
}

// Writes `content` to `p`, creating it (with `mode`, less the umask) and missing parent directories.
inline void put(const fs::path& p, const std::string& content, mode_t mode = 0644) {
  fs::create_directories(p.parent_path());
  sandboxrun::UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  ASSERT_TRUE(fd) << "cannot create " << p << ": " << std::strerror(errno);
  ASSERT_TRUE(sandboxrun::write_all(fd.get(), content.data(), content.size())) << "cannot write " << p;
}

// The exact bytes of `p`; throws sandboxrun::Error (failing the test) when it cannot be read.
inline std::string slurp(const fs::path& p) { return sandboxrun::read_file(p.string()); }

// slurp() without the trailing newlines: the value of a one-line (e.g. cgroup control) file.
inline std::string slurp_value(const fs::path& p) {
  std::string s = slurp(p);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it, read-only
// subdirectories included, when the test is done. Not named sandboxrun-*: the integration tests
// count /tmp/sandboxrun-* entries as the launcher's leftovers.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "unit-test.XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec); it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory(ec) && !it->is_symlink(ec))
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  // put()s `name` inside the directory and returns its path.
  fs::path write(const std::string& name, const std::string& content, mode_t mode = 0644) const {
    put(path_ / name, content, mode);
    return path_ / name;
  }

 private:
  fs::path path_;
};

}  // namespace test_util
