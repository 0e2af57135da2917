// Host discovery: which cgroup hierarchies are mounted where, which controllers we may use,
// and where this run's cgroups go (the Plan). Also `doctor`'s probe_cgroups.
//
// Backend selection (plan_cgroups):
//  1. cgroup v2, when a cgroup2 mount offers the memory and pids controllers. The parent is
//     CgroupSettings.parent (relative to the mount) when set; else our own cgroup when it is
//     delegated to us (systemd Delegate=yes marks it with the trusted.delegate / user.delegate
//     xattr; for non-root, a cgroup we may write to); if that cgroup is our kLauncherLeaf, its
//     parent (a previous run moved us there); our cgroup namespace's root when it is a
//     container's writable cgroup (namespace_subtree); else, for root, "/sandboxrun" under the
//     mount.
//  2. cgroup v1, when v1 hierarchies offer memory and pids: "<hierarchy>/<parent or
//     sandboxrun>" for memory, pids, cpu, cpuacct (and freezer). A cgroup2 mount without
//     controllers (hybrid host) becomes the "unified" companion: the run gets a cgroup there
//     too, for cgroup.kill and populated events, as systemd does on hybrid hosts.
//  3. Otherwise "none", with what is missing and the fix.
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cgroup_impl.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cgroup_detail {

namespace {

constexpr const char* kFixHint =
    "run as root, or from a systemd unit with Delegate=yes, or set cgroup.parent to a "
    "delegated cgroup";

// Whether `dir` belongs to a uid our user namespace does not map (stat shows the overflow uid):
// a container's cgroupfs, which the runtime's ids own, not the container's root.
bool owner_unmapped(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return false;
  uid_t overflow = 65534;
  std::ifstream("/proc/sys/kernel/overflowuid") >> overflow;
  return st.st_uid == overflow;
}

// Why `existing` cannot take our cgroups: a read-only mount, or one owned by ids outside our user
// namespace, is a container's cgroupfs, whose fix is the container's setting; otherwise
// permissions.
std::string not_writable(const std::string& existing) {
  const bool read_only = errno == EROFS;
  if (read_only || owner_unmapped(existing))
    return existing + (read_only ? " is on a read-only mount" : " belongs to ids this user namespace does not map") +
           " (a container's /sys/fs/cgroup: give the container a "
                      "writable cgroup namespace, e.g. podman --cgroupns=private --security-opt unmask=/sys/fs/cgroup "
                      "on cgroup v2, CRI-O's cgroup2-mount-hierarchy-rw annotation, or privileged; or run one "
                      "sandbox per container with cgroup.mode: enclosing and the container's limits)";
  return existing + " is not writable by uid " + std::to_string(::geteuid()) + " (" + kFixHint + ")";
}

// mountinfo escapes blanks and backslashes as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && s.size() - i >= 4) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        ok = ok && c >= '0' && c <= '7';
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// "a/b" from a configured parent; throws on ".." or empty components.
std::string clean_relative(const std::string& parent) {
  std::string out;
  for (const auto& part : std::filesystem::path(parent)) {
    std::string p = part.string();
    if (p.empty() || p == "/" || p == ".") continue;
    if (p == "..") throw Error("cgroup.parent '" + parent + "' must not contain '..'",
                               "give a path relative to the cgroup mount, e.g. sandboxrun");
    out += (out.empty() ? "" : "/") + p;
  }
  return out;
}

bool xattr_is_one(const std::string& dir, const char* name) {
  char v[8];
  ssize_t n = ::getxattr(dir.c_str(), name, v, sizeof v);
  return n == 1 && v[0] == '1';
}

bool delegated_to_us(const std::string& dir) {
  if (xattr_is_one(dir, "trusted.delegate") || xattr_is_one(dir, "user.delegate")) return true;
  // Without the marker a non-root launcher may still have been given the subtree (chown).
  return ::geteuid() != 0 && ::access((dir + "/cgroup.subtree_control").c_str(), W_OK) == 0 &&
         ::access((dir + "/cgroup.procs").c_str(), W_OK) == 0 && ::access(dir.c_str(), W_OK) == 0;
}

// A container's cgroup namespace whose mount we may write (CRI-O's cgroup2-mount-hierarchy-rw,
// podman --cgroupns=private with /sys/fs/cgroup unmasked, privileged): our cgroup is the mount's
// root, yet not the host's root cgroup (only non-root cgroups have cgroup.type). The runtime
// gave the container that cgroup, so it is the subtree we may divide, as a delegated one.
bool namespace_subtree(const std::string& dir) {
  return ::access((dir + "/cgroup.type").c_str(), F_OK) == 0 &&
         ::access((dir + "/cgroup.subtree_control").c_str(), W_OK) == 0 && ::access(dir.c_str(), W_OK) == 0;
}

// The nearest existing directory at or above `dir` (a parent we would create).
std::string nearest_existing(std::string dir) {
  while (::access(dir.c_str(), F_OK) != 0) {
    auto slash = dir.rfind('/');
    if (slash == std::string::npos || slash == 0) return "/";
    dir.resize(slash);
  }
  return dir;
}

std::optional<std::string> read_path(const std::string& path) {
  try {
    return read_file(path);
  } catch (const Error&) {
    return std::nullopt;
  }
}

Plan plan_v2(const CgroupSettings& settings, const Mount& m, std::string_view self_cgroup) {
  Plan plan;
  plan.v2_mount = m.mountpoint;
  if (!settings.parent.empty()) {
    std::string rel = clean_relative(settings.parent);
    plan.v2_parent = rel.empty() ? m.mountpoint : m.mountpoint + "/" + rel;
  } else {
    auto own_path = own_cgroup(self_cgroup, "");
    auto own = own_path ? dir_of(m, *own_path) : std::nullopt;
    auto ours = [&m](const std::string& dir) {
      return dir == m.mountpoint ? namespace_subtree(dir) : delegated_to_us(dir);
    };
    if (own) {
      std::filesystem::path p(*own);
      if (*own != m.mountpoint && p.filename() == kLauncherLeaf && ours(p.parent_path().string())) {
        plan.v2_parent = p.parent_path().string();
        plan.v2_parent_is_own = true;
      } else if (ours(*own)) {
        plan.v2_parent = *own;
        plan.v2_parent_is_own = true;
      }
    }
    if (plan.v2_parent.empty()) plan.v2_parent = m.mountpoint + "/" + kDefaultParent;
  }
  std::string existing = nearest_existing(plan.v2_parent);
  auto offered = split_words(read_path(existing + "/cgroup.controllers").value_or(""));
  for (const char* c : {"memory", "pids", "cpu"})
    if (contains(offered, c)) plan.controllers.emplace_back(c);
  std::vector<std::string> missing;
  for (const char* c : {"memory", "pids"})
    if (!contains(offered, c)) missing.emplace_back(c);
  if (!missing.empty()) {
    plan.detail = "cgroup v2 at " + m.mountpoint + ": controllers " + join(missing, ",") +
                  " are not available to " + existing + " (" + kFixHint + ")";
    return plan;
  }
  if (::access(existing.c_str(), W_OK) != 0) {
    plan.detail = "cgroup v2 at " + m.mountpoint + ": " + not_writable(existing);
    return plan;
  }
  plan.version = "v2";
  plan.detail = "cgroup v2 at " + m.mountpoint + ", runs under " + plan.v2_parent +
                (plan.v2_parent_is_own ? " (our delegated cgroup)" : "") + ", controllers " +
                join(plan.controllers, " ");
  if (!contains(plan.controllers, "cpu")) plan.detail += "; cpu controller missing: cpu_count not enforced";
  return plan;
}

Plan plan_v1(const CgroupSettings& settings, const HostMounts& mounts) {
  Plan plan;
  std::string rel = settings.parent.empty() ? kDefaultParent : clean_relative(settings.parent);
  std::vector<std::string> missing;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct", "freezer"}) {
    auto it = mounts.v1.find(c);
    if (it == mounts.v1.end()) {
      missing.emplace_back(c);
      continue;
    }
    plan.controllers.emplace_back(c);
    plan.v1_parents[c] = rel.empty() ? it->second.mountpoint : it->second.mountpoint + "/" + rel;
  }
  if (!plan.v1_parents.count("memory") || !plan.v1_parents.count("pids")) {
    plan.controllers.clear();
    plan.v1_parents.clear();
    plan.detail = "no cgroup v2 mount with memory+pids and no cgroup v1 hierarchy for " +
                  join(missing, ",") +
                  " (mount cgroup2 at /sys/fs/cgroup with those controllers, or the v1 hierarchies)";
    return plan;
  }
  for (const char* ctrl : {"memory", "pids", "cpu", "cpuacct", "freezer"}) {
    if (!plan.v1_parents.count(ctrl)) continue;
    std::string existing = nearest_existing(plan.v1_parents.at(ctrl));
    if (::access(existing.c_str(), W_OK) != 0) {
      plan.detail = std::string("cgroup v1 ") + ctrl + " hierarchy: " + not_writable(existing);
      plan.controllers.clear();
      plan.v1_parents.clear();
      return plan;
    }
  }
  plan.v1_mounts = mounts.v1;
  if (mounts.v2) plan.unified_parent = rel.empty() ? mounts.v2->mountpoint : mounts.v2->mountpoint + "/" + rel;
  plan.version = "v1";
  plan.detail = "cgroup v1" + std::string(mounts.v2 ? " (hybrid)" : "") + ": runs under " +
                plan.v1_parents.at("memory") + " (and the same name in pids, cpu, cpuacct" +
                ")";
  if (mounts.v2)
    plan.detail += "; cgroup2 at " + mounts.v2->mountpoint + " (no controllers) used for placement and cgroup.kill";
  bool memsw = ::access((mounts.v1.at("memory").mountpoint + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0;
  plan.detail += memsw ? "; swap limited by memory.memsw"
                       : "; no memory.memsw (boot with swapaccount=1): swappiness 0 keeps swap out";
  if (!missing.empty()) plan.detail += "; missing: " + join(missing, ",");
  return plan;
}

}  // namespace

std::optional<std::string> dir_of(const Mount& m, const std::string& cgroup_path) {
  std::string root = m.root == "/" ? "" : m.root;
  if (cgroup_path.compare(0, root.size(), root) != 0) return std::nullopt;
  std::string rest = cgroup_path.substr(root.size());
  if (!rest.empty() && rest[0] != '/') return std::nullopt;
  if (rest == "/") rest.clear();
  return m.mountpoint + rest;
}

HostMounts parse_mountinfo(std::string_view mountinfo) {
  HostMounts out;
  while (!mountinfo.empty()) {
    size_t nl = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, nl);
    mountinfo = nl == std::string_view::npos ? std::string_view{} : mountinfo.substr(nl + 1);
    auto fields = split_words(line);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    const std::string& fstype = dash[1];
    Mount m{unescape(fields[3]), unescape(fields[4])};
    if (fstype == "cgroup2") {
      if (!out.v2) out.v2 = m;
    } else if (fstype == "cgroup") {
      std::string_view opts = dash[3];
      while (!opts.empty()) {
        size_t comma = opts.find(',');
        std::string opt(opts.substr(0, comma));
        opts = comma == std::string_view::npos ? std::string_view{} : opts.substr(comma + 1);
        for (const char* c : {"memory", "pids", "cpu", "cpuacct", "freezer"})
          if (opt == c && !out.v1.count(opt)) out.v1[opt] = m;
      }
    }
  }
  return out;
}

std::optional<std::string> own_cgroup(std::string_view text, const std::string& controller) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view ctrls = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path(line.substr(c2 + 1));
    if (controller.empty()) {
      if (line.substr(0, c1) == "0" && ctrls.empty()) return path;
      continue;
    }
    std::string list(ctrls);
    std::replace(list.begin(), list.end(), ',', ' ');
    if (contains(split_words(list), controller)) return path;
  }
  return std::nullopt;
}

Plan plan_cgroups(const CgroupSettings& settings, std::string_view mountinfo, std::string_view self_cgroup) {
  HostMounts mounts = parse_mountinfo(mountinfo);
  if (settings.mode == CgroupMode::enclosing) return plan_enclosing(mounts, self_cgroup);
  std::string v2_problem;
  if (mounts.v2) {
    auto root_ctrls = split_words(read_path(mounts.v2->mountpoint + "/cgroup.controllers").value_or(""));
    // A cgroup2 mount is the primary backend only when it carries the controllers; an empty
    // one (hybrid host) is the companion of v1.
    if (contains(root_ctrls, "memory") && contains(root_ctrls, "pids")) {
      Plan plan = plan_v2(settings, *mounts.v2, self_cgroup);
      if (plan.version == "v2" || mounts.v1.empty()) return plan;
      v2_problem = plan.detail;
    }
  }
  Plan plan = plan_v1(settings, mounts);
  if (!v2_problem.empty()) plan.detail = v2_problem + "; " + plan.detail;
  return plan;
}

Plan plan_host_cgroups(const CgroupSettings& settings) {
  auto mountinfo = read_path("/proc/self/mountinfo");
  auto self = read_path("/proc/self/cgroup");
  if (!mountinfo || !self) {
    Plan plan;
    plan.detail = "cannot read /proc/self/mountinfo or /proc/self/cgroup (mount /proc)";
    return plan;
  }
  return plan_cgroups(settings, *mountinfo, *self);
}

}  // namespace sandboxrun::cgroup_detail

namespace sandboxrun {

CgroupSupport probe_cgroups(const CgroupSettings& settings) {
  using namespace cgroup_detail;
  CgroupSupport s;
  Plan plan;
  try {
    plan = plan_host_cgroups(settings);
  } catch (const Error& e) {
    s.version = "none";
    s.detail = e.describe();
    return s;
  }
  s.version = plan.version;
  s.detail = plan.detail;
  if (plan.version == "none") return s;
  s.controllers = plan.controllers;
  s.can_limit_memory = contains(plan.controllers, "memory");
  s.can_limit_pids = contains(plan.controllers, "pids");
  s.can_limit_cpu = contains(plan.controllers, "cpu");
  return s;
}

}  // namespace sandboxrun
