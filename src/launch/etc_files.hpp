// /etc/hosts, /etc/hostname and /etc/resolv.conf of one run, generated as Docker does, so that
// `localhost` (and the sandbox's own name, and every extra_hosts entry) resolves in any image;
// /etc/passwd and /etc/group are the image's, plus an account `sandbox` for the run's uid and
// gid when the image has none (getpwuid() works: getpass, pip, `~`).
//
// The image is shared by every run and never written: the files are written to the run's own
// /run tmpfs (/run/sandboxrun/) and bound read-only onto /etc/NAME. A bind needs an existing
// file as its target; when the image lacks one of the three (or has a symlink there), /etc is
// shadowed instead: the image's /etc is bound to /run/sandboxrun/image-etc and a read-only
// tmpfs over /etc holds one symlink per image entry (symlinks copied as they are) plus the three
// mount targets. The parent prepares every path and byte here; the child only makes syscalls.
#pragma once

#include <string>
#include <vector>

#include "sandboxrun/spec.hpp"

namespace sandboxrun::launch {

struct ChildPlan;

struct EtcPlan {
  std::string dir;                         // host path of <rootfs>/run/sandboxrun
  std::vector<std::string> file_path;      // host paths in dir: hosts, hostname, resolv.conf, passwd, group
  std::vector<std::string> file_content;
  std::vector<std::string> target;         // <rootfs>/etc/hosts, ... (bind targets)
  bool shadow = false;                     // the image lacks a target: shadow /etc (see above)
  std::string image_etc;                   // <rootfs>/etc
  std::string image_etc_copy;              // <rootfs>/run/sandboxrun/image-etc
  std::vector<std::string> link_path;      // <rootfs>/etc/NAME, for each image entry
  std::vector<std::string> link_target;    // what it points to inside the sandbox
  unsigned long image_remount_flags = 0;   // MS_* for the read-only bind of the image's /etc
  size_t bytes() const;                    // what the files take in the /run tmpfs
};

// Parent side. /etc/hosts: localhost (IPv4 and IPv6, with Docker's ip6-* names), the hostname,
// then every extra_hosts entry; /etc/hostname; /etc/resolv.conf with no nameserver (network_mode
// none: there is no DNS; allowlist: the egress proxy resolves names). Throws Error when the
// image has no real /etc directory.
// `host_rootfs` is the image as the launcher sees it (inspected here); `rootfs` where pid 1 sees it.
void plan_etc_files(const SandboxSpec& spec, const std::string& host_rootfs, const std::string& rootfs,
                    unsigned long root_remount_flags,
                    EtcPlan& out);

// pid 1 writes the files into /run while it is still writable and binds them afterwards, before
// the root is remounted read-only and pivoted: mount_plan.cpp has the operations.

}  // namespace sandboxrun::launch
