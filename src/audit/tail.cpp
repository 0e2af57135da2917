// The end of a log file: its last records read backwards (`sandboxrun audit tail`), and the cut
// of a torn last record after a crash (`sandboxrun audit repair`).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iterator>

#include "common/safe_open.hpp"
#include "internal.hpp"
#include "sandboxrun/audit_events.hpp"
#include "sandboxrun/audit_read.hpp"
#include "sandboxrun/audit_verify.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

AuditTail audit_tail(const std::filesystem::path& log, size_t n) {
  AuditTail out;
  const auto files = audit_log_files(log);
  std::vector<std::string> newest_first;
  for (auto f = files.rbegin(); f != files.rend() && newest_first.size() < n; ++f) {
    UniqueFd fd(::open(f->c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
      if (*f == log) throw_errno("cannot open " + f->string(), "check --log or the path in audit.yaml");
      continue;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + f->string());
    auto size = static_cast<uint64_t>(st.st_size);
    while (size > 0 && newest_first.size() < n) {
      audit::LastLine last = audit::read_last_line(fd.get(), size, *f);
      if (last.torn) out.torn.push_back({*f, last.offset});
      else newest_first.push_back(std::move(last.line));
      size = last.offset;
    }
  }
  out.lines.assign(std::make_move_iterator(newest_first.rbegin()), std::make_move_iterator(newest_first.rend()));
  return out;
}

std::optional<AuditRepair> AuditLog::repair() {
  const std::filesystem::path& log = path();
  AuditRepair r;
  std::string tail;
  {
    // The writers' lock, so that no append lands between the read and the cut.
    UniqueFd lock_fd = open_trusted_file(audit::lock_path(log), O_RDWR | O_CREAT, 0600);
    audit::FileLock lock(lock_fd.get(), audit::lock_path(log));
    UniqueFd fd = open_trusted_file(log, O_RDWR);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + log.string());
    audit::LastLine last = audit::read_last_line(fd.get(), static_cast<uint64_t>(st.st_size), log);
    if (!last.torn) return std::nullopt;
    tail = std::move(last.line);
    r.truncated_at = last.offset;
    r.truncated_bytes = tail.size();
    if (::ftruncate(fd.get(), static_cast<off_t>(r.truncated_at)) != 0 || ::fdatasync(fd.get()) != 0)
      throw_errno("cannot truncate " + log.string());
  }
  // The torn bytes are kept in the object store, so the repair loses nothing.
  r.tail = store_code(tail, "torn-tail");
  r.seq = audit::append_event(*this, "",
                              audit::RepairEvent{.truncated_at = r.truncated_at, .truncated_bytes = r.truncated_bytes,
                                                 .tail = r.tail},
                              /*durable=*/true);
  return r;
}

}  // namespace sandboxrun
