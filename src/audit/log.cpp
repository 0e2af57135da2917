// The audit log writer: one record per write() under an exclusive flock on <log>.lock, hash
// chained to the previous record, with rotation, pruning, checkpoints and the code store.
#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>

#include "internal.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/audit_format.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

using audit::canonical;

void to_json(nlohmann::json& j, const CodeRef& c) {
  j = nlohmann::json{{"name", c.name}, {"sha256", c.sha256}, {"size", c.size}};
}

namespace {

// The record the next append chains to.
struct Head {
  uint64_t seq = 0;
  std::string hash{audit::kGenesisPrev};
};

void check_fields(const std::string& event, const nlohmann::json& fields) {
  if (event.empty()) throw Error("audit event name is empty");
  if (!fields.is_object()) throw Error("audit fields of event '" + event + "' must be a JSON object");
  for (auto key : audit::kReservedKeys)
    if (fields.contains(key))
      throw Error("audit event '" + event + "' uses the reserved field '" + std::string(key) + "'");
  if (auto it = fields.find("code"); it != fields.end()) {
    const auto& c = *it;
    if (!c.is_object() || c.size() != 3 || !c.contains("name") || !c["name"].is_string() ||
        !c.contains("sha256") || !c["sha256"].is_string() || c["sha256"].get_ref<const std::string&>().size() != 64 ||
        !c.contains("size") || !c["size"].is_number_integer() || c["size"].get<int64_t>() < 0)
      throw Error("audit event '" + event + "': field 'code' must be {name, sha256, size}",
                  "build it with AuditLog::store_code");
  }
}

}  // namespace

struct AuditLog::Impl {
  AuditConfig cfg;
  std::filesystem::path path;
  std::filesystem::path anchor;
  audit::RecordHasher hasher;
  std::string kid;
  UniqueFd lock_fd;
  UniqueFd log_fd;
  audit::LineScanner scanner;
  struct stat st {};  // of log_fd, as of the last refresh() or write

  // What this process last knew about the file's end, to skip re-reading it while nobody
  // else appended (same inode, same size).
  struct Cache {
    dev_t dev = 0;
    ino_t ino = 0;
    uint64_t size = 0;
    Head head;
    bool valid = false;
  } cache;
  // Time of the current file's first record, for age rotation (per inode).
  ino_t first_ts_ino = 0;
  std::optional<std::chrono::system_clock::time_point> first_ts;

  bool syncs() const { return cfg.sync != AuditSync::none; }

  // Makes log_fd the file at `path` (another writer may have rotated or recreated it) and
  // `st` its current status. One stat() when nothing changed: same inode as our fd.
  void refresh() {
    struct stat by_path {};
    bool exists = ::stat(path.c_str(), &by_path) == 0;
    if (!exists && errno != ENOENT) throw_errno("cannot stat " + path.string());
    if (log_fd && exists && by_path.st_dev == st.st_dev && by_path.st_ino == st.st_ino) {
      st = by_path;
      return;
    }
    reopen();
    if (!exists && syncs()) audit::fsync_dir(path.parent_path());
  }

  void reopen() {
    log_fd = audit::open_append(path);
    if (::fstat(log_fd.get(), &st) != 0) throw_errno("cannot stat " + path.string());
    cache.valid = false;
  }

  Head parse_head(const std::string& line, const std::filesystem::path& file) {
    audit::RecordFields f;
    std::string err;
    if (!audit::parse_record(line, scanner, f, err))
      throw Error("the last record of " + file.string() + " is unreadable: " + err,
                  "run `sandboxrun audit verify --log " + path.string() + "`");
    return Head{f.seq, std::string(f.hash)};
  }

  // The record to chain to: the last line of the current file, else of the newest rotated
  // file, else genesis. Refuses to append after a torn line.
  Head head() {
    auto size = static_cast<uint64_t>(st.st_size);
    if (cache.valid && cache.dev == st.st_dev && cache.ino == st.st_ino && cache.size == size)
      return cache.head;
    Head h;
    if (size > 0) {
      audit::LastLine last = audit::read_last_line(log_fd.get(), size, path);
      if (last.torn)
        throw Error("audit log " + path.string() + " ends with a torn record at byte " +
                        std::to_string(last.offset) + " (a writer crashed during an append)",
                    "run `sandboxrun audit repair --log " + path.string() + "`");
      h = parse_head(last.line, path);
    } else if (auto rotated = rotated_audit_files(path); !rotated.empty()) {
      UniqueFd fd(::open(rotated.back().c_str(), O_RDONLY | O_CLOEXEC));
      struct stat rst {};
      if (!fd || ::fstat(fd.get(), &rst) != 0) throw_errno("cannot open " + rotated.back().string());
      audit::LastLine last = audit::read_last_line(fd.get(), static_cast<uint64_t>(rst.st_size), rotated.back());
      if (last.torn || last.line.empty())
        throw Error("rotated audit log " + rotated.back().string() + " does not end with a complete record",
                    "run `sandboxrun audit verify --log " + path.string() + "`");
      h = parse_head(last.line, rotated.back());
    }
    cache = Cache{st.st_dev, st.st_ino, size, h, true};
    return h;
  }

  bool rotation_due() {
    if (st.st_size == 0) return false;
    if (cfg.rotate_max_bytes != 0 && static_cast<uint64_t>(st.st_size) >= cfg.rotate_max_bytes) return true;
    if (cfg.rotate_max_age.count() == 0) return false;
    if (first_ts_ino != st.st_ino || !first_ts) {
      first_ts_ino = st.st_ino;
      audit::RecordFields f;
      std::string err;
      std::string line = audit::read_first_line(log_fd.get(), path);
      first_ts = audit::parse_record(line, scanner, f, err) ? audit::parse_rfc3339(f.ts) : std::nullopt;
      if (!first_ts) return false;  // verify reports a damaged first record; do not rotate on it
    }
    return std::chrono::system_clock::now() - *first_ts >= cfg.rotate_max_age;
  }

  // Renames the current file to <log>.<last seq>, starts a new one, then prunes.
  void rotate(Head& h) {
    auto target = audit::rotated_path(path, h.seq);
    if (::access(target.c_str(), F_OK) == 0)
      throw Error("cannot rotate " + path.string() + ": " + target.string() + " already exists",
                  "run `sandboxrun audit verify`; the rotated files are inconsistent");
    if (::rename(path.c_str(), target.c_str()) != 0) throw_errno("cannot rotate " + path.string());
    reopen();
    first_ts.reset();
    audit::fsync_dir(path.parent_path());
    prune(h);
  }

  // Deletes the oldest rotated files beyond keep_files / older than keep_age. The prune record
  // is written first, so a crash leaves extra files rather than an unexplained gap.
  void prune(Head& h) {
    auto files = rotated_audit_files(path);
    size_t remove = 0;
    while (remove < files.size()) {
      bool over_count = cfg.keep_files != 0 && files.size() - remove > cfg.keep_files;
      bool too_old = false;
      if (cfg.keep_age.count() != 0) {
        std::error_code ec;
        auto mtime = std::filesystem::last_write_time(files[remove], ec);
        auto age = std::filesystem::file_time_type::clock::now() - mtime;
        too_old = !ec && age >= cfg.keep_age;
      }
      if (!over_count && !too_old) break;
      ++remove;
    }
    if (remove == 0) return;
    const auto& newest_removed = files[remove - 1];
    UniqueFd fd(::open(newest_removed.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat removed_st {};
    if (!fd || ::fstat(fd.get(), &removed_st) != 0) throw_errno("cannot open " + newest_removed.string());
    audit::LastLine last =
        audit::read_last_line(fd.get(), static_cast<uint64_t>(removed_st.st_size), newest_removed);
    Head through = parse_head(last.line, newest_removed);
    nlohmann::json names = nlohmann::json::array();
    for (size_t i = 0; i < remove; ++i) names.push_back(files[i].filename().string());
    write_locked(h, "prune", "",
                 {{"files", names}, {"through_seq", through.seq}, {"through_hash", through.hash}}, true);
    for (size_t i = 0; i < remove; ++i)
      if (::unlink(files[i].c_str()) != 0 && errno != ENOENT) throw_errno("cannot prune " + files[i].string());
    audit::fsync_dir(path.parent_path());
  }

  uint64_t write_locked(Head& h, const std::string& event, const std::string& run_id,
                        nlohmann::json fields, bool durable) {
    fields["seq"] = h.seq + 1;
    fields["ts"] = audit::rfc3339_now();
    fields["run_id"] = run_id;
    fields["event"] = event;
    fields["prev"] = h.hash;
    if (hasher.keyed()) fields["kid"] = kid;
    // Serialize once with a placeholder hash, hash the line without its hash member (which is
    // canonical() of the record sans hash, see docs/audit.md), then fill the digest in place.
    fields["hash"] = audit::kGenesisPrev;
    std::string line = canonical(fields);
    if (line.size() > audit::kMaxRecordBytes)
      throw Error("audit record for event '" + event + "' is " + std::to_string(line.size()) +
                      " bytes, more than the " + std::to_string(audit::kMaxRecordBytes) + " allowed",
                  "record less detail (e.g. fewer findings)");
    audit::RecordFields f;
    std::string err;
    if (!audit::parse_record(line, scanner, f, err))
      throw Error("audit record for event '" + event + "' is not canonical: " + err);
    auto [a, b] = audit::hashed_spans(line, f.hash_pos);
    audit::HexDigest digest = hasher.digest(a, b);
    line.replace(f.hash_pos + 9, audit::kHashHex, digest.data(), digest.size());
    std::string hash(digest.data(), digest.size());
    line.push_back('\n');

    ssize_t n;
    do {
      n = ::write(log_fd.get(), line.data(), line.size());
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(line.size())) {
      int err_no = n < 0 ? errno : ENOSPC;
      // Take a short write back so the file still ends with a complete record.
      if (n > 0 && ::ftruncate(log_fd.get(), st.st_size) != 0) {
        throw_errno(err_no, "short write to audit log " + path.string() + " left a torn record",
                    "run `sandboxrun audit repair --log " + path.string() + "`");
      }
      throw_errno(err_no, "cannot append to audit log " + path.string());
    }
    h.seq += 1;
    h.hash = hash;
    st.st_size += static_cast<off_t>(line.size());
    cache = Cache{st.st_dev, st.st_ino, static_cast<uint64_t>(st.st_size), h, true};

    bool sync_now = durable || cfg.sync == AuditSync::each ||
                    (cfg.sync == AuditSync::batch && h.seq % cfg.sync_batch == 0);
    if (sync_now && ::fdatasync(log_fd.get()) != 0) throw_errno("cannot sync audit log " + path.string());
    if (cfg.checkpoint_every != 0 && h.seq % cfg.checkpoint_every == 0) checkpoint(h);
    return h.seq;
  }

  void checkpoint(const Head& h) {
    nlohmann::json cp{{"file", path.filename().string()}, {"seq", h.seq}, {"hash", h.hash},
                      {"ts", audit::rfc3339_now()}};
    std::string line = canonical(cp) + "\n";
    UniqueFd fd = audit::open_append(anchor);
    if (!write_all(fd.get(), line.data(), line.size())) throw_errno("cannot write audit anchor " + anchor.string());
    if (syncs() && ::fdatasync(fd.get()) != 0) throw_errno("cannot sync audit anchor " + anchor.string());
    if (cfg.syslog)
      ::syslog(LOG_AUTHPRIV | LOG_NOTICE, "sandboxrun audit checkpoint log=%s seq=%llu hash=%s",
               path.c_str(), static_cast<unsigned long long>(h.seq), h.hash.c_str());
  }
};

AuditLog::AuditLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AuditLog::AuditLog(AuditLog&&) noexcept = default;
AuditLog& AuditLog::operator=(AuditLog&&) noexcept = default;
AuditLog::~AuditLog() = default;

AuditLog AuditLog::open(const AuditConfig& cfg, std::optional<std::filesystem::path> override_path) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->path = override_path ? *override_path : cfg.path.empty() ? default_audit_log_path() : cfg.path;
  if (!impl->path.has_filename()) throw Error("audit log path " + impl->path.string() + " names no file");
  impl->path = std::filesystem::absolute(impl->path);
  impl->anchor = audit::anchor_path(cfg, impl->path);
  if (!cfg.key_file.empty()) {
    std::string key = load_audit_key(cfg.key_file);
    impl->hasher = audit::RecordHasher(key);
    impl->kid = audit::key_id(key);
  }
  audit::ensure_private_dir(impl->path.parent_path());
  auto lp = audit::lock_path(impl->path);
  impl->lock_fd = UniqueFd(::open(lp.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!impl->lock_fd) throw_errno("cannot open audit lock file " + lp.string());
  impl->refresh();
  return AuditLog(std::move(impl));
}

uint64_t AuditLog::append(const std::string& event, const std::string& run_id, nlohmann::json fields,
                          bool durable) {
  if (fields.is_null()) fields = nlohmann::json::object();
  check_fields(event, fields);
  Impl& m = *impl_;
  audit::FileLock lock(m.lock_fd.get(), audit::lock_path(m.path));
  m.refresh();
  Head h = m.head();
  if (m.rotation_due()) m.rotate(h);
  return m.write_locked(h, event, run_id, std::move(fields), durable);
}

CodeRef AuditLog::store_code(std::string_view code, std::string name) {
  CodeRef ref{std::move(name), audit::sha256_hex(code), code.size()};
  if (!impl_->cfg.store_code) return ref;
  auto dir = audit::objects_dir(impl_->path);
  audit::ensure_private_dir(dir);
  auto target = dir / ref.sha256;
  if (::access(target.c_str(), F_OK) == 0) return ref;
  auto tmp = dir / (".tmp-" + ref.sha256 + "-" + std::to_string(::getpid()));
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) throw_errno("cannot create " + tmp.string());
    if (!write_all(fd.get(), code.data(), code.size())) throw_errno("cannot write " + tmp.string());
    if (impl_->syncs() && ::fsync(fd.get()) != 0) throw_errno("cannot sync " + tmp.string());
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(err, "cannot store code object " + target.string());
  }
  if (impl_->syncs()) audit::fsync_dir(dir);
  return ref;
}

void AuditLog::sync() {
  if (::fdatasync(impl_->log_fd.get()) != 0) throw_errno("cannot sync audit log " + impl_->path.string());
}

const std::filesystem::path& AuditLog::path() const { return impl_->path; }

}  // namespace sandboxrun
