// security.yaml's override policy: parsing (strict, names resolved) and the check of one
// override (who, and whether the reason says anything).
#include <gtest/gtest.h>

#include <string>

#include "sandboxrun/assess.hpp"
#include "sandboxrun/error.hpp"
#include "test_util.hpp"

using namespace sandboxrun;
using test_util::TempDir;

namespace {

const std::filesystem::path kRoot = SANDBOXRUN_SOURCE_DIR;
const std::string kRules = "rules: policies/assess-rules.yaml\n";

OverridePolicy load(const std::string& yaml) {
  TempDir d;
  return load_security_config(d.write("security.yaml", kRules + yaml), kRoot).override_policy;
}

std::string load_error(const std::string& yaml) {
  try {
    load(yaml);
  } catch (const Error& e) {
    return e.describe();
  }
  return "no error";
}

ProcessIdentity user(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) { return {uid, gid, std::move(groups)}; }

// nullopt when allowed, else the message.
std::optional<std::string> check(const OverridePolicy& p, std::string_view reason, const ProcessIdentity& who = user(0, 0)) {
  return check_override(p, reason, who, "/etc/sandboxrun/security.yaml");
}

}  // namespace

TEST(OverrideConfig, DefaultsAndShippedFile) {
  const OverridePolicy none = load("");
  EXPECT_EQ(none.min_reason_length, 12u);
  EXPECT_FALSE(none.allowed_uids);
  EXPECT_FALSE(none.allowed_groups);
  const OverridePolicy shipped = load_security_config(kRoot / "config/security.yaml", kRoot).override_policy;
  EXPECT_EQ(shipped.min_reason_length, 12u);
  EXPECT_FALSE(shipped.allowed_uids) << "the shipped file lets anyone override, as documented";
}

TEST(OverrideConfig, NamesAndIdsResolve) {
  const OverridePolicy p = load("override:\n  min_reason_length: 20\n  allowed_uids: [root, 4242]\n"
                                "  allowed_groups: [nogroup, 77]\n");
  EXPECT_EQ(p.min_reason_length, 20u);
  ASSERT_TRUE(p.allowed_uids && p.allowed_groups);
  EXPECT_EQ(*p.allowed_uids, (std::vector<uid_t>{0, 4242}));
  EXPECT_EQ(*p.allowed_groups, (std::vector<gid_t>{65534, 77}));
  const OverridePolicy nobody = load("override: {allowed_uids: [], allowed_groups: []}\n");
  ASSERT_TRUE(nobody.allowed_uids && nobody.allowed_groups);
  EXPECT_TRUE(nobody.allowed_uids->empty() && nobody.allowed_groups->empty());
}

TEST(OverrideConfig, StrictErrorsNameFileAndKey) {
  std::string e = load_error("override: {min_reason_lenght: 12}\n");
  EXPECT_NE(e.find("security.yaml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("override.min_reason_lenght"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  e = load_error("override: {min_reason_length: 2}\n");
  EXPECT_NE(e.find("override.min_reason_length"), std::string::npos) << e;
  e = load_error("override: {min_reason_length: twelve}\n");
  EXPECT_NE(e.find("override.min_reason_length"), std::string::npos) << e;
  e = load_error("override: {allowed_uids: root}\n");
  EXPECT_NE(e.find("override.allowed_uids"), std::string::npos) << e;
  EXPECT_NE(e.find("a list of user names or uids"), std::string::npos) << e;
  e = load_error("override: {allowed_uids: [no-such-user-xyz]}\n");
  EXPECT_NE(e.find("override.allowed_uids[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("no-such-user-xyz"), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  e = load_error("override: {allowed_groups: [root, no-such-group-xyz]}\n");
  EXPECT_NE(e.find("override.allowed_groups[1]"), std::string::npos) << e;
  e = load_error("override: {allowed_groups: [4294967295]}\n");
  EXPECT_NE(e.find("override.allowed_groups[0]"), std::string::npos) << e;
  e = load_error("override: {allowed_uids: [[0]]}\n");
  EXPECT_NE(e.find("override.allowed_uids[0]"), std::string::npos) << e;
  e = load_error("override: yes\n");
  EXPECT_NE(e.find("key 'override'"), std::string::npos) << e;
}

TEST(OverridePolicyCheck, TokenReasonsAreRefused) {
  const OverridePolicy p;  // min_reason_length 12, anyone
  EXPECT_EQ(check(p, "reviewed by the on-call engineer"), std::nullopt);
  EXPECT_EQ(check(p, "  ticket 42: ok  "), std::nullopt);
  EXPECT_EQ(check(p, "überprüft, läuft"), std::nullopt) << "non-ASCII letters count";
  auto refused = [&](std::string_view reason, const std::string& says) {
    auto why = check(p, reason);
    ASSERT_TRUE(why) << "'" << reason << "' must be refused";
    EXPECT_NE(why->find(says), std::string::npos) << *why;
  };
  refused("", "empty");
  refused("   \t  ", "empty");
  refused("because", "has 7 characters; give a reason of at least 12 characters");
  refused("   because     ", "has 7 characters");
  refused("äöüäöüäöüäö", "has 11 characters");  // 22 bytes, 11 characters
  refused("aaaaaaaaaaaaaaaa", "fewer than 4 distinct letters or digits");
  refused("!!!!!!!!!!!!!!!!", "fewer than 4 distinct");
  refused("abababababab", "fewer than 4 distinct");
  refused("AaAaBbBbCcCc....", "fewer than 4 distinct");  // case-folded
  refused("reviewed\nby me today", "control characters");
  refused("reviewed \x1b[2J by me", "control characters");
  refused(std::string(1001, 'x'), "at most 1000");
  EXPECT_NE(check(p, "because")->find("/etc/sandboxrun/security.yaml"), std::string::npos) << "names the file";

  OverridePolicy longer;
  longer.min_reason_length = 30;
  EXPECT_NE(check(longer, "reviewed by me today"), std::nullopt);
  EXPECT_EQ(check(longer, "reviewed by the on-call engineer"), std::nullopt);
}

TEST(OverridePolicyCheck, WhoMayOverride) {
  OverridePolicy p;
  const std::string reason = "reviewed by the on-call engineer";
  EXPECT_EQ(check(p, reason, user(65534, 65534)), std::nullopt) << "no lists: anyone";

  p.allowed_uids = std::vector<uid_t>{0, 1001};
  EXPECT_EQ(check(p, reason, user(1001, 1001)), std::nullopt);
  auto why = check(p, reason, user(65534, 65534));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("uid 65534"), std::string::npos) << *why;
  EXPECT_NE(why->find("override.allowed_uids"), std::string::npos) << *why;
  EXPECT_NE(check(p, "x", user(65534, 65534))->find("may not override"), std::string::npos)
      << "who is judged before the reason";

  p.allowed_uids.reset();
  p.allowed_groups = std::vector<gid_t>{4000};
  EXPECT_EQ(check(p, reason, user(1002, 4000)), std::nullopt) << "the real gid";
  EXPECT_EQ(check(p, reason, user(1002, 1002, {27, 4000})), std::nullopt) << "a supplementary group";
  EXPECT_NE(check(p, reason, user(0, 0, {0})), std::nullopt) << "an absent uid list grants nothing, root included";

  p.allowed_uids = std::vector<uid_t>{};
  p.allowed_groups = std::vector<gid_t>{};
  why = check(p, reason, user(0, 0, {0}));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("nobody may override"), std::string::npos) << *why;
}

TEST(OverrideConfig, AKeyGivenTwiceIsRefused) {
  std::string e = load_error("override: {min_reason_length: 12, min_reason_length: 40}\n");
  EXPECT_NE(e.find("'min_reason_length' is given twice"), std::string::npos) << e;
  e = load_error("override: {min_reason_lenth: 12}\n");
  EXPECT_NE(e.find("did you mean 'min_reason_length'?"), std::string::npos) << e;
}

// One decision a run, from its verdict, the request and the override (with its policy).
TEST(Decide, TheVerdictTightensAndOnlyAnAcceptedOverrideOpensABlock) {
  TempDir d;
  const SecurityConfig c =
      load_security_config(d.write("security.yaml", kRules + "override: {allowed_uids: [4242]}\n"), kRoot);
  const ProcessIdentity ops = user(4242, 4242), other = user(1000, 1000);
  const std::optional<std::string> none, reason = "reviewed the socket use with the data team on ticket 88";

  Decision low = decide(RiskLevel::low, Trust::trusted, none, c, other);
  EXPECT_EQ(low.used, Trust::trusted);
  EXPECT_FALSE(low.overridden);
  EXPECT_EQ(decide(RiskLevel::high, Trust::trusted, none, c, other).used, Trust::untrusted);
  // An override that is not needed changes nothing and is not checked (nor recorded).
  Decision unneeded = decide(RiskLevel::medium, Trust::trusted, reason, c, other);
  EXPECT_EQ(unneeded.used, Trust::unknown);
  EXPECT_FALSE(unneeded.overridden);
  EXPECT_FALSE(unneeded.override_refused);

  Decision blocked = decide(RiskLevel::blocked, Trust::trusted, none, c, ops);
  EXPECT_TRUE(blocked.refused());
  EXPECT_FALSE(blocked.override_refused);
  Decision accepted = decide(RiskLevel::blocked, Trust::trusted, reason, c, ops);
  EXPECT_EQ(accepted.used, Trust::untrusted);
  EXPECT_TRUE(accepted.overridden);
  Decision not_allowed = decide(RiskLevel::blocked, Trust::trusted, reason, c, other);
  EXPECT_TRUE(not_allowed.refused());
  EXPECT_FALSE(not_allowed.overridden);
  ASSERT_TRUE(not_allowed.override_refused);
  Decision token = decide(RiskLevel::blocked, Trust::trusted, std::string("ok"), c, ops);
  EXPECT_TRUE(token.refused());
  EXPECT_TRUE(token.override_refused);
}
