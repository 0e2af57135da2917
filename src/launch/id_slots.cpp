// Id slots: the claim (parent, before clone), the id maps (parent, before the child is released)
// and the switch to the namespace's root (child, first thing after release).
#include "sandboxrun/id_slots.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string_view>

#include "child_plan.hpp"
#include "id_slots_child.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

namespace {

// Opens (creating as needed) each component of `dir` below "/" without following symlinks.
// The directory holding the locks must be ours alone: anyone else able to write there could
// hold every slot (denial of service) or swap a lock file between our open and our flock.
UniqueFd open_private_dir(const std::filesystem::path& dir) {
  UniqueFd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_errno("open /");
  std::filesystem::path so_far = "/";
  for (const auto& part : dir.relative_path()) {
    so_far /= part;
    const std::string name = part.string();
    if (::mkdirat(fd.get(), name.c_str(), 0755) != 0 && errno != EEXIST)
      throw_errno("create the id slot directory " + so_far.string(), "check that /run is writable by root");
    UniqueFd next(::openat(fd.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next)
      throw_errno("open the id slot directory " + so_far.string() + " (without following symlinks)",
                  "remove whatever replaced that directory");
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) throw_errno("stat " + so_far.string());
    const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    if ((st.st_uid != 0 && st.st_uid != ::geteuid()) || (others_write && !sticky))
      throw Error("the id slot directory " + so_far.string() + " is owned or writable by another user",
                  "make it owned by root and not group- or world-writable (chmod go-w)");
    fd = std::move(next);
  }
  return fd;
}

uint32_t random_start(uint32_t slots) {
  uint32_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r) r = static_cast<uint32_t>(::getpid());
  return r % slots;
}

}  // namespace

const std::filesystem::path& default_slot_dir() {
  static const std::filesystem::path dir = "/run/sandboxrun/slots";
  return dir;
}

IdSlot IdSlot::claim(const IdRanges& ranges, const std::filesystem::path& dir) {
  const uint32_t slots = ranges.slots();
  if (slots == 0 || ranges.slot_size < 2)
    throw Error("id_ranges has no room for a slot of two ids", "set id_ranges.size >= id_ranges.slot_size >= 2");
  check_id_range(ranges);
  UniqueFd dfd = open_private_dir(dir);
  const uint32_t start = random_start(slots);
  for (uint32_t k = 0; k < slots; ++k) {
    const uint32_t slot = (start + k) % slots;
    const std::string name = std::to_string(slot);
    // O_PATH cannot be flock'ed: this is an ordinary open, symlinks refused.
    UniqueFd lock(::openat(dfd.get(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock) throw_errno("open the id slot lock " + (dir / name).string(), "remove that file if it is not a regular file");
    if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK || errno == EINTR) continue;
      throw_errno("lock the id slot " + (dir / name).string());
    }
    const uid_t first = ranges.base + slot * ranges.slot_size;
    return IdSlot(std::move(lock), IdSlotInfo{slot, first, first + 1});
  }
  throw Error("all " + std::to_string(slots) + " id slots in " + dir.string() + " are taken by live runs",
              "raise id_ranges.size in sandbox.yaml (and its /etc/subuid reservation), or run fewer sandboxes at once");
}

// A user-namespaced pod maps only its own ids (65,536 from 0): a range outside them cannot be
// used (setresuid to the slot's owner fails with EINVAL), and one inside them lies among the
// pod's accounts' ids, so no account may own one there.
void check_id_range(const IdRanges& ranges) {
  const uint64_t lo = ranges.base, hi = static_cast<uint64_t>(ranges.base) + ranges.size;
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi - 1);
  for (const char* file : {"/proc/self/uid_map", "/proc/self/gid_map"}) {
    std::string map;
    try {
      map = read_file(file);
    } catch (const Error&) {
      continue;  // no /proc: the clone says what is wrong
    }
    if (!launch::ids_mapped(map, lo, hi))
      throw Error("id_ranges " + range + " is not mapped in this user namespace (" + file + ": " +
                      map.substr(0, map.find_last_not_of('\n') + 1) + ")",
                  "set id_ranges.base and size inside the mapping (a user-namespaced pod maps 65536 ids from 0: "
                  "e.g. base: 61440, size: 2048), or run sandboxrun as a non-root user")
          .as(ErrorKind::config);
  }
  if (lo >= 65536) return;  // the config's range for hosts; doctor checks its accounts
  const auto owners = accounts_in_range(ranges);
  if (owners.empty()) return;
  std::string list;
  for (const auto& o : owners) list += (list.empty() ? "" : ", ") + o;
  throw Error("id_ranges " + range + " holds accounts: " + list,
              "move id_ranges.base to ids no account uses (an account there would share its ids with sandboxes)")
      .as(ErrorKind::config);
}

std::vector<std::string> accounts_in_range(const IdRanges& ranges) {
  const uint64_t lo = ranges.base, hi = static_cast<uint64_t>(ranges.base) + ranges.size;
  std::vector<std::string> found;
  // getpwent/getgrent: the whole NSS view (files, and LDAP or sssd where configured).
  ::setpwent();
  while (passwd* p = ::getpwent())
    if (p->pw_uid >= lo && p->pw_uid < hi) found.push_back(std::string(p->pw_name) + " (uid " + std::to_string(p->pw_uid) + ")");
  ::endpwent();
  ::setgrent();
  while (group* g = ::getgrent())
    if (g->gr_gid >= lo && g->gr_gid < hi) found.push_back(std::string(g->gr_name) + " (gid " + std::to_string(g->gr_gid) + ")");
  ::endgrent();
  return found;
}

namespace launch {

bool ids_mapped(std::string_view map, uint64_t lo, uint64_t hi) {
  // Lines "inside outside count"; a range is mapped when its ids are inside ones, extent by extent.
  uint64_t next = lo;
  for (bool progress = true; next < hi && progress;) {
    progress = false;
    std::string_view rest = map;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      const std::string line(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      unsigned long long inside = 0, outside = 0, count = 0;
      if (std::sscanf(line.c_str(), "%llu %llu %llu", &inside, &outside, &count) != 3) continue;
      if (next >= inside && next < inside + count) {
        next = inside + count;
        progress = true;
      }
    }
  }
  return next >= hi;
}

void write_slot_id_maps(pid_t pid, const IdSlotInfo& slot, uid_t inside_uid, gid_t inside_gid,
                        const UniqueFd& uid_map, const UniqueFd& gid_map) {
  const std::string base = "/proc/" + std::to_string(pid);
  const auto write_map = [&](const UniqueFd& opened, const char* name, unsigned inside) {
    const std::string map = "0 " + std::to_string(slot.host_root) + " 1\n" + std::to_string(inside) + " " +
                            std::to_string(slot.host_user) + " 1\n";
    if (!opened) return write_file(base + "/" + name, map);
    if (!write_all(opened.get(), map.data(), map.size())) throw_errno("cannot write " + base + "/" + name);
  };
  // Written by root (CAP_SETUID/CAP_SETGID over the parent namespace): setgroups stays allowed,
  // so pid 1 can drop the host root's supplementary groups, which would otherwise stay in force.
  write_map(uid_map, "uid_map", inside_uid);
  write_map(gid_map, "gid_map", inside_gid);
}

bool enter_id_slot(const ChildPlan& plan) {
  if (!plan.id_slot) return true;
  // Until now pid 1 runs as host root, an id that is unmapped in its namespace (files it made on
  // its own tmpfs would fail with EOVERFLOW). Becoming the namespace's root keeps its capabilities
  // (they belong to the namespace) and turns it into the slot's first host id.
  // Raw syscalls: glibc's set*id wrappers broadcast to every thread it believes exists, and this
  // process was cloned from a possibly multi-threaded launcher.
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) {
    report_error(plan, "setgroups in the id slot", errno, "drop the host's supplementary groups");
    return false;
  }
  if (::syscall(SYS_setresgid, 0, 0, 0) != 0 || ::syscall(SYS_setresuid, 0, 0, 0) != 0) {
    report_error(plan, "become root of the user namespace", errno, "setresuid/setresgid 0 (slot's first id)");
    return false;
  }
  return true;
}

}  // namespace launch
}  // namespace sandboxrun
