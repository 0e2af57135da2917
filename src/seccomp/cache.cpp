// Compiled seccomp programs cached by what determines them: the profile's bytes, the kernel
// release (minKernel conditions), libseccomp's version and the capabilities. A run then loads a
// few kilobytes instead of parsing JSON and compiling (~3 ms per profile on the development VM).
//
// File: "SRBPF002", the 32-byte key, the u32 instruction counts of the program and of its notify
// form, both instruction arrays, and the SHA-256 of everything before it. The directory is private (open_trusted_dir: owned by the caller, not
// writable by others, no symlink anywhere); a file that does not verify is recompiled and
// replaced, never used. The newest 16 entries are kept (cache_io.hpp prune).
#include <fcntl.h>
#include <seccomp.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>

#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "common/cache_io.hpp"
#include "common/safe_open.hpp"
#include "sandboxrun/seccomp.hpp"
#include "common/sha256.hpp"

namespace sandboxrun {

namespace {

constexpr char kMagic[8] = {'S', 'R', 'B', 'P', 'F', '0', '0', '2'};
constexpr size_t kDigest = 32;

std::string cache_key(const std::string& profile_text, const SeccompContext& ctx) {
  std::string material = "sandboxrun seccomp cache v1\n";
  struct utsname u {};
  material += ctx.kernel_release.empty() ? (::uname(&u) == 0 ? u.release : "?") : ctx.kernel_release;
  const scmp_version* v = seccomp_version();
  material += "\nlibseccomp " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->micro);
  for (const auto& c : ctx.capabilities) material += "\ncap " + c;
  material += "\nprofile\n" + profile_text;
  return sha256_raw(material);
}

std::string hex(std::string_view raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<SeccompProgram> read_entry(int dir_fd, const std::string& name, const std::string& key) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || st.st_size > (1 << 20))
    return std::nullopt;
  std::string data;
  try {
    data = read_fd(fd.get(), 1 << 20, name, "");
  } catch (const Error&) {
    return std::nullopt;
  }
  const size_t head = sizeof kMagic + kDigest + 2 * sizeof(uint32_t);
  if (data.size() < head + kDigest || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0 ||
      data.compare(sizeof kMagic, kDigest, key) != 0)
    return std::nullopt;
  uint32_t count = 0, notify_count = 0;
  std::memcpy(&count, data.data() + sizeof kMagic + kDigest, sizeof count);
  std::memcpy(&notify_count, data.data() + sizeof kMagic + kDigest + sizeof count, sizeof notify_count);
  if (count == 0 || count > BPF_MAXINSNS || notify_count > BPF_MAXINSNS ||
      data.size() != head + (count + notify_count) * sizeof(sock_filter) + kDigest)
    return std::nullopt;
  const std::string_view body(data.data(), data.size() - kDigest);
  if (sha256_raw(body) != data.substr(body.size())) return std::nullopt;
  SeccompProgram prog;
  prog.instructions.resize(count);
  std::memcpy(prog.instructions.data(), data.data() + head, count * sizeof(sock_filter));
  prog.notify_instructions.resize(notify_count);
  std::memcpy(prog.notify_instructions.data(), data.data() + head + count * sizeof(sock_filter),
              notify_count * sizeof(sock_filter));
  return prog;
}

void write_entry(int dir_fd, const std::string& name, const std::string& key, const SeccompProgram& prog) {
  std::string data(kMagic, sizeof kMagic);
  data += key;
  const uint32_t count = static_cast<uint32_t>(prog.instructions.size());
  const uint32_t notify_count = static_cast<uint32_t>(prog.notify_instructions.size());
  data.append(reinterpret_cast<const char*>(&count), sizeof count);
  data.append(reinterpret_cast<const char*>(&notify_count), sizeof notify_count);
  data.append(reinterpret_cast<const char*>(prog.instructions.data()), count * sizeof(sock_filter));
  data.append(reinterpret_cast<const char*>(prog.notify_instructions.data()), notify_count * sizeof(sock_filter));
  data += sha256_raw(data);
  const std::string tmp = "." + name + "." + std::to_string(::getpid()) + "." + std::to_string(::gettid()) + ".tmp";
  UniqueFd fd(::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return;
  const bool ok = write_all(fd.get(), data.data(), data.size());
  fd.reset();
  if (!ok || ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    return;
  }
  // Every edit of a profile, kernel update or capability set adds an entry nothing else removes.
  cache::prune(dir_fd, "", ".bpf", name);
}

}  // namespace

SeccompProgram load_or_compile_seccomp_profile(const std::filesystem::path& profile, const SeccompContext& ctx,
                                               const std::filesystem::path& cache_dir, bool* from_cache) {
  if (from_cache) *from_cache = false;
  std::string text;
  try {
    text = read_file(profile.string());
  } catch (const Error& e) {
    throw Error("cannot read seccomp profile " + profile.string() + ": " + std::strerror(e.sys_errno()),
                "check the security_opt seccomp=PATH entry in sandbox.yaml", e.sys_errno());
  }
  UniqueFd dir;
  if (!cache_dir.empty()) {
    try {
      dir = open_trusted_dir(cache_dir, /*create=*/true, 0700);
    } catch (const Error&) {
      // An unusable cache (read-only, foreign owner) costs the compile, nothing else.
    }
  }
  const std::string key = cache_key(text, ctx);
  const std::string name = hex(key) + ".bpf";
  if (dir) {
    if (auto cached = read_entry(dir.get(), name, key)) {
      if (from_cache) *from_cache = true;
      cached->source = profile.string();
      return std::move(*cached);
    }
  }
  SeccompProgram prog = compile_seccomp_profile_text(text, profile.string(), ctx);
  if (dir) write_entry(dir.get(), name, key, prog);
  return prog;
}

}  // namespace sandboxrun
