// Seccomp profiles in Docker's JSON format, compiled with libseccomp into a BPF program in the
// parent; the child only installs the prepared program (no allocation after clone()).
//
// Deliberate deviation from Docker: only the native ABI is ever compiled in. Architectures
// listed in "archMap"/"architectures" (i386, x32, arm ...) are accepted but not added, and any
// syscall made through another ABI (int $0x80, x32's nr | 0x40000000, AArch32) kills the
// process: the threat model forbids 32-bit/x32 syscall ABIs.
#pragma once

#include <linux/filter.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandboxrun {

struct SeccompContext {
  // Capabilities the sandboxed process keeps (Docker profile "includes/excludes" caps, e.g.
  // "CAP_SYS_ADMIN"); empty for sandboxrun, which drops all.
  std::vector<std::string> capabilities;
  // Kernel release that "minKernel" conditions compare with ("6.1.0-18-amd64"); empty means
  // the running kernel (uname -r).
  std::string kernel_release;
};

struct SeccompProgram {
  std::vector<sock_filter> instructions;
  std::string source;  // profile path, for messages
  // The same program with every EPERM denial turned into a user notification (the launcher
  // records the call and answers EPERM). Empty when the profile's default is not EPERM, or when
  // sendmsg and close are not allowed unconditionally: the payload needs both to hand the
  // listener to the launcher after loading the filter, and a denied one would wait forever on a
  // listener nobody reads yet.
  std::vector<sock_filter> notify_instructions;

  sock_fprog notify_fprog() const {
    return sock_fprog{static_cast<unsigned short>(notify_instructions.size()),
                      const_cast<sock_filter*>(notify_instructions.data())};
  }

  sock_fprog fprog() const {
    return sock_fprog{static_cast<unsigned short>(instructions.size()),
                      const_cast<sock_filter*>(instructions.data())};
  }
};

// Parses and compiles a profile for the native architecture. Throws Error naming the file and
// the offending entry (unknown action, unknown op, bad JSON ...). Unknown syscall names are
// skipped, as Docker does, since profiles list syscalls newer than some kernels/libseccomps.
SeccompProgram compile_seccomp_profile(const std::filesystem::path& profile, const SeccompContext& ctx);

// Same, from profile text already in memory; `source_name` is used in messages.
SeccompProgram compile_seccomp_profile_text(std::string_view json, const std::string& source_name,
                                            const SeccompContext& ctx);

// compile_seccomp_profile through a cache of compiled programs in `cache_dir` (created 0700;
// empty = no cache), keyed by the profile's bytes, the kernel release, libseccomp's version and
// the capabilities, and verified (a SHA-256 over each entry): a damaged or foreign entry is
// recompiled and replaced, an unusable directory only costs the compile. *from_cache says
// whether the cache answered.
SeccompProgram load_or_compile_seccomp_profile(const std::filesystem::path& profile, const SeccompContext& ctx,
                                               const std::filesystem::path& cache_dir, bool* from_cache = nullptr);

// Installs a compiled program in the calling thread (async-signal-safe; for the child).
// The caller sets no_new_privs (or holds CAP_SYS_ADMIN) first. Returns 0 or -errno.
int install_seccomp_program(const sock_fprog& prog) noexcept;
// The same with SECCOMP_FILTER_FLAG_NEW_LISTENER: returns the listener fd, or -errno.
int install_seccomp_listener(const sock_fprog& prog) noexcept;

// The native name of syscall `nr` ("bpf"), or "syscall_NR" when libseccomp does not know it.
std::string syscall_name(int nr);

}  // namespace sandboxrun
