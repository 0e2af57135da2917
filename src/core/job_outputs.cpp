// --output: after the run, regular files under the sandbox's /work (reached through an fd the
// sandbox's pid 1 passed us, which keeps the tmpfs alive after its namespace is gone) are
// copied into the output directory. The sandbox wrote that tree, so every name in it is
// hostile: nothing is followed on the way in, and nothing is created outside the directory.
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "common/printable.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/job_io.hpp"
#include "common/sha256.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun {

namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxQuoted = 512;  // bytes of a skipped name or reason kept for the report

// Opens `rel` strictly beneath `dir`: no "..", no absolute path, no symlink, no magic link.
int open_beneath(int dir, const std::string& rel, uint64_t flags, uint64_t mode = 0) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how));
}

// Names a walk reads at most, all directories together: every name listed is held until its
// directory is done, so a program that makes 300,000 files must not cost the launcher 100 MB
// (20,000 names of at most 255 bytes: 5 MB).
constexpr size_t kMaxNamesWalked = 20000;

// The directory's names, sorted; at most `budget` of them (which it lowers by the count read).
std::vector<std::string> list_dir(int dir, size_t* budget = nullptr) {
  std::vector<std::string> names;
  UniqueFd listing(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* d = listing ? ::fdopendir(listing.get()) : nullptr;
  if (!d) throw_errno("cannot list the sandbox's /work");
  listing.release();  // owned by d
  while (dirent* e = ::readdir(d)) {
    if (budget && *budget == 0) break;
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    names.push_back(std::move(n));
    if (budget) --*budget;
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

class Collector {
 public:
  Collector(int out_dir, const std::vector<InputFile>& unchanged, const OutputLimits& limits,
            const std::function<void(const FileRecord&, std::string_view)>& on_copied)
      : out_dir_(out_dir), limits_(limits), on_copied_(on_copied) {
    for (const auto& f : unchanged) inputs_[f.path] = &f;
  }

  void walk(int dir, const std::string& rel_dir, int depth) {
    const std::vector<std::string> names = list_dir(dir, &names_left_);
    if (names_left_ == 0 && !walk_cut_) {
      walk_cut_ = true;
      skip(rel_dir.empty() ? "." : rel_dir,
           "more than " + std::to_string(kMaxNamesWalked) + " names under /work: the rest were not looked at", true);
    }
    for (const auto& name : names) {
      const std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
      if (!plain_relative_path(rel)) {
        skip(rel, "the name is not a plain relative path");
        continue;
      }
      struct stat st {};
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        skip(rel, std::string("cannot stat: ") + std::strerror(errno));
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        char target[256];
        ssize_t n = ::readlinkat(dir, name.c_str(), target, sizeof target - 1);
        target[n > 0 ? n : 0] = 0;
        skip(rel, std::string("symbolic link to ") + target + " (recorded, not followed)");
      } else if (S_ISDIR(st.st_mode)) {
        if (depth + 1 >= kMaxDepth) {
          skip(rel, "nested deeper than " + std::to_string(kMaxDepth) + " directories");
          continue;
        }
        UniqueFd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) skip(rel, std::string("cannot open directory: ") + std::strerror(errno));
        else walk(sub.get(), rel, depth + 1);
      } else if (S_ISREG(st.st_mode)) {
        copy(dir, name, rel, st);
      } else {
        skip(rel, S_ISFIFO(st.st_mode) ? "a FIFO (skipped)" : S_ISSOCK(st.st_mode) ? "a socket (skipped)"
                                                                                     : "a device (skipped)");
      }
    }
  }

  OutputManifest take() { return std::move(m_); }

 private:
  // Listed up to kMaxListed of each kind, so that a flood of files over a cap cannot hide the
  // symlinks and FIFOs behind it (nor the other way round).
  void skip(const std::string& rel, std::string reason, bool cap = false) {
    if (cap) m_.truncated = true;
    ++m_.skipped_count;
    size_t& listed = cap ? listed_over_cap_ : listed_other_;
    if (listed < OutputManifest::kMaxListed) {
      ++listed;
      // Both quote names the program chose: never raw bytes on the terminal or in the records.
      m_.skipped.push_back({printable(rel, kMaxQuoted, Printable::utf8), printable(reason, kMaxQuoted, Printable::utf8)});
    }
  }

  void copy(int dir, const std::string& name, const std::string& rel, const struct stat& st) {
    const auto size = static_cast<uint64_t>(st.st_size);
    auto in = inputs_.find(rel);
    const bool maybe_unchanged = in != inputs_.end() && in->second->data.size() == size;
    if (path_bytes_ + rel.size() > OutputManifest::kMaxPathBytes)
      return skip(rel, "over the manifest's " + std::to_string(OutputManifest::kMaxPathBytes) + " bytes of paths", true);
    if (!maybe_unchanged) {
      if (m_.files.size() >= limits_.files)
        return skip(rel, "over output_files_limit (" + std::to_string(limits_.files) + " files)", true);
      if (bytes_ + size > limits_.bytes)
        return skip(rel, format_size(size) + ": over output_bytes_limit (" + format_size(limits_.bytes) + ")", true);
    }
    UniqueFd src(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!src) return skip(rel, std::string("cannot open: ") + std::strerror(errno));
    // Everything in the sandbox is dead by now, so the size cannot grow; the bound is for safety.
    std::string data = read_fd(src.get(), maybe_unchanged ? size : limits_.bytes - bytes_, "/work/" + rel);
    if (maybe_unchanged && data == in->second->data) return;  // an input, left as it was
    if (maybe_unchanged && (m_.files.size() >= limits_.files || bytes_ + size > limits_.bytes))
      return skip(rel, "over the output caps (output_files_limit / output_bytes_limit)", true);
    make_parents(rel);
    const auto mode = static_cast<uint32_t>(st.st_mode & 0777);
    UniqueFd dst(open_beneath(out_dir_, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode & 0755));
    if (!dst) throw_errno("cannot create output file " + rel, "check that the output directory is writable");
    if (!write_all(dst.get(), data.data(), data.size())) throw_errno("cannot write output file " + rel);
    bytes_ += data.size();
    path_bytes_ += rel.size();
    m_.files.push_back({rel, data.size(), sha256_hex(data), mode});
    if (on_copied_) on_copied_(m_.files.back(), data);
  }

  // mkdir -p of rel's directories beneath the output directory, each step without following
  // anything (the tree is ours: we created every directory in it).
  void make_parents(const std::string& rel) {
    for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
      const std::string prefix = rel.substr(0, slash);
      if (made_.count(prefix)) continue;
      const auto parent_end = prefix.rfind('/');
      UniqueFd parent(parent_end == std::string::npos
                          ? ::fcntl(out_dir_, F_DUPFD_CLOEXEC, 0)
                          : open_beneath(out_dir_, prefix.substr(0, parent_end), O_PATH | O_DIRECTORY));
      const std::string leaf = parent_end == std::string::npos ? prefix : prefix.substr(parent_end + 1);
      if (!parent || (::mkdirat(parent.get(), leaf.c_str(), 0755) != 0 && errno != EEXIST))
        throw_errno("cannot create output directory " + prefix);
      made_.insert(prefix);
    }
  }

  int out_dir_;
  const OutputLimits& limits_;
  const std::function<void(const FileRecord&, std::string_view)>& on_copied_;
  std::map<std::string, const InputFile*> inputs_;
  std::set<std::string> made_;
  uint64_t bytes_ = 0;
  size_t path_bytes_ = 0;
  size_t listed_over_cap_ = 0, listed_other_ = 0;
  size_t names_left_ = kMaxNamesWalked;
  bool walk_cut_ = false;
  OutputManifest m_;
};

}  // namespace

UniqueFd open_output_dir(const std::filesystem::path& dir) {
  const std::string hint = "pass --output a new directory, or an empty one";
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw_errno("cannot create output directory " + dir.string(), "its parent directory must exist and be writable");
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw_errno("cannot open output directory " + dir.string(), errno == ELOOP || errno == ENOTDIR ? hint : "");
  if (!list_dir(fd.get()).empty()) throw Error("output directory " + dir.string() + " is not empty", hint);
  // Reopened through openat2 so that what we hold is the directory itself, resolved beneath.
  UniqueFd beneath(open_beneath(fd.get(), ".", O_RDONLY | O_DIRECTORY));
  if (!beneath) throw_errno("cannot open output directory " + dir.string() + " with openat2",
                            "sandboxrun needs Linux 5.6 or later for --output");
  return beneath;
}

OutputManifest collect_outputs(int work_dir, int out_dir, const std::vector<InputFile>& unchanged,
                               const OutputLimits& limits,
                               const std::function<void(const FileRecord&, std::string_view)>& on_copied) {
  Collector c(out_dir, unchanged, limits, on_copied);
  OutputManifest m;
  try {
    c.walk(work_dir, "", 0);
    m = c.take();
  } catch (const Error& e) {
    m = c.take();
    m.error = e.describe();
  }
  return m;
}

}  // namespace sandboxrun
