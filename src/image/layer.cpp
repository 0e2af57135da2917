// Layer application: libarchive reads the tar stream (two archives: the outer one only
// decompresses, so the inner tar reader's input can be hashed for the diff_id), and every entry
// is applied relative to a parent directory fd resolved beneath the root with openat2.
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include "confined.hpp"
#include "gunzip.hpp"
#include "sandboxrun/error.hpp"
#include "image/image_layer.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::image {

using detail::openat2_fd;
using detail::resolve_beneath;

namespace {

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveFree>;

std::string archive_message(archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown libarchive error";
}

// A path inside the image, normalised: no empty, "." or ".." components.
struct EntryPath {
  std::string path;    // "a/b/c"; "" is the root
  std::string parent;  // "a/b"
  std::string leaf;    // "c"
};

std::string join(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
}

// Outer archive callback: hands libarchive the compressed bytes from the ByteSource.
struct SourceContext {
  const ByteSource* source;
  std::exception_ptr error;
};

la_ssize_t read_source(archive* a, void* ctx, const void** buf) {
  auto* c = static_cast<SourceContext*>(ctx);
  try {
    const auto chunk = (*c->source)();
    *buf = chunk.data();
    return static_cast<la_ssize_t>(chunk.size());
  } catch (...) {
    c->error = std::current_exception();
    archive_set_error(a, EIO, "reading the layer blob failed");
    return -1;
  }
}

}  // namespace

// State for one layer: the entry being applied, the paths this layer wrote (whiteouts and
// opaque markers only hide what lower layers wrote), and a cached parent directory fd.
struct RootfsWriter::LayerState {
  RootfsWriter& w;
  const std::string& label;
  std::string entry;  // raw name of the entry being applied, for messages
  std::unordered_set<std::string> written;
  std::string cached_parent;
  UniqueFd cached_fd;
  bool cache_valid = false;

  // Outer (decompressing) archive -> inner (tar) archive plumbing.
  archive* outer = nullptr;
  std::optional<Hasher> diff_hash;
  std::exception_ptr stream_error;
  const std::exception_ptr* source_error = nullptr;  // what the ByteSource threw, if anything

  LayerState(RootfsWriter& writer, const std::string& layer_label) : w(writer), label(layer_label) {}

  [[noreturn]] void refuse(const std::string& why, const std::string& hint = {}) const {
    throw Error("layer " + label + " entry '" + entry.substr(0, 512) + "': " + why,
                hint.empty() ? "the image is corrupt or hostile; it was not unpacked" : hint);
  }
  [[noreturn]] void fail_errno(const std::string& what) const {
    throw_errno("layer " + label + " entry '" + entry.substr(0, 512) + "': " + what);
  }

  EntryPath normalize(std::string_view raw, const char* role) const {
    if (raw.empty()) refuse(std::string(role) + " is empty");
    if (raw.front() == '/') refuse(std::string(role) + " is an absolute path");
    EntryPath p;
    size_t start = 0;
    while (start <= raw.size()) {
      size_t end = raw.find('/', start);
      if (end == std::string_view::npos) end = raw.size();
      const auto comp = raw.substr(start, end - start);
      start = end + 1;
      if (comp.empty() || comp == ".") continue;
      if (comp == "..") refuse(std::string(role) + " contains '..'");
      p.parent = p.path;
      p.leaf = std::string(comp);
      p.path = join(p.path, comp);
    }
    return p;
  }

  // After any removal a cached parent fd may name a directory that has been replaced.
  void invalidate() { cache_valid = false; }

  [[noreturn]] void refuse_resolve(int err, const std::string& dir) const {
    if (err == EXDEV)
      refuse("'" + dir + "' leads outside the image (a symlink to an absolute path or through '..')");
    if (err == ELOOP) refuse("too many levels of symlinks in '" + dir + "'");
    if (err == ENOTDIR) refuse("'" + dir + "' is not a directory");
    errno = err;
    fail_errno("cannot open directory '" + dir + "'");
  }

  // The directory fd for `dir` (relative to the root), creating missing directories when asked.
  // Returns -1 when it does not exist and create is false.
  int dir_fd(const std::string& dir, bool create) {
    if (dir.empty()) return w.root_;
    if (cache_valid && dir == cached_parent) return cached_fd.get();
    UniqueFd fd(openat2_fd(w.root_, dir.c_str(), O_PATH | O_DIRECTORY, resolve_beneath));
    if (!fd) {
      const int err = errno;
      if (err != ENOENT) refuse_resolve(err, dir);
      if (!create) return -1;
      fd = create_dirs(dir);
    }
    cached_fd = std::move(fd);
    cached_parent = dir;
    cache_valid = true;
    return cached_fd.get();
  }

  // Creates the missing directories of `dir` (0755), each beneath the root.
  UniqueFd create_dirs(const std::string& dir) {
    UniqueFd fd;
    size_t pos = 0;
    while (pos <= dir.size()) {
      size_t end = dir.find('/', pos);
      if (end == std::string::npos) end = dir.size();
      const std::string prefix = dir.substr(0, end);
      const std::string comp = dir.substr(pos, end - pos);
      pos = end + 1;
      UniqueFd next(openat2_fd(w.root_, prefix.c_str(), O_PATH | O_DIRECTORY, resolve_beneath));
      if (!next) {
        if (errno != ENOENT) refuse_resolve(errno, prefix);
        const int parent = fd ? fd.get() : w.root_;
        if (mkdirat(parent, comp.c_str(), 0700) != 0) fail_errno("cannot create directory '" + prefix + "'");
        if (fchmodat(parent, comp.c_str(), 0755, 0) != 0) fail_errno("cannot chmod '" + prefix + "'");
        next.reset(openat(parent, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!next) fail_errno("cannot open directory '" + prefix + "'");
      }
      fd = std::move(next);
    }
    return fd;
  }

  void mark_written(std::string_view path) {
    while (!path.empty() && written.emplace(path).second) {
      const auto slash = path.rfind('/');
      if (slash == std::string_view::npos) break;
      path = path.substr(0, slash);
    }
  }

  // Forgets deferred metadata of a removed directory and everything below it.
  void forget_dirs(const std::string& path) {
    w.dirs_.erase(path);
    const std::string lo = path + "/";
    const std::string hi = path + "0";  // '0' follows '/'
    w.dirs_.erase(w.dirs_.lower_bound(lo), w.dirs_.lower_bound(hi));
  }

  // Removes whatever is at leaf in dirfd (a directory with all it holds).
  void remove_existing(int dirfd, const std::string& leaf, const std::string& path) {
    detail::remove_tree_at(dirfd, leaf, "'" + path + "' (layer " + label + ")");
    forget_dirs(path);
    invalidate();
  }

  void apply(archive* a, archive_entry* e) {
    const char* name = archive_entry_pathname(e);
    if (!name) name = archive_entry_pathname_utf8(e);
    entry = name ? name : "?";
    if (!name) refuse("its name cannot be decoded");
    if (++w.stats_.entries > w.options_.max_entries)
      refuse("more than " + std::to_string(w.options_.max_entries) + " entries in the image",
             "raise UnpackOptions::max_entries if the image is genuine");
    const EntryPath p = normalize(name, "the name");

    if (p.leaf.starts_with(".wh.")) return whiteout(p);
    const auto type = archive_entry_filetype(e);
    if (p.path.empty()) {
      if (type != AE_IFDIR || archive_entry_hardlink(e)) refuse("the image root must be a directory");
      record_dir(p.path, e);
      return;
    }
    if (const char* target = archive_entry_hardlink(e)) {
      mark_written(p.path);
      return hardlink(p, target);
    }
    switch (type) {
      case AE_IFDIR:
        mark_written(p.path);
        return directory(p, e);
      case AE_IFREG:
        mark_written(p.path);
        return regular(a, e, p);
      case AE_IFLNK:
        mark_written(p.path);
        return symlink(p, e);
      case AE_IFCHR:
      case AE_IFBLK:
      case AE_IFIFO:
      case AE_IFSOCK:
        ++w.stats_.skipped_devices;  // counted in the result; the caller reports it
        return;
      default:
        refuse("unsupported entry type " + std::to_string(type));
    }
  }

  void record_dir(const std::string& path, archive_entry* e) {
    w.dirs_[path] = DirMeta{static_cast<uint32_t>(archive_entry_perm(e) & 07777),
                            static_cast<uint32_t>(archive_entry_uid(e)),
                            static_cast<uint32_t>(archive_entry_gid(e)),
                            archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
  }

  void whiteout(const EntryPath& p) {
    if (p.leaf == ".wh..wh..opq") {
      const int fd = dir_fd(p.parent, false);
      if (fd >= 0) prune_lower(fd, p.parent);
      return;
    }
    const std::string hidden = p.leaf.substr(4);
    if (hidden.empty() || hidden == "." || hidden == ".." || hidden.starts_with(".wh."))
      refuse("'" + p.leaf + "' is not a valid whiteout");
    const int fd = dir_fd(p.parent, false);
    if (fd < 0) return;  // nothing below to hide
    const std::string path = join(p.parent, hidden);
    if (written.contains(path)) {
      // Written by this very layer: the whiteout hides only what lower layers had inside it.
      struct stat st {};
      if (fstatat(fd, hidden.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        UniqueFd sub(openat(fd, hidden.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) fail_errno("cannot open '" + path + "'");
        prune_lower(sub.get(), path);
      }
      return;
    }
    remove_existing(fd, hidden, path);
  }

  // Removes everything in the directory that this layer did not write (an opaque directory).
  void prune_lower(int dirfd, const std::string& dir) {
    const int list_fd = dirfd;
    std::vector<std::string> names;
    {
      UniqueFd dup_fd(openat(list_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      DIR* d = dup_fd ? fdopendir(dup_fd.get()) : nullptr;
      if (!d) fail_errno("cannot list '" + dir + "'");
      dup_fd.release();
      while (dirent* ent = readdir(d)) {
        const std::string_view n = ent->d_name;
        if (n != "." && n != "..") names.emplace_back(n);
      }
      closedir(d);
    }
    for (const auto& n : names) {
      const std::string path = join(dir, n);
      if (!written.contains(path)) {
        remove_existing(list_fd, n, path);
        continue;
      }
      struct stat st {};
      if (fstatat(list_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        UniqueFd sub(openat(list_fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) fail_errno("cannot open '" + path + "'");
        prune_lower(sub.get(), path);
      }
    }
  }

  void directory(const EntryPath& p, archive_entry* e) {
    const int fd = dir_fd(p.parent, true);
    if (mkdirat(fd, p.leaf.c_str(), 0700) != 0) {
      if (errno != EEXIST) fail_errno("cannot create directory");
      struct stat st {};
      if (fstatat(fd, p.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) fail_errno("cannot stat");
      if (!S_ISDIR(st.st_mode)) {  // a file or symlink below is replaced by the directory
        remove_existing(fd, p.leaf, p.path);
        if (mkdirat(fd, p.leaf.c_str(), 0700) != 0) fail_errno("cannot create directory");
      }
    }
    record_dir(p.path, e);
  }

  void set_times_at(int dirfd, const std::string& leaf, archive_entry* e) {
    const timespec ts[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)},
                            {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
    if (utimensat(dirfd, leaf.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) fail_errno("cannot set times");
  }

  void regular(archive* a, archive_entry* e, const EntryPath& p) {
    const uint64_t left = w.options_.max_unpacked_bytes - std::min(w.options_.max_unpacked_bytes, w.stream_bytes_);
    if (archive_entry_size_is_set(e) && static_cast<uint64_t>(archive_entry_size(e)) > left)
      refuse("declares " + std::to_string(archive_entry_size(e)) + " bytes, more than the " +
             format_size(left) + " left of the unpack limit");
    const int dir = dir_fd(p.parent, true);
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    UniqueFd fd(openat(dir, p.leaf.c_str(), flags, 0600));
    if (!fd && errno == EEXIST) {
      remove_existing(dir, p.leaf, p.path);
      fd.reset(openat(dir, p.leaf.c_str(), flags, 0600));
    }
    if (!fd) fail_errno("cannot create file");

    uint64_t end = 0;
    while (true) {
      const void* buf = nullptr;
      size_t len = 0;
      la_int64_t offset = 0;
      const int r = archive_read_data_block(a, &buf, &len, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) stream_failed(a);
      const auto* data = static_cast<const char*>(buf);
      while (len > 0) {
        const ssize_t n = pwrite(fd.get(), data, len, offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail_errno("cannot write file");
        data += n;
        len -= static_cast<size_t>(n);
        offset += n;
      }
      end = std::max(end, static_cast<uint64_t>(offset));
    }
    // A sparse file may end in a hole.
    if (archive_entry_size_is_set(e) && static_cast<uint64_t>(archive_entry_size(e)) > end &&
        ftruncate(fd.get(), archive_entry_size(e)) != 0)
      fail_errno("cannot extend sparse file");
    if (w.keep_owner_ && fchown(fd.get(), static_cast<uid_t>(archive_entry_uid(e)),
                                static_cast<gid_t>(archive_entry_gid(e))) != 0)
      fail_errno("cannot chown file");
    // After chown, which clears setuid/setgid bits.
    if (fchmod(fd.get(), archive_entry_perm(e) & 07777) != 0) fail_errno("cannot chmod file");
    const timespec ts[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)},
                            {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
    if (futimens(fd.get(), ts) != 0) fail_errno("cannot set file times");
    ++w.stats_.files;
    w.stats_.bytes += end;
  }

  void symlink(const EntryPath& p, archive_entry* e) {
    const char* target = archive_entry_symlink(e);
    if (!target) target = archive_entry_symlink_utf8(e);
    if (!target || !*target) refuse("symlink without a target");
    const int dir = dir_fd(p.parent, true);
    if (symlinkat(target, dir, p.leaf.c_str()) != 0) {
      if (errno != EEXIST) fail_errno("cannot create symlink");
      remove_existing(dir, p.leaf, p.path);
      if (symlinkat(target, dir, p.leaf.c_str()) != 0) fail_errno("cannot create symlink");
    }
    if (w.keep_owner_ &&
        fchownat(dir, p.leaf.c_str(), static_cast<uid_t>(archive_entry_uid(e)),
                 static_cast<gid_t>(archive_entry_gid(e)), AT_SYMLINK_NOFOLLOW) != 0)
      fail_errno("cannot chown symlink");
    set_times_at(dir, p.leaf, e);
  }

  void hardlink(const EntryPath& p, const char* raw_target) {
    const EntryPath t = normalize(raw_target, "the hardlink target");
    if (t.path.empty()) refuse("hardlink to the image root");
    // The target's directory is resolved on its own: the cache holds the entry's parent.
    UniqueFd target_dir;
    if (!t.parent.empty()) {
      target_dir.reset(openat2_fd(w.root_, t.parent.c_str(), O_PATH | O_DIRECTORY, resolve_beneath));
      if (!target_dir) {
        if (errno == ENOENT) refuse("hardlink target '" + t.path + "' does not exist");
        refuse_resolve(errno, t.parent);
      }
    }
    const int tdir = target_dir ? target_dir.get() : w.root_;
    struct stat tst {};
    if (fstatat(tdir, t.leaf.c_str(), &tst, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) refuse("hardlink target '" + t.path + "' does not exist");
      fail_errno("cannot stat hardlink target '" + t.path + "'");
    }
    if (S_ISDIR(tst.st_mode)) refuse("hardlink to directory '" + t.path + "'");

    const int dir = dir_fd(p.parent, true);
    if (linkat(tdir, t.leaf.c_str(), dir, p.leaf.c_str(), 0) == 0) return;
    if (errno != EEXIST) fail_errno("cannot create hardlink to '" + t.path + "'");
    struct stat st {};
    if (fstatat(dir, p.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == tst.st_dev &&
        st.st_ino == tst.st_ino)
      return;  // already that file
    remove_existing(dir, p.leaf, p.path);
    if (linkat(tdir, t.leaf.c_str(), dir, p.leaf.c_str(), 0) != 0)
      fail_errno("cannot create hardlink to '" + t.path + "'");
  }

  // The first cause wins: the source's own error (a bad gzip trailer, a blob that changed), then
  // ours, then libarchive's message.
  [[noreturn]] void stream_failed(archive* a) {
    if (source_error && *source_error) std::rethrow_exception(*source_error);
    if (stream_error) std::rethrow_exception(stream_error);
    throw Error("layer " + label + ": corrupt or truncated layer stream: " + archive_message(a),
                "the blob is damaged; fetch the image again");
  }

  // Inner archive callback: the next decompressed chunk from the outer archive, hashed.
  static la_ssize_t read_decompressed(archive* a, void* ctx, const void** buf) {
    auto* s = static_cast<LayerState*>(ctx);
    try {
      size_t len = 0;
      la_int64_t offset = 0;
      const int r = archive_read_data_block(s->outer, buf, &len, &offset);
      if (r == ARCHIVE_EOF) return 0;
      if (r < ARCHIVE_WARN) {
        archive_set_error(a, EIO, "%s", archive_message(s->outer).c_str());
        return -1;
      }
      s->diff_hash->update(*buf, len);
      s->w.stream_bytes_ += len;
      if (s->w.stream_bytes_ > s->w.options_.max_unpacked_bytes)
        throw Error("layer " + s->label + ": the uncompressed layers exceed the limit of " +
                        format_size(s->w.options_.max_unpacked_bytes),
                    "raise UnpackOptions::max_unpacked_bytes if the image is genuine");
      return static_cast<la_ssize_t>(len);
    } catch (...) {
      s->stream_error = std::current_exception();
      archive_set_error(a, EIO, "layer stream failed");
      return -1;
    }
  }
};

// Only root can give files the image's owners; anyone else's unpack owns every file.
RootfsWriter::RootfsWriter(int root, const UnpackOptions& options)
    : root_(root), options_(options), keep_owner_(geteuid() == 0) {}

RootfsWriter::~RootfsWriter() = default;

Digest RootfsWriter::apply_layer(const ByteSource& source, Compression compression,
                                 const std::string& label, std::string_view diff_algorithm) {
  LayerState state(*this, label);
  state.diff_hash.emplace(diff_algorithm);
  ++stats_.layers;

  // gzip is inflated by zlib ahead of libarchive, which would skip the trailer checks.
  std::optional<detail::Gunzip> gunzip;
  ByteSource inflated;
  if (compression == Compression::gzip) {
    gunzip.emplace(source, label);
    inflated = [&gunzip] { return gunzip->next(); };
  }
  SourceContext source_ctx{gunzip ? &inflated : &source, nullptr};
  ArchivePtr outer(archive_read_new());
  ArchivePtr inner(archive_read_new());
  if (!outer || !inner) throw Error("libarchive: out of memory");
  int wanted = ARCHIVE_FILTER_NONE;
  if (compression == Compression::zstd) {
    if (archive_read_support_filter_zstd(outer.get()) != ARCHIVE_OK)
      throw Error("libarchive was built without zstd support; cannot read layer " + label);
    wanted = ARCHIVE_FILTER_ZSTD;
  }
  archive_read_support_format_raw(outer.get());
  archive_entry* raw_entry = nullptr;
  if (archive_read_open(outer.get(), &source_ctx, nullptr, read_source, nullptr) != ARCHIVE_OK ||
      archive_read_next_header(outer.get(), &raw_entry) != ARCHIVE_OK) {
    if (source_ctx.error) std::rethrow_exception(source_ctx.error);
    throw Error("layer " + label + ": corrupt or truncated layer stream: " + archive_message(outer.get()),
                "the blob is empty or damaged; fetch the image again");
  }
  if (archive_filter_code(outer.get(), 0) != wanted)
    throw Error("layer " + label + ": the blob is not " + to_string(compression) +
                    " as its media type says",
                "the image manifest and the blob disagree; fetch the image again");
  state.outer = outer.get();
  state.source_error = &source_ctx.error;

  archive_read_support_format_tar(inner.get());
  if (archive_read_open(inner.get(), &state, nullptr, LayerState::read_decompressed, nullptr) !=
      ARCHIVE_OK) {
    state.stream_failed(inner.get());
  }
  while (true) {
    archive_entry* e = nullptr;
    const int r = archive_read_next_header(inner.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_RETRY) continue;
    if (r < ARCHIVE_WARN) {
      state.stream_failed(inner.get());
    }
    // ARCHIVE_WARN is mostly "can't be converted from UTF-8 to current locale": the name is then
    // used as the raw bytes it is, which is what an image means.
    state.apply(inner.get(), e);
  }
  // The diff_id covers the whole stream, including the padding after the end-of-archive blocks.
  const void* rest = nullptr;
  while (const la_ssize_t n = LayerState::read_decompressed(inner.get(), &state, &rest)) {
    if (n < 0) {
      state.stream_failed(inner.get());
    }
  }
  if (source_ctx.error) std::rethrow_exception(source_ctx.error);
  return state.diff_hash->finish();
}

void RootfsWriter::finish() {
  // Deepest first: a directory made read-only must not stop its children from being updated.
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    const auto& [path, meta] = *it;
    UniqueFd fd(path.empty() ? openat(root_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                             : openat2_fd(root_, path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                                          resolve_beneath));
    if (!fd) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // replaced since
      throw_errno("cannot open directory '" + path + "' to set its mode");
    }
    if (keep_owner_ && fchown(fd.get(), meta.uid, meta.gid) != 0)
      throw_errno("cannot chown directory '" + path + "'");
    if (fchmod(fd.get(), meta.mode) != 0) throw_errno("cannot chmod directory '" + path + "'");
    const timespec ts[2] = {{meta.mtime_sec, meta.mtime_nsec}, {meta.mtime_sec, meta.mtime_nsec}};
    if (futimens(fd.get(), ts) != 0) throw_errno("cannot set times of directory '" + path + "'");
  }
  if (!dirs_.contains("") && fchmodat(root_, ".", 0755, 0) != 0)
    throw_errno("cannot chmod the image root");
  dirs_.clear();
}

}  // namespace sandboxrun::image
