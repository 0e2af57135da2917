// Docker seccomp JSON -> libseccomp filter -> classic BPF, all in the parent.
//
// Semantics follow Docker + runc so that a profile written for Docker behaves the same here:
//  - includes/excludes: every listed cap must be held / any held cap excludes; arches are Go
//    architecture names ("amd64") compared with the native one; minKernel compares "X.Y" with
//    the kernel release.
//  - SCMP_ACT_ERRNO / SCMP_ACT_TRACE without errnoRet return EPERM.
//  - conditions on distinct arguments are ANDed in one rule; when two conditions name the same
//    argument, each condition becomes its own rule (ORed), as runc does.
//  - SCMP_CMP_MASKED_EQ: "value" is the mask, "valueTwo" the datum.
//  - a rule whose action equals the default action is a no-op and skipped (libseccomp refuses
//    it); with argument conditions it is an error, since skipping it would change its meaning
//    when other rules name the same syscall.
//  - an unconditional rule and a conditional rule with different actions for the same syscall
//    are an error: libseccomp 2.5 silently drops the conditional one (measured: ALLOW ioctl +
//    KILL ioctl(TIOCSTI) lets TIOCSTI through, in either order).
// Deviation: only the native ABI is compiled in (see seccomp.hpp).
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <string.h>  // strerrorname_np
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/seccomp.hpp"

namespace sandboxrun {

namespace {

using json = nlohmann::json;

constexpr unsigned kMaxArgIndex = 5;
constexpr uint64_t kMaxErrno = 4095;  // the kernel caps SECCOMP_RET_ERRNO data at MAX_ERRNO

struct FilterDeleter {
  void operator()(void* ctx) const noexcept { seccomp_release(ctx); }
};
using Filter = std::unique_ptr<void, FilterDeleter>;

// major.minor.patch; a missing patch compares as 0.
struct KernelVersion {
  unsigned major = 0, minor = 0, patch = 0;
  auto operator<=>(const KernelVersion&) const = default;
};

// Reads "N" from the front of `s`; false when there is no number.
bool take_number(std::string_view& s, unsigned& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc{} || ptr == s.data()) return false;
  s.remove_prefix(static_cast<size_t>(ptr - s.data()));
  return true;
}

// "X.Y" or "X.Y.Z" followed by anything (uname) or by nothing (strict, for profiles).
std::optional<KernelVersion> parse_kernel_version(std::string_view s, bool strict) {
  KernelVersion v;
  if (!take_number(s, v.major) || s.empty() || s.front() != '.') return std::nullopt;
  s.remove_prefix(1);
  if (!take_number(s, v.minor)) return std::nullopt;
  if (!s.empty() && s.front() == '.' && s.size() > 1 && s[1] >= '0' && s[1] <= '9') {
    s.remove_prefix(1);
    take_number(s, v.patch);
  }
  if (strict && !s.empty()) return std::nullopt;
  return v;
}

// The native architecture as Docker names it (Go's GOARCH), for includes/excludes "arches".
std::string native_go_arch() {
  switch (seccomp_arch_native()) {
    case SCMP_ARCH_X86_64: return "amd64";
    case SCMP_ARCH_AARCH64: return "arm64";
    case SCMP_ARCH_RISCV64: return "riscv64";
    case SCMP_ARCH_S390X: return "s390x";
    case SCMP_ARCH_PPC64LE: return "ppc64le";
    case SCMP_ARCH_PPC64: return "ppc64";
    case SCMP_ARCH_MIPSEL64: return "mips64le";
    case SCMP_ARCH_MIPS64: return "mips64";
    default: return {};
  }
}

class ProfileCompiler {
 public:
  ProfileCompiler(std::string source, const SeccompContext& ctx) : source_(std::move(source)), ctx_(ctx) {}

  SeccompProgram compile(std::string_view text) {
    json doc;
    try {
      doc = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
      throw Error(source_ + ": not valid JSON: " + e.what(), "a seccomp profile is a JSON object in Docker's format")
          .as(ErrorKind::config);
    }
    if (!doc.is_object()) fail("top level", "must be a JSON object");
    check_keys(doc, "top level",
               {"defaultAction", "defaultErrnoRet", "defaultErrno", "architectures", "archMap", "syscalls",
                "flags", "listenerPath", "listenerMetadata", "comment"});

    if (doc.contains("listenerPath") || doc.contains("listenerMetadata"))
      fail("listenerPath", "seccomp user notification is not supported",
           "sandboxrun is the only notify agent (it reports EPERM denials); remove listenerPath/listenerMetadata");
    if (doc.contains("flags")) {
      const json& flags = doc["flags"];
      if (!flags.is_null() && !(flags.is_array() && flags.empty()))
        fail("flags", "seccomp filter flags are not supported", "remove \"flags\"");
    }
    check_architectures(doc);

    if (!doc.contains("defaultAction")) fail("top level", "\"defaultAction\" is missing");
    default_action_ = parse_action(doc["defaultAction"], optional_errno(doc, "defaultErrnoRet", "defaultErrno", "top level"),
                                   "defaultAction");

    Filter filter(seccomp_init(default_action_));
    if (!filter) fail("defaultAction", "libseccomp refused the default action");
    // The native ABI only; anything else (i386 via int $0x80, x32, AArch32) kills the process.
    // libseccomp's x86_64 filter sends x32 numbers (nr >= 0x40000000) to this action as well.
    set_attr(filter.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "bad-arch action");
    // Binary search over syscall numbers instead of a linear chain of ~350 comparisons. Measured
    // here: the linear chain adds 100-200 ns to each filtered syscall; the tree costs about
    // 0.5-1 ms more to compile, once per run.
    set_attr(filter.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2, "binary-tree optimisation");

    if (doc.contains("syscalls")) {
      const json& calls = doc["syscalls"];
      if (!calls.is_array() && !calls.is_null()) fail("syscalls", "must be an array");
      if (calls.is_array())
        for (size_t i = 0; i < calls.size(); ++i) add_entry(filter.get(), calls[i], i);
    }
    SeccompProgram program{export_bpf(filter.get()), source_, {}};
    if (default_action_ == SCMP_ACT_ERRNO(EPERM) && allowed_unconditionally("sendmsg") &&
        allowed_unconditionally("close")) {
      // Every EPERM the program can return (the default, and explicit EPERM rules) becomes a
      // notification; other errnos (clone3's ENOSYS) and kills are left as they are.
      program.notify_instructions = program.instructions;
      for (sock_filter& insn : program.notify_instructions)
        if (insn.code == (BPF_RET | BPF_K) && insn.k == (SECCOMP_RET_ERRNO | EPERM)) insn.k = SECCOMP_RET_USER_NOTIF;
    }
    return program;
  }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& hint = {}) const {
    throw Error(source_ + ": " + where + ": " + what, hint).as(ErrorKind::config);
  }

  void check_keys(const json& obj, const std::string& where, std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string expected;
        for (std::string_view k : known) expected += (expected.empty() ? "" : ", ") + std::string(k);
        fail(where, "unknown key \"" + key + "\"", "expected one of: " + expected);
      }
    }
  }

  uint64_t get_u64(const json& v, const std::string& where) const {
    if (!v.is_number_unsigned())
      fail(where, "must be a non-negative integer, got " + v.dump());
    return v.get<uint64_t>();
  }

  // The errno number (Docker: errnoRet / defaultErrnoRet), else its name (podman's profiles also
  // carry errno / defaultErrno, "ENOSYS"); the number wins when both are there, as in podman.
  std::optional<uint32_t> optional_errno(const json& obj, const char* key, const char* name_key,
                                         const std::string& where) const {
    std::optional<uint32_t> by_name;
    if (obj.contains(name_key) && !obj[name_key].is_null()) {
      const json& n = obj[name_key];
      if (!n.is_string()) fail(where + "." + name_key, "must be an errno name such as \"EPERM\", got " + n.dump());
      for (uint32_t e = 1; e <= kMaxErrno && !by_name; ++e)
        if (const char* name = ::strerrorname_np(static_cast<int>(e)); name && n.get<std::string>() == name) by_name = e;
      if (!by_name) fail(where + "." + name_key, "\"" + n.get<std::string>() + "\" is not an errno name");
    }
    if (!obj.contains(key) || obj[key].is_null()) return by_name;
    uint64_t e = get_u64(obj[key], where + "." + key);
    if (e > kMaxErrno) fail(where + "." + key, std::to_string(e) + " is not an errno (0.." + std::to_string(kMaxErrno) + ")");
    return static_cast<uint32_t>(e);
  }

  uint32_t parse_action(const json& v, std::optional<uint32_t> errno_ret, const std::string& where) const {
    if (!v.is_string()) fail(where, "action must be a string, got " + v.dump());
    const std::string name = v.get<std::string>();
    const bool takes_errno = name == "SCMP_ACT_ERRNO" || name == "SCMP_ACT_TRACE";
    if (errno_ret && !takes_errno)
      fail(where, "errnoRet is only valid with SCMP_ACT_ERRNO or SCMP_ACT_TRACE, not " + name);
    if (name == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
    if (name == "SCMP_ACT_ERRNO") return SCMP_ACT_ERRNO(errno_ret.value_or(EPERM));
    if (name == "SCMP_ACT_TRACE") return SCMP_ACT_TRACE(errno_ret.value_or(EPERM));
    if (name == "SCMP_ACT_KILL" || name == "SCMP_ACT_KILL_THREAD") return SCMP_ACT_KILL_THREAD;
    if (name == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
    if (name == "SCMP_ACT_TRAP") return SCMP_ACT_TRAP;
    if (name == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
    if (name == "SCMP_ACT_NOTIFY")
      fail(where, "SCMP_ACT_NOTIFY (seccomp user notification) is not supported",
           "sandboxrun itself turns EPERM denials into notifications for its report; use SCMP_ACT_ERRNO");
    fail(where, "unknown action \"" + name + "\"",
         "expected SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL, SCMP_ACT_KILL_PROCESS, "
         "SCMP_ACT_KILL_THREAD, SCMP_ACT_TRAP, SCMP_ACT_TRACE or SCMP_ACT_LOG");
  }

  scmp_compare parse_op(const json& v, const std::string& where) const {
    static constexpr std::array<std::pair<std::string_view, scmp_compare>, 7> ops{{
        {"SCMP_CMP_NE", SCMP_CMP_NE},
        {"SCMP_CMP_LT", SCMP_CMP_LT},
        {"SCMP_CMP_LE", SCMP_CMP_LE},
        {"SCMP_CMP_EQ", SCMP_CMP_EQ},
        {"SCMP_CMP_GE", SCMP_CMP_GE},
        {"SCMP_CMP_GT", SCMP_CMP_GT},
        {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
    }};
    if (!v.is_string()) fail(where, "op must be a string, got " + v.dump());
    const std::string name = v.get<std::string>();
    for (const auto& [n, op] : ops)
      if (n == name) return op;
    fail(where, "unknown op \"" + name + "\"",
         "expected SCMP_CMP_NE, SCMP_CMP_LT, SCMP_CMP_LE, SCMP_CMP_EQ, SCMP_CMP_GE, SCMP_CMP_GT or "
         "SCMP_CMP_MASKED_EQ");
  }

  void check_architectures(const json& doc) const {
    // Validated for shape only: whatever they list, only the native ABI is compiled in, and
    // i386/x32 in particular are never added (threat model: no 32-bit/x32 syscall ABIs).
    if (doc.contains("architectures") && doc.contains("archMap"))
      fail("top level", "\"architectures\" and \"archMap\" are mutually exclusive");
    auto string_array = [&](const json& v, const std::string& where) {
      if (v.is_null()) return;
      if (!v.is_array()) fail(where, "must be an array of strings");
      for (size_t i = 0; i < v.size(); ++i)
        if (!v[i].is_string()) fail(where + "[" + std::to_string(i) + "]", "must be a string");
    };
    if (doc.contains("architectures")) string_array(doc["architectures"], "architectures");
    if (doc.contains("archMap")) {
      const json& map = doc["archMap"];
      if (!map.is_array() && !map.is_null()) fail("archMap", "must be an array");
      for (size_t i = 0; map.is_array() && i < map.size(); ++i) {
        const std::string where = "archMap[" + std::to_string(i) + "]";
        if (!map[i].is_object()) fail(where, "must be an object");
        check_keys(map[i], where, {"architecture", "subArchitectures"});
        if (!map[i].contains("architecture") || !map[i]["architecture"].is_string())
          fail(where, "\"architecture\" must be a string");
        if (map[i].contains("subArchitectures")) string_array(map[i]["subArchitectures"], where + ".subArchitectures");
      }
    }
  }

  const KernelVersion& kernel() {
    if (!kernel_) {
      std::string release = ctx_.kernel_release;
      if (release.empty()) {
        utsname u{};
        if (uname(&u) != 0) throw_errno("uname");
        release = u.release;
      }
      kernel_ = parse_kernel_version(release, false);
      if (!kernel_)
        throw Error(source_ + ": cannot parse kernel release \"" + release + "\" for minKernel conditions");
    }
    return *kernel_;
  }

  // Evaluates one "includes"/"excludes" block: true when all its conditions hold (includes)
  // or any of them holds (excludes).
  bool condition(const json& block, const std::string& where, bool include) {
    if (!block.is_object()) fail(where, "must be an object");
    check_keys(block, where, {"caps", "arches", "minKernel"});
    auto strings = [&](const char* key) {
      std::vector<std::string> out;
      if (!block.contains(key) || block[key].is_null()) return out;
      const json& v = block[key];
      if (!v.is_array()) fail(where + "." + key, "must be an array of strings");
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string()) fail(where + "." + key + "[" + std::to_string(i) + "]", "must be a string");
        out.push_back(v[i].get<std::string>());
      }
      return out;
    };
    const auto held = [&](const std::string& cap) {
      return std::find(ctx_.capabilities.begin(), ctx_.capabilities.end(), cap) != ctx_.capabilities.end();
    };
    const std::vector<std::string> caps = strings("caps");
    const std::vector<std::string> arches = strings("arches");
    std::optional<KernelVersion> min_kernel;
    if (block.contains("minKernel") && !block["minKernel"].is_null()) {
      const json& v = block["minKernel"];
      if (v.is_string()) min_kernel = parse_kernel_version(v.get<std::string>(), true);
      if (!min_kernel) fail(where + ".minKernel", "must be a kernel version \"X.Y\", got " + v.dump());
    }
    const bool arch_match =
        std::find(arches.begin(), arches.end(), native_arch_) != arches.end();
    if (include) {
      if (!arches.empty() && !arch_match) return false;
      if (!std::all_of(caps.begin(), caps.end(), held)) return false;
      if (min_kernel && kernel() < *min_kernel) return false;
      return true;
    }
    if (arch_match) return true;
    if (std::any_of(caps.begin(), caps.end(), held)) return true;
    if (min_kernel && kernel() >= *min_kernel) return true;
    return false;
  }

  void add_entry(scmp_filter_ctx filter, const json& entry, size_t index) {
    const std::string where = "syscalls[" + std::to_string(index) + "]";
    if (!entry.is_object()) fail(where, "must be an object");
    check_keys(entry, where, {"names", "name", "action", "errnoRet", "errno", "args", "comment", "includes", "excludes"});

    std::vector<std::string> names;
    const bool has_names = entry.contains("names") && !entry["names"].is_null();
    const bool has_name = entry.contains("name") && !entry["name"].is_null();
    if (has_names && has_name) fail(where, "\"name\" and \"names\" are mutually exclusive");
    if (has_name) {
      if (!entry["name"].is_string()) fail(where + ".name", "must be a string");
      names.push_back(entry["name"].get<std::string>());
    } else if (has_names) {
      const json& v = entry["names"];
      if (!v.is_array()) fail(where + ".names", "must be an array of syscall names");
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string() || v[i].get_ref<const std::string&>().empty())
          fail(where + ".names[" + std::to_string(i) + "]", "must be a syscall name, got " + v[i].dump());
        names.push_back(v[i].get<std::string>());
      }
    }
    if (names.empty()) fail(where, "no syscall \"names\"", "each entry lists the syscalls it applies to");

    if (!entry.contains("action")) fail(where, "\"action\" is missing");
    const uint32_t action = parse_action(entry["action"], optional_errno(entry, "errnoRet", "errno", where), where + ".action");
    const std::vector<scmp_arg_cmp> conds = parse_args(entry, where);

    // Conditions are validated above even for entries that do not apply here, so a broken
    // profile fails on every host, not only on the one that happens to evaluate the entry.
    const bool excluded = entry.contains("excludes") && !entry["excludes"].is_null() &&
                          condition(entry["excludes"], where + ".excludes", false);
    const bool included = !entry.contains("includes") || entry["includes"].is_null() ||
                          condition(entry["includes"], where + ".includes", true);
    if (excluded || !included) return;

    if (action == default_action_) {
      if (conds.empty()) return;  // same as no rule at all
      fail(where, "a rule with arguments cannot have the default action",
           "libseccomp cannot express it; use a different errnoRet or action");
    }

    std::set<unsigned> seen;
    const bool repeated_arg = std::any_of(conds.begin(), conds.end(), [&](const scmp_arg_cmp& c) { return !seen.insert(c.arg).second; });

    for (const std::string& name : names) {
      const int nr = seccomp_syscall_resolve_name(name.c_str());
      if (nr == __NR_SCMP_ERROR) continue;  // unknown to libseccomp: skipped, as Docker does
      if (repeated_arg) {
        for (const scmp_arg_cmp& c : conds) add_rule(filter, action, nr, {&c, 1}, where, name);
      } else {
        add_rule(filter, action, nr, conds, where, name);
      }
    }
  }

  std::vector<scmp_arg_cmp> parse_args(const json& entry, const std::string& where) const {
    std::vector<scmp_arg_cmp> conds;
    if (!entry.contains("args") || entry["args"].is_null()) return conds;
    const json& args = entry["args"];
    if (!args.is_array()) fail(where + ".args", "must be an array");
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string at = where + ".args[" + std::to_string(i) + "]";
      const json& a = args[i];
      if (!a.is_object()) fail(at, "must be an object");
      check_keys(a, at, {"index", "value", "valueTwo", "op"});
      if (!a.contains("index")) fail(at, "\"index\" is missing");
      if (!a.contains("op")) fail(at, "\"op\" is missing");
      const uint64_t idx = get_u64(a["index"], at + ".index");
      if (idx > kMaxArgIndex) fail(at + ".index", std::to_string(idx) + " is out of range", "syscall arguments are numbered 0..5");
      const uint64_t value = a.contains("value") ? get_u64(a["value"], at + ".value") : 0;
      const uint64_t value_two = a.contains("valueTwo") ? get_u64(a["valueTwo"], at + ".valueTwo") : 0;
      conds.push_back(scmp_arg_cmp{static_cast<unsigned>(idx), parse_op(a["op"], at + ".op"), value, value_two});
    }
    return conds;
  }

  void add_rule(scmp_filter_ctx filter, uint32_t action, int nr, std::span<const scmp_arg_cmp> conds,
                const std::string& where, const std::string& name) {
    RulesOf& seen = rules_[nr];
    const auto clash = [&](const std::map<uint32_t, std::string>& others) {
      for (const auto& [other_action, other_where] : others)
        if (other_action != action) return &other_where;
      return static_cast<const std::string*>(nullptr);
    };
    const std::string* other = conds.empty() ? clash(seen.conditional) : clash(seen.unconditional);
    if (other != nullptr)
      fail(where, "\"" + name + "\" has both a rule without conditions and one with conditions (" + *other +
                      "), with different actions; libseccomp would silently drop the conditional one",
           "give the unconditional rule a condition that always holds, e.g. "
           "{\"index\": 1, \"value\": 0, \"op\": \"SCMP_CMP_GE\"}");
    (conds.empty() ? seen.unconditional : seen.conditional).emplace(action, where);
    const int rc = seccomp_rule_add_array(filter, action, nr, static_cast<unsigned>(conds.size()), conds.data());
    if (rc != 0) throw Error(source_ + ": " + where + ": libseccomp refused the rule for \"" + name + "\"", {}, -rc);
  }

  void set_attr(scmp_filter_ctx filter, scmp_filter_attr attr, uint32_t value, const char* what) const {
    const int rc = seccomp_attr_set(filter, attr, value);
    if (rc != 0) throw Error(source_ + ": cannot set libseccomp " + what, "libseccomp 2.5 or newer is needed", -rc);
  }

  std::vector<sock_filter> export_bpf(scmp_filter_ctx filter) const {
    UniqueFd fd(memfd_create("sandboxrun-seccomp", MFD_CLOEXEC));
    if (!fd) throw_errno("memfd_create for the seccomp program of " + source_);
    if (const int rc = seccomp_export_bpf(filter, fd.get()); rc != 0)
      throw Error(source_ + ": cannot export the BPF program", {}, -rc);
    struct stat st{};
    if (fstat(fd.get(), &st) != 0) throw_errno("fstat on the seccomp program of " + source_);
    const auto size = static_cast<size_t>(st.st_size);
    if (size == 0 || size % sizeof(sock_filter) != 0)
      throw Error(source_ + ": libseccomp exported a malformed program (" + std::to_string(size) + " bytes)");
    std::vector<sock_filter> insns(size / sizeof(sock_filter));
    if (insns.size() > BPF_MAXINSNS)
      throw Error(source_ + ": the compiled filter has " + std::to_string(insns.size()) +
                  " instructions, more than the kernel's limit of " + std::to_string(BPF_MAXINSNS),
                  "merge rules or drop argument conditions");
    size_t done = 0;
    auto* bytes = reinterpret_cast<char*>(insns.data());
    while (done < size) {
      const ssize_t n = pread(fd.get(), bytes + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno("reading back the seccomp program of " + source_);
      if (n == 0) throw Error(source_ + ": the exported seccomp program is shorter than announced");
      done += static_cast<size_t>(n);
    }
    return insns;
  }

  bool allowed_unconditionally(const char* name) const {
    auto it = rules_.find(seccomp_syscall_resolve_name(name));
    return it != rules_.end() && it->second.unconditional.count(SCMP_ACT_ALLOW) && it->second.conditional.empty();
  }

  // Actions already given to one syscall, and the entry that gave each.
  struct RulesOf {
    std::map<uint32_t, std::string> unconditional, conditional;
  };

  std::string source_;
  const SeccompContext& ctx_;
  std::map<int, RulesOf> rules_;
  std::string native_arch_ = native_go_arch();
  std::optional<KernelVersion> kernel_;
  uint32_t default_action_ = 0;
};

}  // namespace

SeccompProgram compile_seccomp_profile_text(std::string_view text, const std::string& source_name,
                                            const SeccompContext& ctx) {
  return ProfileCompiler(source_name, ctx).compile(text);
}

std::string syscall_name(int nr) {
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  std::string out = name ? name : "syscall_" + std::to_string(nr);
  std::free(name);
  return out;
}

SeccompProgram compile_seccomp_profile(const std::filesystem::path& profile, const SeccompContext& ctx) {
  return compile_seccomp_profile_text(read_file(profile.string()), profile.string(), ctx);
}

}  // namespace sandboxrun
