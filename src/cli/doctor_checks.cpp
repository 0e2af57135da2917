#include "doctor_checks.hpp"

#include <cerrno>
#include <cstring>

namespace sandboxrun::cli {

Check judge_userns(const UsernsFacts& f) {
  std::string detail = "max_user_namespaces=" + (f.max_user_namespaces.empty() ? "?" : f.max_user_namespaces);
  if (!f.unprivileged_userns_clone.empty()) detail += ", unprivileged_userns_clone=" + f.unprivileged_userns_clone;
  if (!f.apparmor_restrict_unprivileged.empty())
    detail += ", apparmor_restrict_unprivileged_userns=" + f.apparmor_restrict_unprivileged;
  // The probe is the truth (an LSM or seccomp may refuse what the sysctls allow); the sysctls say why.
  if (f.probe_errno == 0) return {"user namespaces", true, true, detail, ""};
  detail += "; creating one failed: " + std::string(std::strerror(f.probe_errno));
  std::string fix;
  if (f.max_user_namespaces == "0") {
    fix = "sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/ to keep it)";
  } else if (!f.root && f.unprivileged_userns_clone == "0") {
    fix = "sysctl -w kernel.unprivileged_userns_clone=1, or run as root";
  } else if (!f.root && f.apparmor_restrict_unprivileged == "1") {
    fix = "Ubuntu restricts user namespaces to programs with an AppArmor profile that allows them: "
          "add /etc/apparmor.d/sandboxrun with `abi <abi/4.0>, include <tunables/global> profile sandboxrun "
          "/usr/bin/sandboxrun flags=(unconfined) { userns, }` and `apparmor_parser -r /etc/apparmor.d/sandboxrun`, "
          "or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or run as root";
  } else {
    fix = "a container's seccomp profile or an LSM refuses unshare(CLONE_NEWUSER): allow it (podman/docker "
          "--security-opt seccomp=deploy/seccomp.json, or a profile that allows unshare and clone with "
          "CLONE_NEWUSER), or run on the host";
  }
  return {"user namespaces", false, true, detail, fix};
}

Check judge_trial(const TrialFacts& f) {
  if (f.error.empty())
    return {"trial run", true, true, f.degradations.empty() ? "a sandbox ran" : "a sandbox ran, without: " + f.degradations, ""};
  auto has = [&](const char* s) { return f.error.find(s) != std::string::npos; };
  std::string fix;
  if (has("cgroup.mode enclosing"))
    fix = "one run per container: give the container limits at least as tight as the trust level's (Kubernetes "
          "resources.limits; podman --memory, --memory-swap, --cpus) and start sandboxrun as its only process";
  else if (has("mount proc") || has("'proc'"))
    fix = "/proc is masked (a container's default): podman/docker --security-opt unmask=ALL (docker: "
          "--security-opt systempaths=unconfined); Kubernetes: securityContext.procMount: Unmasked (with hostUsers: "
          "false)";
  else if (has("pivot_root"))
    fix = "the container's seccomp profile refuses pivot_root (Kubernetes' RuntimeDefault does): give it a profile "
          "that allows pivot_root, mount and the namespace flags of clone/unshare (a Localhost profile; podman "
          "--security-opt seccomp=FILE), or run it unconfined";
  else if (has("clone a mount of the image") || has("open_tree"))
    fix = "as root without CAP_SYS_ADMIN the image must be reachable by every user (the image store "
          "/var/lib/sandboxrun is): move it there; or add CAP_SYS_ADMIN (podman --cap-add SYS_ADMIN; Kubernetes "
          "securityContext.capabilities.add: [SYS_ADMIN]); or run sandboxrun as a non-root user, which needs none";
  else if (has("id slot") || has("uid_map") || has("gid_map"))
    fix = "the id range (id_ranges in sandbox.yaml) is not mapped in this user namespace (a user-namespaced pod maps "
          "65536 ids): set id_ranges.base inside the mapping, or run sandboxrun as a non-root user";
  else if (has("mount") || has("Operation not permitted"))
    fix = "the container refuses a mount or namespace step (its seccomp profile, AppArmor, or missing capabilities): "
          "allow mount, umount2, pivot_root and clone/unshare with namespace flags, or run on the host";
  else
    fix = "the error says which step failed; `sandboxrun --trust untrusted FILE.py` shows the same";
  return {"trial run", false, true, f.error, fix};
}

Check judge_cgroups(const CgroupFacts& f) {
  if (f.can_limit) return {"cgroups", true, true, f.summary, ""};
  std::string fix;
  if (f.fs_read_only) {
    fix = "/sys/fs/cgroup is mounted read-only (a container): run one sandbox per container with "
          "cgroup.mode: enclosing in sandbox.yaml and the container's limits on it (README, \"One run per "
          "container\"), or give it a writable cgroup namespace (podman --cgroupns=private, "
          "docker --cgroupns=private with cgroup v2), or set cgroup.allow_degraded: true in sandbox.yaml to run "
          "without limits";
  } else if (!f.root) {
    fix = "give this user a delegated cgroup: systemd-run --user -p Delegate=yes --scope sandboxrun ..., or a "
          "unit with Delegate=yes, and set cgroup.parent to it; or run as root; or set cgroup.allow_degraded: "
          "true in sandbox.yaml to run without limits";
  } else {
    fix = "enable the memory and pids controllers (cgroup v2: add them to cgroup.subtree_control above the "
          "parent; v1: mount them), or set cgroup.parent to a cgroup that has them";
  }
  return {"cgroups", false, true, f.summary, fix};
}

}  // namespace sandboxrun::cli
