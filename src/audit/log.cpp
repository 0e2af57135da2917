// The audit log writer: one record per write() under an exclusive flock on <log>.lock, hash
// chained to the previous record, with rotation, pruning, checkpoints and the code store.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "internal.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/audit_events.hpp"
#include "audit/audit_format.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "audit/lock_header.hpp"
#include "audit/objects.hpp"
#include "audit/run_ids.hpp"
#include "sandboxrun/error.hpp"
#include "common/safe_open.hpp"

namespace sandboxrun {

using audit::canonical;

namespace {

using Clock = std::chrono::steady_clock;

audit::HexDigest to_digest(std::string_view hex) {
  audit::HexDigest d;
  std::memcpy(d.data(), hex.data(), d.size());
  return d;
}

// The record the next append chains to.
struct Head {
  uint64_t seq = 0;
  audit::HexDigest hash = to_digest(audit::kGenesisPrev);
};

std::string to_string(const audit::HexDigest& d) { return std::string(d.data(), d.size()); }

void check_fields(const std::string& event, const nlohmann::json& fields) {
  if (event.empty()) throw Error("audit event name is empty");
  if (!fields.is_object()) throw Error("audit fields of event '" + event + "' must be a JSON object");
  // One pass over the (few) keys instead of a map lookup per reserved key.
  const nlohmann::json* code = nullptr;
  for (const auto& [key, value] : fields.get_ref<const nlohmann::json::object_t&>()) {
    if (key.size() > 6) continue;  // longer than every reserved key and "code"
    for (auto reserved : audit::kReservedKeys)
      if (key == reserved)
        throw Error("audit event '" + event + "' uses the reserved field '" + std::string(reserved) + "'");
    if (key == "code") code = &value;
  }
  if (code) {
    const auto& c = *code;
    auto member = [&c](const char* name) -> const nlohmann::json* {
      auto it = c.find(name);
      return it == c.end() ? nullptr : &*it;
    };
    const nlohmann::json *name = nullptr, *sha = nullptr, *size = nullptr, *stored = nullptr;
    if (c.is_object() && (c.size() == 3 || c.size() == 4)) {
      name = member("name");
      sha = member("sha256");
      size = member("size");
      stored = member("stored");
    }
    if (!name || !name->is_string() || !sha || !sha->is_string() ||
        sha->get_ref<const std::string&>().size() != 64 || !size || !size->is_number_integer() ||
        size->get<int64_t>() < 0 || (c.size() == 4 && (!stored || !stored->is_boolean())))
      throw Error("audit event '" + event + "': field 'code' must be {name, sha256, size[, stored]}",
                  "build it with AuditLog::store_code");
  }
}

using audit::format_header;
using audit::kLockHeaderLen;
using audit::LockBytes;
using audit::LockHeader;
using audit::parse_header;
using audit::random_generation;

}  // namespace

struct AuditLog::Impl {
  AuditConfig cfg;
  std::filesystem::path path;
  std::filesystem::path lock_file;
  std::filesystem::path anchor;
  audit::RecordHasher hasher;
  std::string kid;
  UniqueFd lock_fd;
  UniqueFd log_fd;
  dev_t dev = 0;      // of log_fd
  ino_t ino = 0;
  uint64_t size = 0;  // of log_fd, as of this append
  audit::LineScanner scanner;
  std::string line;   // the record being written (reused: no allocation per append)

  // The lock header as it was when this writer last made sure, under the lock, that the path
  // names log_fd's file. While the header still reads the same, no writer has rotated or
  // replaced the file, and the path need not be looked at (for path_check_interval).
  LockBytes confirmed{};
  LockHeader confirmed_header;
  bool have_confirmed = false;
  Clock::time_point confirmed_at;

  // What this writer last knew about the end of log_fd's file, to skip re-reading it while
  // nobody else appended (same size). Reset whenever log_fd changes.
  struct Cache {
    uint64_t size = 0;
    Head head;
    bool valid = false;
  } cache;
  // Time of the current file's first record, for age rotation (per inode).
  ino_t first_ts_ino = 0;
  std::optional<std::chrono::system_clock::time_point> first_ts;
  // Objects written since the last record: their directory entries are synced before the next
  // record, which may name them, is written.
  bool objects_unsynced = false;
  // Rotation pruned files: prune the objects they alone named, once the lock is released.
  bool objects_prune_due = false;

  bool syncs() const { return cfg.sync != AuditSync::none; }

  void put_object(std::string_view data, const std::string& sha256) {
    const auto dir = audit::objects_dir(path);
    const UniqueFd dir_fd = audit::ensure_private_dir(dir);
    if (audit::put_object(dir_fd.get(), dir, data, sha256, syncs())) objects_unsynced = syncs();
  }

  // Whether `path` exists, and which file it names. statx without timestamps: asking for them
  // would make the next write update the file's times at full resolution (multigrain
  // timestamps), a measurable cost per append.
  bool stat_path(dev_t& pdev, ino_t& pino) const {
    struct statx sx {};
    if (::statx(AT_FDCWD, path.c_str(), 0, STATX_INO, &sx) == 0) {
      pdev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
      pino = sx.stx_ino;
      return true;
    }
    if (errno == ENOSYS) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0) {
        pdev = st.st_dev;
        pino = st.st_ino;
        return true;
      }
    }
    if (errno != ENOENT) throw_errno("cannot stat " + path.string());
    return false;
  }

  // Opens the file at `path` (creating it) as log_fd.
  void reopen() {
    log_fd = audit::open_append(path);
    struct stat st {};
    if (::fstat(log_fd.get(), &st) != 0) throw_errno("cannot stat " + path.string());
    dev = st.st_dev;
    ino = st.st_ino;
    cache.valid = false;
  }

  // Makes log_fd the file at `path` (another writer may have rotated or re-created it, another
  // tool renamed or deleted it).
  void open_path() {
    dev_t pdev = 0;
    ino_t pino = 0;
    bool exists = stat_path(pdev, pino);
    if (log_fd && exists && pdev == dev && pino == ino) return;
    reopen();
    if (!exists && syncs()) audit::fsync_dir(path.parent_path());
  }

  size_t read_lock_header(char* buf) {
    ssize_t n;
    do {
      n = ::pread(lock_fd.get(), buf, kLockHeaderLen, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) throw_errno("cannot read audit lock file " + lock_file.string());
    return static_cast<size_t>(n);
  }

  // Writes the lock header; on failure sets errno and returns false (a short write leaves a
  // header nobody parses, which makes every writer look at the path: safe).
  bool write_lock_header(const LockHeader& h) {
    LockBytes bytes = format_header(h);
    ssize_t n;
    do {
      n = ::pwrite(lock_fd.get(), bytes.data(), bytes.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(bytes.size())) {
      if (n >= 0) errno = ENOSPC;
      return false;
    }
    confirmed = bytes;
    confirmed_header = h;
    return true;
  }

  // Under the lock: looks at the path (open_path) and makes the lock header name the file there,
  // moving to the next generation when it named another (so that the other writers look too).
  // `hdr` holds the `n` header bytes just read.
  void confirm(const char* hdr, size_t n) {
    open_path();
    LockHeader h;
    bool valid = parse_header(std::string_view(hdr, n), h);
    if (valid && h.dev == static_cast<uint64_t>(dev) && h.ino == static_cast<uint64_t>(ino)) {
      std::memcpy(confirmed.data(), hdr, kLockHeaderLen);
      confirmed_header = h;
    } else if (!write_lock_header({valid ? h.gen + 1 : random_generation(), static_cast<uint64_t>(dev),
                                   static_cast<uint64_t>(ino)})) {
      // Not fatal: this writer just looks at the path before every append until it can.
      have_confirmed = false;
      return;
    }
    have_confirmed = true;
    confirmed_at = Clock::now();
  }

  uint64_t current_size() {
    off_t end = ::lseek(log_fd.get(), 0, SEEK_END);
    if (end < 0) throw_errno("cannot seek in " + path.string());
    return static_cast<uint64_t>(end);
  }

  Head parse_head(const std::string& text, const std::filesystem::path& file) {
    audit::RecordFields f;
    std::string err;
    if (!audit::parse_record(text, scanner, f, err))
      throw Error("the last record of " + file.string() + " is unreadable: " + err,
                  "run `sandboxrun audit verify --log " + path.string() + "`");
    return Head{f.seq, to_digest(f.hash)};
  }

  // Under the lock: makes log_fd the file at the path and `size` its size, and returns the
  // record to chain to. Costs one pread (lock header) and one lseek while nothing changed.
  Head locate() {
    char hdr[kLockHeaderLen];
    size_t n = read_lock_header(hdr);
    bool same = have_confirmed && n == kLockHeaderLen &&
                std::memcmp(hdr, confirmed.data(), kLockHeaderLen) == 0 &&
                Clock::now() - confirmed_at < cfg.path_check_interval;
    if (!same) confirm(hdr, n);
    size = current_size();
    if (cache.valid && cache.size == size) return cache.head;
    if (same) {
      // The file changed under us (another writer appended, or it was truncated): look at the
      // path as well before reading its end.
      confirm(hdr, n);
      size = current_size();
    }
    return read_head();
  }

  // The record to chain to: the last line of the current file, else of the newest rotated
  // file, else genesis. Refuses to append after a torn line.
  Head read_head() {
    Head h;
    if (size > 0) {
      audit::LastLine last = audit::read_last_line(log_fd.get(), size, path);
      if (last.torn)
        throw Error("audit log " + path.string() + " ends with a torn record at byte " +
                        std::to_string(last.offset) + " (a writer crashed during an append)",
                    "run `sandboxrun audit repair --log " + path.string() + "`");
      h = parse_head(last.line, path);
    } else if (auto rotated = rotated_audit_files(path); !rotated.empty()) {
      UniqueFd fd = open_trusted_file(rotated.back(), O_RDONLY);
      struct stat rst {};
      if (::fstat(fd.get(), &rst) != 0) throw_errno("cannot stat " + rotated.back().string());
      audit::LastLine last = audit::read_last_line(fd.get(), static_cast<uint64_t>(rst.st_size), rotated.back());
      if (last.torn || last.line.empty())
        throw Error("rotated audit log " + rotated.back().string() + " does not end with a complete record",
                    "run `sandboxrun audit verify --log " + path.string() + "`");
      h = parse_head(last.line, rotated.back());
    }
    cache = Cache{size, h, true};
    return h;
  }

  bool rotation_due() {
    if (size == 0) return false;
    if (cfg.rotate_max_bytes != 0 && size >= cfg.rotate_max_bytes) return true;
    if (cfg.rotate_max_age.count() == 0) return false;
    if (first_ts_ino != ino || !first_ts) {
      first_ts_ino = ino;
      audit::RecordFields f;
      std::string err;
      std::string first = audit::read_first_line(log_fd.get(), path);
      first_ts = audit::parse_record(first, scanner, f, err) ? audit::parse_rfc3339(f.ts) : std::nullopt;
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
    // Next generation before the file leaves the path: a writer that still has it open looks at
    // the path at its next append, even if this process dies between here and the new header.
    // (Without a header this writer could not confirm, and starts a fresh generation.)
    uint64_t gen = have_confirmed ? confirmed_header.gen + 1 : random_generation();
    have_confirmed = false;
    if (!write_lock_header({gen, 0, 0}))
      throw_errno("cannot rotate " + path.string() + ": cannot write audit lock file " + lock_file.string());
    if (::rename(path.c_str(), target.c_str()) != 0) throw_errno("cannot rotate " + path.string());
    reopen();
    size = 0;
    if (write_lock_header({gen + 1, static_cast<uint64_t>(dev), static_cast<uint64_t>(ino)})) {
      have_confirmed = true;
      confirmed_at = Clock::now();
    }
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
    UniqueFd fd = open_trusted_file(newest_removed, O_RDONLY);
    struct stat removed_st {};
    if (::fstat(fd.get(), &removed_st) != 0) throw_errno("cannot stat " + newest_removed.string());
    audit::LastLine last =
        audit::read_last_line(fd.get(), static_cast<uint64_t>(removed_st.st_size), newest_removed);
    Head through = parse_head(last.line, newest_removed);
    audit::PruneEvent pruned{.through_seq = through.seq, .through_hash = to_string(through.hash)};
    for (size_t i = 0; i < remove; ++i) pruned.files.push_back(files[i].filename().string());
    write_locked(h, std::string(pruned.kEvent), "", pruned, true);
    for (size_t i = 0; i < remove; ++i)
      if (::unlink(files[i].c_str()) != 0 && errno != ENOENT) throw_errno("cannot prune " + files[i].string());
    audit::fsync_dir(path.parent_path());
    objects_prune_due = true;
  }

  // Builds the canonical record line (docs/audit.md) in `line`, with 64 zeros for its hash,
  // and returns where its `,"hash":"…"` member starts. The members the log fills in are merged
  // into the (sorted) event fields as they are written, which gives the bytes canonical() gives
  // for the whole record.
  size_t build_line(const Head& h, std::string_view event, std::string_view run_id,
                    const nlohmann::json& fields, audit::CanonicalInfo& info) {
    enum : int { kEvent, kHash, kKid, kPrev, kRunId, kSeq, kTs, kCount };
    static constexpr std::string_view kKeys[kCount] = {"event", "hash", "kid", "prev", "run_id", "seq", "ts"};
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    char ts[audit::kRfc3339Len];
    audit::format_rfc3339(now, ts);
    char seq[24];
    auto seq_end = std::to_chars(seq, seq + sizeof seq, h.seq + 1).ptr;
    size_t hash_pos = 0;
    auto reserved = [&](int m) {
      if (m == kHash) hash_pos = line.size() - 1;  // at the comma: "hash" is never first
      line += '"';
      line += kKeys[m];
      line += "\":";
      switch (m) {
        case kEvent: audit::append_canonical_string(line, event, info); break;
        case kHash:
          line += '"';
          line += audit::kGenesisPrev;
          line += '"';
          break;
        case kKid: audit::append_canonical_string(line, kid, info); break;
        case kPrev:
          line += '"';
          line.append(h.hash.data(), h.hash.size());
          line += '"';
          break;
        case kRunId: audit::append_canonical_string(line, run_id, info); break;
        case kSeq: line.append(seq, static_cast<size_t>(seq_end - seq)); break;
        default:
          line += '"';
          line.append(ts, sizeof ts);
          line += '"';
          break;
      }
    };
    const auto& members = fields.get_ref<const nlohmann::json::object_t&>();
    auto it = members.begin();
    int r = 0;
    bool first = true;
    line.clear();
    line += '{';
    for (;;) {
      if (r == kKid && !hasher.keyed()) ++r;
      bool field = it != members.end() && (r == kCount || std::string_view(it->first) < kKeys[r]);
      if (!field && r == kCount) break;
      if (!first) line += ',';
      first = false;
      if (field) {
        audit::append_canonical_string(line, it->first, info);
        line += ':';
        audit::append_canonical(line, it->second, info, 1);
        ++it;
      } else {
        reserved(r++);
      }
    }
    line += '}';
    return hash_pos;
  }

  uint64_t write_locked(Head& h, const std::string& event, const std::string& run_id,
                        const nlohmann::json& fields, bool durable) {
    if (objects_unsynced) {
      audit::fsync_dir(audit::objects_dir(path));
      objects_unsynced = false;
    }
    audit::CanonicalInfo info;
    size_t hash_pos = build_line(h, event, run_id, fields, info);
    if (line.size() > audit::kMaxRecordBytes)
      throw Error("audit record for event '" + event + "' is " + std::to_string(line.size()) +
                      " bytes, more than the " + std::to_string(audit::kMaxRecordBytes) + " allowed",
                  "record less detail (e.g. fewer findings)");
    if (info.fallback || info.depth > audit::kMaxDepth) {
      // Replaced invalid UTF-8 (keys may collide or reorder) or deep nesting: make sure verify
      // will read what is written.
      audit::RecordFields f;
      std::string err;
      if (!audit::parse_record(line, scanner, f, err))
        throw Error("audit record for event '" + event + "' is not canonical: " + err);
      if (f.hash_pos != hash_pos) throw Error("audit record for event '" + event + "': misplaced hash member");
    }
    auto [a, b] = audit::hashed_spans(line, hash_pos);
    audit::HexDigest digest = hasher.digest(a, b);
    std::memcpy(line.data() + hash_pos + 9, digest.data(), digest.size());
    line += '\n';

    ssize_t n;
    do {
      n = ::write(log_fd.get(), line.data(), line.size());
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(line.size())) {
      int err_no = n < 0 ? errno : ENOSPC;
      // Take a short write back so the file still ends with a complete record.
      if (n > 0 && ::ftruncate(log_fd.get(), static_cast<off_t>(size)) != 0) {
        throw_errno(err_no, "short write to audit log " + path.string() + " left a torn record",
                    "run `sandboxrun audit repair --log " + path.string() + "`");
      }
      throw_errno(err_no, "cannot append to audit log " + path.string());
    }
    h.seq += 1;
    h.hash = digest;
    size += line.size();
    cache = Cache{size, h, true};

    bool sync_now = durable || cfg.sync == AuditSync::each ||
                    (cfg.sync == AuditSync::batch && h.seq % cfg.sync_batch == 0);
    if (sync_now && ::fdatasync(log_fd.get()) != 0) throw_errno("cannot sync audit log " + path.string());
    if (cfg.checkpoint_every != 0 && h.seq % cfg.checkpoint_every == 0) checkpoint(h);
    return h.seq;
  }

  void checkpoint(const Head& h) {
    std::string hash = to_string(h.hash);
    nlohmann::json cp{{"file", path.filename().string()}, {"seq", h.seq}, {"hash", hash},
                      {"ts", audit::rfc3339_now()}};
    std::string text = canonical(cp) + "\n";
    UniqueFd fd = audit::open_append(anchor);
    if (!write_all(fd.get(), text.data(), text.size())) throw_errno("cannot write audit anchor " + anchor.string());
    if (syncs() && ::fdatasync(fd.get()) != 0) throw_errno("cannot sync audit anchor " + anchor.string());
    if (cfg.stream != CheckpointStream::none) {
      // The anchor's line with the log's path, marked for a log pipeline's filter. One write():
      // lines from concurrent writers never interleave.
      cp["log"] = path.string();
      cp["sandboxrun"] = "audit checkpoint";
      std::string streamed = canonical(cp) + "\n";
      const bool out = cfg.stream == CheckpointStream::out;
      if (!write_all(out ? STDOUT_FILENO : STDERR_FILENO, streamed.data(), streamed.size()))
        throw_errno(std::string("cannot write the audit checkpoint to standard ") + (out ? "output" : "error"),
                    "set checkpoint.stream in audit.yaml to where a log pipeline reads, or none");
    }
    if (cfg.syslog)
      ::syslog(LOG_AUTHPRIV | LOG_NOTICE, "sandboxrun audit checkpoint log=%s seq=%llu hash=%s",
               path.c_str(), static_cast<unsigned long long>(h.seq), hash.c_str());
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
  // Said as the audit log's failure: "cannot create directory /nonexistent" alone names no fix.
  try {
    const UniqueFd dir = audit::ensure_private_dir(impl->path.parent_path());
    impl->lock_file = audit::lock_path(impl->path);
    impl->lock_fd = open_trusted_at(dir.get(), impl->lock_file.filename().string(), O_RDWR | O_CREAT, 0600,
                                    impl->lock_file);
  } catch (const Error& e) {
    throw Error("cannot open the audit log " + impl->path.string() + ": " + e.what(),
                e.hint().empty() ? "pass --audit-log PATH (or set path: in audit.yaml) to a writable place" : e.hint())
        .as(ErrorKind::audit);
  }
  impl->open_path();  // the first append looks again, under the lock
  impl->line.reserve(4096);
  return AuditLog(std::move(impl));
}

uint64_t AuditLog::append(const std::string& event, const std::string& run_id, nlohmann::json fields,
                          bool durable) {
  if (fields.is_null()) fields = nlohmann::json::object();
  check_fields(event, fields);
  Impl& m = *impl_;
  uint64_t seq = 0;
  {
    audit::FileLock lock(m.lock_fd.get(), m.lock_file);
    Head h = m.locate();
    if (m.rotation_due()) m.rotate(h);
    seq = m.write_locked(h, event, run_id, fields, durable);
  }
  if (m.objects_prune_due) {
    m.objects_prune_due = false;
    // The record is written: a failure here is recorded, not thrown at the caller.
    std::error_code ec;
    if (std::filesystem::exists(audit::objects_dir(m.path), ec)) {
      try {
        prune_objects(audit::kObjectGrace);
      } catch (const Error& e) {
        audit::append_event(*this, "", audit::PruneObjectsEvent{.error = e.describe()});
      }
    }
  }
  return seq;
}

bool AuditLog::claim_run_id(const std::string& id) {
  Impl& m = *impl_;
  audit::FileLock lock(m.lock_fd.get(), m.lock_file);
  return audit::claim_run_id(m.path, id);
}

CodeRef AuditLog::code_ref(std::string_view code, std::string name) const {
  return CodeRef{std::move(name), audit::sha256_hex(code), code.size(), impl_->cfg.store_code};
}

CodeRef AuditLog::store_code(std::string_view code, std::string name) {
  CodeRef ref = code_ref(code, std::move(name));
  if (ref.stored) impl_->put_object(code, ref.sha256);
  return ref;
}

bool AuditLog::store_file(std::string_view data, const std::string& sha256, bool code) {
  if (!(code ? impl_->cfg.store_code : impl_->cfg.store_files)) return false;
  impl_->put_object(data, sha256);
  return true;
}

namespace {
std::string version_key(const std::optional<std::string>& caller) {
  return caller ? "caller:" + *caller : "uid:" + std::to_string(::getuid());
}
}  // namespace

std::optional<CodeDiff> AuditLog::track_version(const std::optional<std::string>& caller, const std::string& name,
                                                std::string_view code, const std::string& run_id) {
  if (!impl_->cfg.store_code) return std::nullopt;
  return audit::track_version(audit::objects_dir(impl_->path), version_key(caller), name, code, run_id);
}

std::optional<CodeDiff> AuditLog::version_diff(const std::optional<std::string>& caller, const std::string& name,
                                               std::string_view code) const {
  if (!impl_->cfg.store_code) return std::nullopt;
  return audit::diff_from_latest(audit::objects_dir(impl_->path), version_key(caller), name, code);
}

void AuditLog::set_latest_version(const std::optional<std::string>& caller, const std::string& name,
                                  const std::string& sha256, const std::string& run_id) {
  if (!impl_->cfg.store_code) return;
  audit::write_version(audit::objects_dir(impl_->path), version_key(caller), name, {sha256, run_id});
}

ObjectPruneResult AuditLog::prune_objects(std::chrono::seconds grace) {
  Impl& m = *impl_;
  ObjectPruneResult r = audit::prune_objects(m.path, m.lock_fd.get(), m.lock_file, grace);
  audit::append_event(*this, "",
                      audit::PruneObjectsEvent{.referenced = r.referenced, .deleted = r.deleted,
                                               .deleted_bytes = r.deleted_bytes, .kept_recent = r.kept_recent,
                                               .index_removed = r.index_removed,
                                               .grace_s = static_cast<uint64_t>(grace.count())});
  return r;
}

void AuditLog::sync() {
  if (::fdatasync(impl_->log_fd.get()) != 0) throw_errno("cannot sync audit log " + impl_->path.string());
}

const std::filesystem::path& AuditLog::path() const { return impl_->path; }

}  // namespace sandboxrun
