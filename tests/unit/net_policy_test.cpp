#include <gtest/gtest.h>

#include "sandboxrun/error.hpp"
#include "net/net_policy.hpp"

namespace sandboxrun::net {
namespace {

Host host(std::string_view text) {
  auto c = normalize_host(text);
  EXPECT_TRUE(c.host) << text << ": " << c.reason;
  return c.host.value_or(Host{});
}

IpAddress ip(std::string_view text) {
  auto a = parse_ip(text);
  EXPECT_TRUE(a) << text;
  return a.value_or(IpAddress{});
}

TEST(NetHost, NormalisesCaseAndOneTrailingDot) {
  EXPECT_EQ(host("Files.PyPI.org.").text, "files.pypi.org");
  EXPECT_EQ(host("pypi.org").kind, Host::Kind::name);
  EXPECT_FALSE(normalize_host("pypi.org..").host);
  EXPECT_FALSE(normalize_host("").host);
  EXPECT_FALSE(normalize_host(".").host);
}

TEST(NetHost, RefusesBadCharactersAndLengths) {
  for (const char* bad : {"a b.org", "a..b", "exa$mple.com", "pypi.org%00", "a/b.org", "\xc3\xa9.org"})
    EXPECT_FALSE(normalize_host(bad).host) << bad;
  EXPECT_FALSE(normalize_host(std::string(64, 'a') + ".org").host);
  EXPECT_TRUE(normalize_host(std::string(63, 'a') + ".org").host);
  std::string long_name;
  while (long_name.size() < 254) long_name += "abcdefg.";
  long_name += "org";
  EXPECT_FALSE(normalize_host(long_name).host);
}

TEST(NetHost, CanonicalLiteralsAreAddresses) {
  EXPECT_EQ(host("127.0.0.1").kind, Host::Kind::ip);
  EXPECT_EQ(host("[::1]").text, "::1");
  EXPECT_EQ(host("[0:0::1]").text, "::1");
  EXPECT_EQ(host("::ffff:127.0.0.1").text, "127.0.0.1");  // mapped form is the IPv4 destination
  EXPECT_FALSE(normalize_host("[::1").host);
  EXPECT_FALSE(normalize_host("[fe80::1%eth0]").host);
}

TEST(NetHost, NumericIpv4FormsAreRefusedAsNonNames) {
  for (const char* form : {"2130706433", "0x7f.1", "127.1", "0177.0.0.1", "0x7f000001", "127.0.0.01", "1.0x1",
                           "127.0.0.1.2", "0X7F.0.0.1"}) {
    const auto c = normalize_host(form);
    EXPECT_FALSE(c.host) << form;
    EXPECT_NE(c.reason.find(form), std::string::npos) << c.reason;
  }
  // A numeric label is fine when the last label is a name.
  EXPECT_TRUE(normalize_host("1.2.3.example").host);
}

TEST(NetAllowlist, ExactNamesAreCaseInsensitive) {
  Allowlist list({"PyPI.org."});
  EXPECT_TRUE(list.allows(host("pypi.org")));
  EXPECT_TRUE(list.allows(host("PYPI.ORG.")));
  EXPECT_FALSE(list.allows(host("files.pypi.org")));
  EXPECT_FALSE(list.allows(host("pypi.org.evil.com")));
}

TEST(NetAllowlist, WildcardMatchesOnADotBoundaryOnly) {
  Allowlist list({"*.pypi.org"});
  EXPECT_TRUE(list.allows(host("files.pypi.org")));
  EXPECT_TRUE(list.allows(host("a.b.pypi.org")));
  EXPECT_FALSE(list.allows(host("pypi.org")));
  EXPECT_FALSE(list.allows(host("evil-pypi.org")));
  EXPECT_FALSE(list.allows(host("evilpypi.org")));
  EXPECT_FALSE(list.allows(host("pypi.org.evil.com")));
  Allowlist both({"*.pypi.org", "pypi.org"});
  EXPECT_TRUE(both.allows(host("pypi.org")));
}

TEST(NetAllowlist, IpLiteralsOnlyWhenListed) {
  Allowlist names({"*.pypi.org", "pypi.org"});
  EXPECT_FALSE(names.allows(host("151.101.0.223")));
  EXPECT_FALSE(names.allows(host("[2a04:4e42::223]")));
  Allowlist listed({"10.1.2.3", "[fd00::1]"});
  EXPECT_TRUE(listed.allows(host("10.1.2.3")));
  EXPECT_TRUE(listed.allows(host("[fd00:0::1]")));
  EXPECT_FALSE(listed.allows(host("10.1.2.4")));
}

TEST(NetAllowlist, RefusesDangerousEntries) {
  for (const char* bad : {"*", "*.org", "*.*.org", "pypi.*", "p*pi.org", "*.10.0.0.1", "", "2130706433", "a b"})
    EXPECT_THROW(Allowlist({bad}), Error) << bad;
  try {
    Allowlist({"pypi.org", "*.com"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'*.com'"), std::string::npos) << e.what();
  }
}

TEST(NetCidr, ParsesAndMatches) {
  const auto c = parse_cidr("172.16.0.0/12");
  EXPECT_TRUE(c.contains(ip("172.31.255.255")));
  EXPECT_FALSE(c.contains(ip("172.32.0.0")));
  EXPECT_FALSE(c.contains(ip("::1")));
  EXPECT_TRUE(parse_cidr("fd00::/8").contains(ip("fdff::1")));
  EXPECT_TRUE(parse_cidr("10.0.0.5").contains(ip("10.0.0.5")));
  EXPECT_FALSE(parse_cidr("10.0.0.5").contains(ip("10.0.0.6")));
  EXPECT_TRUE(parse_cidr("0.0.0.0/0").contains(ip("8.8.8.8")));
  for (const char* bad : {"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "::ffff:10.0.0.0/104", "[::1]/128",
                          "nope/8", "fe80::/129"})
    EXPECT_THROW(parse_cidr(bad), Error) << bad;
}

TEST(NetAddressPolicy, RefusesSpecialRanges) {
  const AddressPolicy policy({});
  for (const char* a : {"127.0.0.1", "127.255.0.1", "169.254.169.254", "169.254.1.1", "10.1.2.3", "172.16.0.1",
                        "172.31.255.254", "192.168.1.1", "100.64.0.1", "100.127.255.255", "0.0.0.0", "224.0.0.1",
                        "255.255.255.255", "::1", "::", "fe80::1", "febf::1", "fc00::1", "fd12::1", "ff02::1",
                        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1",
                        "::127.0.0.1"}) {
    const auto why = policy.deny_reason(ip(a));
    EXPECT_TRUE(why) << a;
    if (why) {
      EXPECT_NE(why->find("not in allow_networks"), std::string::npos) << *why;
    }
  }
  for (const char* a : {"151.101.0.223", "8.8.8.8", "172.32.0.1", "100.128.0.1", "169.255.0.1", "2a04:4e42::223",
                        "64:ff9b::808:808"})
    EXPECT_FALSE(policy.deny_reason(ip(a))) << a;
}

TEST(NetAddressPolicy, NamesTheRange) {
  EXPECT_EQ(special_range(ip("127.0.0.1")), "loopback");
  EXPECT_EQ(special_range(ip("169.254.169.254")), "link-local");
  EXPECT_EQ(special_range(ip("192.168.0.1")), "private");
  EXPECT_EQ(special_range(ip("100.64.0.1")), "shared address space (CGNAT)");
  EXPECT_EQ(special_range(ip("fd00::1")), "unique-local");
  EXPECT_EQ(special_range(ip("::")), "unspecified");
  EXPECT_EQ(special_range(ip("::1")), "loopback");
}

TEST(NetAddressPolicy, AllowNetworksOpenOnlyTheirRange) {
  const AddressPolicy policy({parse_cidr("127.0.0.0/8"), parse_cidr("fd00:1::/32")});
  EXPECT_FALSE(policy.deny_reason(ip("127.0.0.1")));
  EXPECT_FALSE(policy.deny_reason(ip("::ffff:127.0.0.1")));
  EXPECT_FALSE(policy.deny_reason(ip("fd00:1::5")));
  EXPECT_TRUE(policy.deny_reason(ip("fd00:2::5")));
  EXPECT_TRUE(policy.deny_reason(ip("169.254.169.254")));
  EXPECT_TRUE(policy.deny_reason(ip("::1")));
}

}  // namespace
}  // namespace sandboxrun::net
