#!/usr/bin/env python3
"""Where a sandbox start's CPU goes, from `perf record -g` samples (called by scripts/bench.sh).

    profile-startup.py PERF_DATA RUNS PERIOD_NS COMM [COMM ...]

Counts the on-CPU samples of the processes named COMM (the launcher, and its pid 1 and payload
until the payload's exec renames them) and sorts each into a step of a start: the kernel side by
the system call or fault it is in (its kernel stack is complete), the user side by the library it
is in (user stacks without frame pointers are not). PERF_DATA was recorded with `-e cpu-clock -c
PERIOD_NS`, so each sample stands for PERIOD_NS of CPU. Prints milliseconds per run for each step.
"""
import collections
import subprocess
import sys

# (step, the kernel frames that mark it): the first step with a frame in a sample's stack wins,
# so the more specific come first.
KERNEL_STEPS = [
    ("network namespace (unshare)", ("copy_net_ns",)),
    ("cgroups (mkdir, rmdir, limits, placement)", ("cgroup_mkdir", "cgroup_rmdir", "kernfs_fop_write",
                                                   "cgroup_file_write", "cgroup_procs_write", "kernfs_iop_mkdir",
                                                   "kernfs_iop_rmdir", "cgroup_attach")),
    ("mounts, pivot_root", ("__x64_sys_mount", "__x64_sys_umount", "__x64_sys_move_mount", "__x64_sys_open_tree",
                            "__x64_sys_pivot_root", "__x64_sys_mount_setattr", "__x64_sys_fsopen",
                            "__x64_sys_fsmount", "__x64_sys_fsconfig")),
    ("clone (namespaces, pid 1, payload)", ("__do_sys_clone3", "__do_sys_clone", "__x64_sys_unshare",
                                            "__x64_sys_setns")),
    ("exec", ("__x64_sys_execve", "__x64_sys_execveat")),
    ("seccomp filter load", ("do_seccomp",)),
    ("landlock", ("__x64_sys_landlock_create_ruleset", "__x64_sys_landlock_add_rule",
                  "__x64_sys_landlock_restrict_self", "__do_sys_landlock_create_ruleset",
                  "__do_sys_landlock_add_rule", "__do_sys_landlock_restrict_self")),
    ("audit log sync (fdatasync)", ("__x64_sys_fdatasync", "__x64_sys_fsync")),
    ("process exit", ("do_exit", "do_group_exit")),
    ("page faults", ("asm_exc_page_fault", "exc_page_fault")),
    ("memory maps (mmap, munmap, brk)", ("__x64_sys_mmap", "__x64_sys_munmap", "__do_sys_brk",
                                         "__x64_sys_mprotect")),
    ("files (open, stat, read, write, close, rename)", ("__x64_sys_openat", "__x64_sys_openat2", "__x64_sys_close",
                                                        "__do_sys_newfstatat", "__x64_sys_newfstatat",
                                                        "__x64_sys_statx", "__x64_sys_read", "__x64_sys_write",
                                                        "ksys_read", "ksys_write", "__x64_sys_pread64",
                                                        "__x64_sys_renameat", "__x64_sys_getdents64",
                                                        "__x64_sys_access", "__x64_sys_faccessat2",
                                                        "__x64_sys_readlink", "__x64_sys_mkdir",
                                                        "__x64_sys_mkdirat", "__x64_sys_unlink",
                                                        "__x64_sys_close_range", "__do_sys_close_range")),
]
USER_STEPS = [("dynamic loader (ld.so, cpuid)", "ld-linux"), ("libc, libstdc++", "libc.so"),
              ("libc, libstdc++", "libstdc++"), ("libc, libstdc++", "libm.so")]


def samples(data, comms):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym,dso"], capture_output=True, text=True,
                         check=True).stdout
    cur, comm = [], None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            if comm in comms and cur:
                yield cur
            comm, cur = line.split()[0], []
        else:
            cur.append(line.strip())
    if comm in comms and cur:
        yield cur


def step_of(stack):
    text = " ".join(stack)
    for step, marks in KERNEL_STEPS:
        if any(m in text for m in marks):
            return step
    if "entry_SYSCALL_64" in text:
        return "other system calls"
    if "[kernel.kallsyms]" in stack[0]:
        return "other kernel (interrupts, scheduling)"
    for step, lib in USER_STEPS:
        if lib in stack[0]:
            return step
    return "the program's own code (and static libraries)"


def main():
    data, runs, period_ns, comms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), set(sys.argv[4:])
    counts = collections.Counter(step_of(s) for s in samples(data, comms))
    if not counts:
        print("    (no samples)")
        return
    total = sum(counts.values())

    def per_run(n):
        return n * period_ns / 1e6 / runs
    print("    %-48s %7.2f ms a run" % ("all (on CPU, " + ", ".join(sorted(comms)) + ")", per_run(total)))
    for step, n in counts.most_common():
        print("      %-46s %7.2f ms  %4.1f%%" % (step, per_run(n), 100.0 * n / total))


if __name__ == "__main__":
    main()
