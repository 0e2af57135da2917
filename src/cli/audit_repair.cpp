// `sandboxrun audit repair` (cut a torn last record after a crash) and `sandboxrun audit
// prune-objects` (delete stored objects no record names).
#include <unistd.h>

#include <iostream>

#include "audit_command.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun::cli::audit_cmd {

int prune_objects(const Resolved& r, const std::string& grace_text) {
  const auto grace = audit::parse_duration(grace_text);
  if (!grace) {
    std::cerr << "sandboxrun audit prune-objects: --grace wants a duration like 3600, 90s, 30m, 12h or 7d\n";
    return exit_code::usage;
  }
  // AuditLog::open would create what is missing: a wrong --log is said instead.
  if (::access(r.log.c_str(), F_OK) != 0) throw_errno("cannot prune the objects of " + r.log.string(), "check --log");
  AuditLog log = AuditLog::open(r.cfg, r.log);
  ObjectPruneResult p = log.prune_objects(*grace);
  std::cout << "pruned " << audit::objects_dir(r.log).string() << ": deleted " << p.deleted << " object(s) ("
            << format_size(p.deleted_bytes) << "), kept " << p.referenced << " named by the log and "
            << p.kept_recent << " younger than the grace period\n";
  return 0;
}

int repair(const Resolved& r) {
  if (::access(r.log.c_str(), F_OK) != 0) throw_errno("cannot repair " + r.log.string(), "check --log");
  AuditLog log = AuditLog::open(r.cfg, r.log);
  const std::optional<AuditRepair> done = log.repair();
  if (!done) {
    std::cout << "nothing to repair: " << r.log.string() << " ends with a complete record\n";
    return 0;
  }
  std::cout << "repaired " << r.log.string() << ": removed a torn record of " << done->truncated_bytes
            << " bytes at byte " << done->truncated_at << " (kept as objects/" << done->tail.sha256
            << "), recorded as seq " << done->seq << "\n";
  return 0;
}

}  // namespace sandboxrun::cli::audit_cmd
