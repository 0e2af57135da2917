// Where an installation's files are found: the binary's own prefix (any prefix works), the FHS
// places for /usr, the source tree for binaries built inside it, the configured prefix last.
#include <gtest/gtest.h>

#include "sandboxrun/error.hpp"
#include "common/install_paths.hpp"
#include "test_util.hpp"

namespace sandboxrun {
namespace {

TEST(InstallPaths, AnInstalledBinaryUsesItsOwnPrefix) {
  test_util::TempDir p;
  std::filesystem::create_directories(p / "share/sandboxrun");
  InstallPaths ip = compute_install_paths(p / "bin/sandboxrun", "/nonexistent/src", "/usr/local");
  EXPECT_EQ(ip.prefix, p.path());
  EXPECT_EQ(ip.data_dir, p / "share/sandboxrun");
  EXPECT_EQ(ip.state_dir, p / "var/lib/sandboxrun");
  ASSERT_EQ(ip.config_dirs.size(), 2u);
  EXPECT_EQ(ip.config_dirs[0], "/etc/sandboxrun");
  EXPECT_EQ(ip.config_dirs[1], p / "etc/sandboxrun");
}

TEST(InstallPaths, TheHttpHelperInLibexecUsesItsPrefix) {
  // `sandboxrun mcp --http` runs P/libexec/sandboxrun/sandboxrun-mcp-http: the same prefix.
  test_util::TempDir p;
  std::filesystem::create_directories(p / "share/sandboxrun");
  InstallPaths ip = compute_install_paths(p / "libexec/sandboxrun/sandboxrun-mcp-http", "/nonexistent/src", "/usr/local");
  EXPECT_EQ(ip.prefix, p.path());
  EXPECT_EQ(ip.data_dir, p / "share/sandboxrun");
}

TEST(InstallPaths, PrefixUsrKeepsConfigInEtcAndStateInVar) {
  InstallPaths ip = compute_install_paths("/nonexistent/bin/x", "/nonexistent/src", "/usr");
  EXPECT_EQ(ip.data_dir, "/usr/share/sandboxrun");
  EXPECT_EQ(ip.state_dir, "/var/lib/sandboxrun");
  EXPECT_EQ(ip.config_dirs, std::vector<std::filesystem::path>{"/etc/sandboxrun"});
}

TEST(InstallPaths, ABinaryInTheSourceTreeUsesTheTree) {
  InstallPaths ip = compute_install_paths(SANDBOXRUN_SOURCE_DIR "/build/sandboxrun", SANDBOXRUN_SOURCE_DIR, "/usr/local");
  EXPECT_TRUE(ip.prefix.empty());
  EXPECT_EQ(ip.data_dir, SANDBOXRUN_SOURCE_DIR);
  EXPECT_EQ(ip.config_dirs.back(), std::filesystem::path(SANDBOXRUN_SOURCE_DIR) / "config");
  // The same tree seen from a binary elsewhere is not used: the configured prefix is.
  InstallPaths other = compute_install_paths("/opt/svc/bin/svc", SANDBOXRUN_SOURCE_DIR, "/usr/local");
  EXPECT_EQ(other.data_dir, "/usr/local/share/sandboxrun");
}

TEST(InstallPaths, FindDataFileListsEveryPlaceTried) {
  test_util::TempDir d;
  d.write("here.json", "{}");
  EXPECT_EQ(find_data_file("here.json", d.path(), "profile"), d / "here.json");
  EXPECT_EQ(find_data_file("policies/default.json", d.path(), "profile"),
            std::filesystem::path(SANDBOXRUN_SOURCE_DIR) / "policies/default.json");
  try {
    find_data_file("missing.json", d.path(), "seccomp profile");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find((d / "missing.json").string()), std::string::npos) << m;
    EXPECT_NE(m.find(SANDBOXRUN_SOURCE_DIR "/missing.json"), std::string::npos) << m;
  }
}

// The parsed-form caches (configuration, rules) live with the other caches, /var/cache/sandboxrun
// for root; SANDBOXRUN_CACHE_DIR set but empty turns them off.
TEST(InstallPaths, ParsedCachesLiveInTheCacheRootUnlessTurnedOff) {
  ::setenv("SANDBOXRUN_CACHE_DIR", "/x/cache", 1);
  EXPECT_EQ(parsed_cache_dir(), std::filesystem::path("/x/cache"));
  ::setenv("SANDBOXRUN_CACHE_DIR", "", 1);
  EXPECT_FALSE(parsed_cache_dir());
  ::unsetenv("SANDBOXRUN_CACHE_DIR");
  if (::geteuid() == 0) EXPECT_EQ(parsed_cache_dir(), std::filesystem::path("/var/cache/sandboxrun"));
  else EXPECT_EQ(parsed_cache_dir(), default_cache_root());
}

}  // namespace
}  // namespace sandboxrun
