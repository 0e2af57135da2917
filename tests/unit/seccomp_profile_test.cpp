// Loading and compiling profiles: ours, Docker's unchanged, conditions, and malformed input.
#include <gtest/gtest.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstring>
#include <string>
#include <vector>

#include "sandboxrun/error.hpp"
#include "sandboxrun/seccomp.hpp"

namespace sandboxrun {
namespace {

const std::string kPolicies = std::string(SANDBOXRUN_SOURCE_DIR) + "/policies";
const std::string kDockerProfile = SANDBOXRUN_DOCKER_PROFILE;

bool same_program(const SeccompProgram& a, const SeccompProgram& b) {
  return a.instructions.size() == b.instructions.size() &&
         std::memcmp(a.instructions.data(), b.instructions.data(), a.instructions.size() * sizeof(sock_filter)) == 0;
}

SeccompProgram compile_text(const std::string& json, const SeccompContext& ctx = {}) {
  return compile_seccomp_profile_text(json, "inline.json", ctx);
}

std::string profile_with(const std::string& entries) {
  return R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [)" + entries + "]}";
}

const std::string kGetpid = R"({"names": ["getpid"], "action": "SCMP_ACT_ALLOW"})";

TEST(SeccompProfile, CompilesDockerProfileUnchanged) {
  const SeccompProgram prog = compile_seccomp_profile(kDockerProfile, SeccompContext{});
  EXPECT_EQ(prog.source, kDockerProfile);
  EXPECT_GT(prog.instructions.size(), 100u);
  EXPECT_LE(prog.instructions.size(), static_cast<size_t>(BPF_MAXINSNS));
  EXPECT_EQ(prog.fprog().len, prog.instructions.size());
}

TEST(SeccompProfile, DockerCapabilityConditionsChangeTheProgram) {
  // The CAP_SYS_ADMIN entries (mount, unshare, clone with any flags ...) only apply to a
  // process holding the capability; sandboxrun holds none.
  const SeccompProgram none = compile_seccomp_profile(kDockerProfile, SeccompContext{});
  const SeccompProgram admin = compile_seccomp_profile(kDockerProfile, SeccompContext{{"CAP_SYS_ADMIN"}, {}});
  EXPECT_FALSE(same_program(none, admin));
}

TEST(SeccompProfile, CompilesDockerProfileWithEveryCapabilityItNames) {
  const SeccompContext all{{"CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH", "CAP_SYS_BOOT", "CAP_SYS_CHROOT", "CAP_SYS_MODULE",
                            "CAP_SYS_PACCT", "CAP_SYS_PTRACE", "CAP_SYS_RAWIO", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG",
                            "CAP_SYS_NICE", "CAP_SYSLOG", "CAP_BPF", "CAP_PERFMON"},
                           {}};
  EXPECT_GT(compile_seccomp_profile(kDockerProfile, all).instructions.size(), 100u);
}

TEST(SeccompProfile, CompilesOurProfiles) {
  for (const char* name : {"default.json", "untrusted.json"}) {
    SCOPED_TRACE(name);
    const SeccompProgram prog = compile_seccomp_profile(kPolicies + "/" + name, SeccompContext{});
    EXPECT_GT(prog.instructions.size(), 50u);
    EXPECT_LE(prog.instructions.size(), static_cast<size_t>(BPF_MAXINSNS));
  }
  EXPECT_FALSE(same_program(compile_seccomp_profile(kPolicies + "/default.json", {}),
                            compile_seccomp_profile(kPolicies + "/untrusted.json", {})));
}

// The notify program differs from the plain one exactly where the plain one answers EPERM.
size_t user_notif_returns(const std::vector<sock_filter>& insns) {
  size_t n = 0;
  for (const auto& i : insns) n += i.code == (BPF_RET | BPF_K) && i.k == SECCOMP_RET_USER_NOTIF;
  return n;
}

TEST(SeccompProfile, EpermDenialsHaveANotifyVariantWhenTheListenerCanBeHandedOver) {
  const SeccompProgram ours = compile_seccomp_profile(kPolicies + "/untrusted.json", {});
  ASSERT_EQ(ours.notify_instructions.size(), ours.instructions.size());
  EXPECT_GT(user_notif_returns(ours.notify_instructions), 0u);
  EXPECT_EQ(user_notif_returns(ours.instructions), 0u);
  const std::string handover = R"({"names": ["sendmsg", "close"], "action": "SCMP_ACT_ALLOW"})";
  EXPECT_FALSE(compile_text(profile_with(handover + "," + kGetpid)).notify_instructions.empty());
  // Without sendmsg the payload could not hand the listener over: no notify variant.
  EXPECT_TRUE(compile_text(profile_with(kGetpid)).notify_instructions.empty());
  // A default other than EPERM is left alone.
  EXPECT_TRUE(compile_text(R"({"defaultAction": "SCMP_ACT_KILL_PROCESS", "syscalls": [)" + handover + "]}")
                  .notify_instructions.empty());
}

TEST(SeccompProfile, SameActionWithAndWithoutConditionsIsAccepted) {
  // Redundant but not misleading: the conditional rule only repeats what the other allows.
  EXPECT_NO_THROW(compile_text(profile_with(
      R"({"names": ["socket"], "action": "SCMP_ACT_ALLOW"},
         {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]})")));
}

TEST(SeccompProfile, UnknownSyscallNamesAreSkipped) {
  const SeccompProgram plain = compile_text(profile_with(kGetpid));
  const SeccompProgram with_unknown =
      compile_text(profile_with(R"({"names": ["getpid", "no_such_syscall_xyz"], "action": "SCMP_ACT_ALLOW"})"));
  EXPECT_TRUE(same_program(plain, with_unknown));
}

TEST(SeccompProfile, RuleWithTheDefaultActionAndNoArgsIsANoOp) {
  const SeccompProgram plain = compile_text(profile_with(kGetpid));
  const SeccompProgram with_noop =
      compile_text(profile_with(kGetpid + R"(, {"names": ["getppid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1})"));
  EXPECT_TRUE(same_program(plain, with_noop));
}

TEST(SeccompProfile, ArchitecturesBeyondTheNativeOneAreNotCompiledIn) {
  // Docker would add i386 and x32 for this archMap; sandboxrun kills those ABIs instead.
  const SeccompProgram plain = compile_text(profile_with(kGetpid));
  const SeccompProgram mapped = compile_text(
      R"({"defaultAction": "SCMP_ACT_ERRNO",
          "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
                      {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}],
          "syscalls": [)" + kGetpid + "]}");
  EXPECT_TRUE(same_program(plain, mapped));
}

// An entry guarded by a condition must compile exactly like the bare entry when the condition
// holds, and like no entry at all when it does not.
struct ConditionCase {
  const char* name;
  std::string condition;  // "includes": {...} or "excludes": {...}
  SeccompContext ctx;
  bool applies;
};

void PrintTo(const ConditionCase& c, std::ostream* os) { *os << c.name; }

class SeccompCondition : public ::testing::TestWithParam<ConditionCase> {};

TEST_P(SeccompCondition, DecidesWhetherTheEntryApplies) {
  const ConditionCase& c = GetParam();
  const std::string guarded =
      R"({"names": ["getppid"], "action": "SCMP_ACT_ALLOW", )" + c.condition + "}";
  const SeccompProgram got = compile_text(profile_with(kGetpid + ", " + guarded), c.ctx);
  const SeccompProgram with_entry =
      compile_text(profile_with(kGetpid + R"(, {"names": ["getppid"], "action": "SCMP_ACT_ALLOW"})"));
  const SeccompProgram without_entry = compile_text(profile_with(kGetpid));
  ASSERT_FALSE(same_program(with_entry, without_entry));
  EXPECT_TRUE(same_program(got, c.applies ? with_entry : without_entry));
}

#if defined(__x86_64__)
#define NATIVE_GO_ARCH "amd64"
#elif defined(__aarch64__)
#define NATIVE_GO_ARCH "arm64"
#endif

INSTANTIATE_TEST_SUITE_P(
    Conditions, SeccompCondition,
    ::testing::Values(
        ConditionCase{"cap_missing", R"("includes": {"caps": ["CAP_SYS_ADMIN"]})", {}, false},
        ConditionCase{"cap_held", R"("includes": {"caps": ["CAP_SYS_ADMIN"]})", {{"CAP_SYS_ADMIN"}, {}}, true},
        ConditionCase{"one_of_two_caps_held", R"("includes": {"caps": ["CAP_SYS_ADMIN", "CAP_BPF"]})",
                      {{"CAP_SYS_ADMIN"}, {}}, false},
        ConditionCase{"exclude_cap_missing", R"("excludes": {"caps": ["CAP_SYS_ADMIN"]})", {}, true},
        ConditionCase{"exclude_cap_held", R"("excludes": {"caps": ["CAP_SYS_ADMIN"]})", {{"CAP_SYS_ADMIN"}, {}}, false},
        ConditionCase{"native_arch", R"("includes": {"arches": [")" NATIVE_GO_ARCH R"("]})", {}, true},
        ConditionCase{"other_arches", R"("includes": {"arches": ["s390", "s390x", "x32", "x86"]})", {}, false},
        ConditionCase{"exclude_native_arch", R"("excludes": {"arches": [")" NATIVE_GO_ARCH R"("]})", {}, false},
        ConditionCase{"exclude_other_arch", R"("excludes": {"arches": ["s390x"]})", {}, true},
        ConditionCase{"kernel_new_enough", R"("includes": {"minKernel": "4.8"})", {{}, "4.8.0-1-amd64"}, true},
        ConditionCase{"kernel_too_old", R"("includes": {"minKernel": "4.8"})", {{}, "4.7.10"}, false},
        ConditionCase{"kernel_minor_compared_numerically", R"("includes": {"minKernel": "4.10"})",
                      {{}, "4.9.300"}, false},
        ConditionCase{"kernel_patch_level", R"("includes": {"minKernel": "6.1.5"})", {{}, "6.1.4-rt"}, false},
        ConditionCase{"exclude_kernel_new", R"("excludes": {"minKernel": "5.0"})", {{}, "6.18.44-fc"}, false},
        ConditionCase{"exclude_kernel_equal", R"("excludes": {"minKernel": "6.1"})", {{}, "6.1.0-18-amd64"}, false},
        ConditionCase{"exclude_kernel_old", R"("excludes": {"minKernel": "5.0"})", {{}, "4.19.0"}, true},
        ConditionCase{"running_kernel", R"("includes": {"minKernel": "3.0"})", {}, true}),
    [](const ::testing::TestParamInfo<ConditionCase>& p) { return std::string(p.param.name); });

struct MalformedCase {
  const char* name;
  std::string json;
  std::vector<std::string> expected;  // substrings of the error message
};

void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.name; }

class SeccompMalformed : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(SeccompMalformed, ThrowsErrorNamingFileAndEntry) {
  const MalformedCase& c = GetParam();
  try {
    compile_seccomp_profile_text(c.json, "bad.json", SeccompContext{});
    FAIL() << "compiled without error: " << c.json;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("bad.json: ", 0), 0u) << msg;
    for (const std::string& part : c.expected) EXPECT_NE(msg.find(part), std::string::npos) << msg << "\nmissing: " << part;
  }
}

std::string one_entry(const std::string& entry) { return profile_with(kGetpid + ", " + entry); }

INSTANTIATE_TEST_SUITE_P(
    Table, SeccompMalformed,
    ::testing::Values(
        MalformedCase{"bad_json", R"({"defaultAction": "SCMP_ACT_ERRNO",)", {"not valid JSON"}},
        MalformedCase{"number_overflow", R"({"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1e999})",
                      {"not valid JSON"}},
        MalformedCase{"value_beyond_64_bits",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW",
                                    "args": [{"index": 0, "value": 18446744073709551616, "op": "SCMP_CMP_EQ"}]})"),
                      {"syscalls[1].args[0].value", "non-negative integer"}},
        MalformedCase{"not_an_object", "[]", {"top level", "must be a JSON object"}},
        MalformedCase{"missing_default_action", R"({"syscalls": []})", {"defaultAction", "missing"}},
        MalformedCase{"unknown_default_action", R"({"defaultAction": "SCMP_ACT_DENY"})",
                      {"defaultAction", "unknown action \"SCMP_ACT_DENY\""}},
        MalformedCase{"unknown_top_level_key", R"({"defaultAction": "SCMP_ACT_ERRNO", "sycalls": []})",
                      {"unknown key \"sycalls\""}},
        MalformedCase{"syscalls_not_array", R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": {}})",
                      {"syscalls", "must be an array"}},
        MalformedCase{"unknown_action", one_entry(R"({"names": ["read"], "action": "SCMP_ACT_FOO"})"),
                      {"syscalls[1].action", "unknown action \"SCMP_ACT_FOO\""}},
        MalformedCase{"notify_refused", one_entry(R"({"names": ["read"], "action": "SCMP_ACT_NOTIFY"})"),
                      {"syscalls[1].action", "SCMP_ACT_NOTIFY", "not supported"}},
        MalformedCase{"listener_refused",
                      R"({"defaultAction": "SCMP_ACT_ERRNO", "listenerPath": "/run/agent.sock"})",
                      {"listenerPath", "not supported"}},
        MalformedCase{"flags_refused",
                      R"({"defaultAction": "SCMP_ACT_ERRNO", "flags": ["SECCOMP_FILTER_FLAG_LOG"]})",
                      {"flags", "not supported"}},
        MalformedCase{"missing_action", one_entry(R"({"names": ["read"]})"), {"syscalls[1]", "\"action\" is missing"}},
        MalformedCase{"missing_names", one_entry(R"({"action": "SCMP_ACT_ALLOW"})"),
                      {"syscalls[1]", "no syscall \"names\""}},
        MalformedCase{"empty_names", one_entry(R"({"names": [], "action": "SCMP_ACT_ALLOW"})"),
                      {"syscalls[1]", "no syscall \"names\""}},
        MalformedCase{"name_not_string", one_entry(R"({"names": ["read", 3], "action": "SCMP_ACT_ALLOW"})"),
                      {"syscalls[1].names[1]", "must be a syscall name"}},
        MalformedCase{"name_and_names", one_entry(R"({"name": "read", "names": ["read"], "action": "SCMP_ACT_ALLOW"})"),
                      {"syscalls[1]", "mutually exclusive"}},
        MalformedCase{"unknown_entry_key", one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW", "arg": []})"),
                      {"syscalls[1]", "unknown key \"arg\""}},
        MalformedCase{"unknown_op",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW",
                                    "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_MASKED_NE"}]})"),
                      {"syscalls[1].args[0].op", "unknown op \"SCMP_CMP_MASKED_NE\""}},
        MalformedCase{"index_out_of_range",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW",
                                    "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]})"),
                      {"syscalls[1].args[0].index", "out of range"}},
        MalformedCase{"missing_op",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1}]})"),
                      {"syscalls[1].args[0]", "\"op\" is missing"}},
        MalformedCase{"negative_value",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW",
                                    "args": [{"index": 0, "value": -1, "op": "SCMP_CMP_EQ"}]})"),
                      {"syscalls[1].args[0].value", "non-negative integer"}},
        MalformedCase{"fractional_value",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW",
                                    "args": [{"index": 0, "value": 1.5, "op": "SCMP_CMP_EQ"}]})"),
                      {"syscalls[1].args[0].value", "non-negative integer"}},
        MalformedCase{"errno_too_large", one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": 5000})"),
                      {"syscalls[1].errnoRet", "not an errno"}},
        MalformedCase{"errno_on_allow", one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1})"),
                      {"syscalls[1].action", "errnoRet is only valid"}},
        MalformedCase{"bad_min_kernel",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4"}})"),
                      {"syscalls[1].includes.minKernel", "kernel version"}},
        MalformedCase{"unknown_condition_key",
                      one_entry(R"({"names": ["read"], "action": "SCMP_ACT_ALLOW", "excludes": {"capabilities": []}})"),
                      {"syscalls[1].excludes", "unknown key \"capabilities\""}},
        MalformedCase{"conditional_default_action",
                      one_entry(R"({"names": ["ioctl"], "action": "SCMP_ACT_ERRNO",
                                    "args": [{"index": 1, "value": 21522, "op": "SCMP_CMP_EQ"}]})"),
                      {"syscalls[1]", "cannot have the default action"}},
        MalformedCase{"unconditional_swallows_conditional",
                      one_entry(R"({"names": ["ioctl"], "action": "SCMP_ACT_ALLOW"},
                                   {"names": ["ioctl"], "action": "SCMP_ACT_KILL_PROCESS",
                                    "args": [{"index": 1, "value": 4294967295, "valueTwo": 21522, "op": "SCMP_CMP_MASKED_EQ"}]})"),
                      {"syscalls[2]", "\"ioctl\"", "(syscalls[1])", "silently drop"}},
        MalformedCase{"conditional_then_unconditional",
                      one_entry(R"({"names": ["socket"], "action": "SCMP_ACT_ALLOW",
                                    "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]},
                                   {"names": ["socket"], "action": "SCMP_ACT_KILL"})"),
                      {"syscalls[2]", "\"socket\"", "(syscalls[1])"}},
        MalformedCase{"arches_and_archmap",
                      R"({"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "archMap": []})",
                      {"mutually exclusive"}},
        MalformedCase{"archmap_entry_not_object", R"({"defaultAction": "SCMP_ACT_ERRNO", "archMap": ["x86_64"]})",
                      {"archMap[0]", "must be an object"}}),
    [](const ::testing::TestParamInfo<MalformedCase>& p) { return std::string(p.param.name); });

TEST(SeccompProfile, MissingFileNamesThePath) {
  try {
    compile_seccomp_profile(kPolicies + "/no-such-profile.json", SeccompContext{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-profile.json"), std::string::npos) << e.what();
    EXPECT_EQ(e.sys_errno(), ENOENT);
  }
}

}  // namespace
}  // namespace sandboxrun
