// --input: files and directory trees read on the host into memory before anything starts, so
// the sandbox gets a copy (never a bind mount) and a later change on the host cannot reach in.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/utf8.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/job_io.hpp"
#include "common/sha256.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun {

namespace {

// Deeper trees are refused rather than walked: recursion stays bounded whatever the input.
constexpr int kMaxDepth = 32;

const char* kind_of(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file or directory";
}

struct InputReader {
  const std::filesystem::path& src;  // the --input argument, for messages
  const InputLimits& limits;
  std::vector<InputFile>& into;
  uint64_t total = 0;

  std::string arg() const { return "--input " + src.string(); }

  // `leaf` is opened relative to `parent` (AT_FDCWD and the whole path at the top).
  void add(int parent, const std::string& leaf, const std::string& host, const std::string& rel, int depth) {
    struct stat st {};
    if (::fstatat(parent, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      throw_errno(arg() + ": cannot read " + host, "check that it exists and is readable");
    if (S_ISDIR(st.st_mode)) return add_dir(parent, leaf, host, rel, depth);
    if (!S_ISREG(st.st_mode))
      throw Error(arg() + ": " + host + " is " + kind_of(st.st_mode),
                  "inputs are copied, never followed: pass regular files and directories only");
    add_file(parent, leaf, host, rel);
  }

  void add_file(int parent, const std::string& leaf, const std::string& host, const std::string& rel) {
    if (std::any_of(into.begin(), into.end(), [&](const InputFile& f) { return f.path == rel; }))
      throw Error(arg() + ": two inputs would be /work/" + rel, "give one of them another name with SRC:NAME");
    if (into.size() + 1 > limits.files)
      throw Error(arg() + ": " + host + " would be input file number " + std::to_string(into.size() + 1) +
                      "; input_files_limit is " + std::to_string(limits.files),
                  "pass fewer files, or raise input_files_limit in sandbox.yaml");
    // O_NONBLOCK: if the file was swapped for a FIFO since the stat, the open cannot hang.
    UniqueFd fd(::openat(parent, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) throw_errno(arg() + ": cannot open " + host, errno == ELOOP ? "it is a symbolic link" : "");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
      throw Error(arg() + ": " + host + " changed while it was read", "try again");
    const uint64_t room = limits.bytes - std::min(limits.bytes, total);
    InputFile f;
    f.path = rel;
    f.mode = static_cast<uint32_t>(st.st_mode & 0755);  // no setuid, no group/other write
    f.data = read_fd(fd.get(), room, arg() + ": " + host,
                     "the inputs together may hold input_limit " + format_size(limits.bytes) +
                         "; pass less, or raise input_limit in sandbox.yaml");
    total += f.data.size();
    into.push_back(std::move(f));
  }

  void add_dir(int parent, const std::string& leaf, const std::string& host, const std::string& rel, int depth) {
    if (depth >= kMaxDepth)
      throw Error(arg() + ": " + host + " is nested more than " + std::to_string(kMaxDepth) + " directories deep",
                  "pass a shallower tree");
    UniqueFd dir(::openat(parent, leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir) throw_errno(arg() + ": cannot open directory " + host);
    UniqueFd listing(::dup(dir.get()));
    DIR* d = listing ? ::fdopendir(listing.get()) : nullptr;
    if (!d) throw_errno(arg() + ": cannot list " + host);
    listing.release();  // owned by d from here
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());  // the same manifest for the same tree
    for (const auto& n : names) {
      const std::string child_rel = rel + "/" + n;
      if (!plain_relative_path(child_rel))
        throw Error(arg() + ": " + host + "/" + n + " has a name that is not a plain relative path",
                    "rename it (no control characters)");
      add(dir.get(), n, host + "/" + n, child_rel, depth + 1);
    }
  }
};

}  // namespace

bool plain_relative_path(std::string_view path) noexcept {
  if (path.empty() || path.size() > 4096 || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view c = path.substr(start, end - start);
    if (c.empty() || c == "." || c == ".." || c.size() > 255) return false;
    for (unsigned char ch : c)
      if (ch < 0x20 || ch == 0x7f) return false;
    // JSON and the audit log would carry another byte string in place of the name.
    if (!valid_utf8(c)) return false;
    start = end + 1;
  }
  return true;
}

std::pair<std::filesystem::path, std::optional<std::string>> parse_input_arg(const std::string& arg) {
  // A path may hold a ':' itself: one that exists is a path. Otherwise what follows the last ':'
  // is NAME, and when only what precedes it exists, an unusable NAME is the error, not a missing
  // file called "data.csv:../x".
  std::error_code ec;
  const auto colon = arg.rfind(':');
  if (colon == std::string::npos || colon == 0 || std::filesystem::exists(std::filesystem::symlink_status(arg, ec)))
    return {arg, std::nullopt};
  if (plain_relative_path(std::string_view(arg).substr(colon + 1))) return {arg.substr(0, colon), arg.substr(colon + 1)};
  if (std::filesystem::exists(std::filesystem::symlink_status(arg.substr(0, colon), ec)))
    throw Error("--input " + arg + ": NAME '" + arg.substr(colon + 1) + "' is not a plain relative path inside /work",
                "NAME is where the file goes under /work, relative and without \"..\", e.g. data.csv or pkg/util.py");
  return {arg, std::nullopt};
}

void load_input(const std::filesystem::path& src, const std::optional<std::string>& name, const InputLimits& limits,
                std::vector<InputFile>& into) {
  std::string base = name ? *name : src.lexically_normal().filename().string();
  if (base.empty()) base = src.lexically_normal().parent_path().filename().string();  // "dir/"
  if (!plain_relative_path(base))
    throw Error("--input " + src.string() + ": '" + base + "' is not a plain relative name inside /work",
                "name it with SRC:NAME, e.g. data.csv or pkg/util.py");
  InputReader r{src, limits, into};
  for (const auto& f : into) r.total += f.data.size();
  // The argument itself may not be a symlink either: what is assessed and copied is what it names.
  std::string top = src.string();
  while (top.size() > 1 && top.back() == '/') top.pop_back();
  r.add(AT_FDCWD, top, src.string(), base, 0);
}

FileRecord record_of(const InputFile& f) {
  return {f.path, f.data.size(), sha256_hex(f.data), f.mode};
}

}  // namespace sandboxrun
