// `sandboxrun doctor`'s judgement of a host, from facts gathered first (doctor.cpp), so that
// every host users have can be judged in a unit test: Ubuntu's AppArmor restriction on user
// namespaces, user.max_user_namespaces=0, a read-only cgroup filesystem (a container), a user
// without a delegated cgroup.
#pragma once

#include <string>

namespace sandboxrun::cli {

struct Check {
  std::string name;
  bool ok;
  bool required;
  std::string detail;
  std::string fix;
};

struct UsernsFacts {
  bool root = false;
  std::string max_user_namespaces{};            // /proc/sys/user/max_user_namespaces ("" if absent)
  std::string unprivileged_userns_clone{};      // Debian's switch ("" if absent)
  std::string apparmor_restrict_unprivileged{}; // Ubuntu 23.10+ ("" if absent)
  int probe_errno = 0;                          // unshare(CLONE_NEWUSER) in a child: 0 = it worked
};
Check judge_userns(const UsernsFacts& f);

struct CgroupFacts {
  bool root = false;
  bool fs_read_only = false;  // /sys/fs/cgroup mounted read-only (the usual container)
  bool can_limit = false;     // probe_cgroups: memory and pids limits can be set
  std::string summary{};      // "v2 controllers: ...; detail"
};
Check judge_cgroups(const CgroupFacts& f);

// A sandbox actually started (the default trust level, `print`): what the probes above cannot
// see (a masked /proc, a profile refusing pivot_root or mount, root without CAP_SYS_ADMIN, an id
// range the user namespace does not map) shows here. `error`: the run's, "" when it ran;
// `degradations`: what it went without.
struct TrialFacts {
  bool root = false;
  std::string error{};
  std::string degradations{};
};
Check judge_trial(const TrialFacts& f);

}  // namespace sandboxrun::cli
