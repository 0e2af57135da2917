// The dependency cache's files: publish, lookup, damage detection, locking and eviction, and
// the requirement parser's refusals. No sandbox: build directories are filled by the test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "deps/deps.hpp"
#include "sandboxrun/error.hpp"

namespace fs = std::filesystem;
using namespace sandboxrun;

namespace {

struct TempRoot {
  fs::path path;
  TempRoot() {
    std::string t = (fs::temp_directory_path() / "deps-cache-test-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempRoot() { fs::remove_all(path); }
};

void put(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

std::string build_entry(const deps::Cache& cache, const std::string& key, const std::string& body) {
  deps::KeyLock l = cache.lock(key, true);
  const deps::BuildDir b = cache.make_build_dir();
  put(b.out / "site/pkg/__init__.py", body);
  put(b.out / "site/pkg-1.0.dist-info/METADATA", "Name: pkg\n");
  cache.publish(b, key, {{"requirements", {"pkg==1.0"}}});
  cache.remove_build_dir(b);
  return key;
}

}  // namespace

TEST(DepsRequirements, NormalisesAndRefusesWhatBypassesTheIndex) {
  auto r = deps::parse_requirements("# comment\nB==2  # why\n\nA>=1 \\\n  --hash=sha256:ab12\nA>=1 \\\n --hash=sha256:ab12\n", "req.txt");
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[0], "A>=1 --hash=sha256:ab12");
  EXPECT_EQ(r.lines[1], "B==2");
  EXPECT_TRUE(r.hashes);
  for (const char* bad : {"-r other.txt", "-e .", "--index-url http://x/simple", "pkg @ https://x/p.whl",
                          "pkg --install-option=x", "-f http://x/", "pkg==1 --hash=md5:00"}) {
    try {
      deps::parse_requirements(std::string("ok==1\n") + bad + "\n", "req.txt");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("req.txt:2:"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(deps::parse_requirements("", "x").empty());
  EXPECT_FALSE(deps::check_requirement("numpy[extra]>=1.2; python_version>'3'").has_value());
}

TEST(DepsCache, PublishesLooksUpAndDetectsDamage) {
  TempRoot t;
  const auto cache = deps::Cache::open(t.path / "c");
  EXPECT_EQ(fs::status(t.path / "c").permissions() & fs::perms::all, fs::perms::owner_all);
  std::string damage;
  EXPECT_FALSE(cache.lookup("k1", false, &damage));
  EXPECT_TRUE(damage.empty());
  build_entry(cache, "k1", "X = 1\n");
  auto e = cache.lookup("k1", true, &damage);
  ASSERT_TRUE(e) << damage;
  EXPECT_EQ(e->files, 2u);
  // Same size, other bytes: only the full check sees it.
  put(cache.site("k1") / "pkg/__init__.py", "X = 2\n");
  EXPECT_TRUE(cache.lookup("k1", false, &damage));
  EXPECT_FALSE(cache.lookup("k1", true, &damage));
  EXPECT_NE(damage.find("sha256"), std::string::npos) << damage;
  // Truncated: the size check sees it.
  ::truncate((cache.site("k1") / "pkg/__init__.py").c_str(), 1);
  EXPECT_FALSE(cache.lookup("k1", false, &damage));
  EXPECT_NE(damage.find("bytes"), std::string::npos) << damage;
  // A half-written manifest.
  build_entry(cache, "k2", "Y = 1\n");
  ::truncate((t.path / "c/entries/k2/manifest").c_str(), 30);
  EXPECT_FALSE(cache.lookup("k2", false, &damage));
  EXPECT_NE(damage.find("manifest"), std::string::npos) << damage;
}

TEST(DepsCache, RefusesSymlinksInAnInstall) {
  TempRoot t;
  const auto cache = deps::Cache::open(t.path / "c");
  const deps::BuildDir b = cache.make_build_dir();
  fs::create_directories(b.out / "site");
  fs::create_symlink("/etc/shadow", b.out / "site/evil");
  EXPECT_THROW(cache.publish(b, "k", {}), Error);
  cache.remove_build_dir(b);
  EXPECT_FALSE(fs::exists(b.dir));
}

TEST(DepsCache, EvictsLeastRecentlyUsedAndSkipsEntriesInUse) {
  TempRoot t;
  const auto cache = deps::Cache::open(t.path / "c");
  build_entry(cache, "old", std::string(1000, 'a'));
  build_entry(cache, "mid", std::string(1000, 'b'));
  build_entry(cache, "new", std::string(1000, 'c'));
  struct timespec ts[2] = {{1000, 0}, {1000, 0}};
  ::utimensat(AT_FDCWD, (t.path / "c/entries/old/record.json").c_str(), ts, 0);
  ts[0].tv_sec = ts[1].tv_sec = 2000;
  ::utimensat(AT_FDCWD, (t.path / "c/entries/mid/record.json").c_str(), ts, 0);
  {
    deps::KeyLock in_use = cache.lock("old", false);
    auto r = cache.gc(2100, false);
    ASSERT_EQ(r.removed.size(), 1u);
    EXPECT_EQ(r.removed[0], "mid") << "old is in use: the next least recently used goes";
  }
  auto r = cache.gc(1100, false, "new");
  ASSERT_EQ(r.removed.size(), 1u);
  EXPECT_EQ(r.removed[0], "old");
  EXPECT_TRUE(cache.lookup("new", true, nullptr));
}

TEST(DepsCache, RefusesARootOthersCanReach) {
  TempRoot t;
  fs::create_directory(t.path / "open");
  ::chmod((t.path / "open").c_str(), 0755);
  EXPECT_THROW(deps::Cache::open(t.path / "open"), Error);
  fs::create_directory_symlink(t.path / "open", t.path / "link");
  EXPECT_THROW(deps::Cache::open(t.path / "link"), Error);
}
