// The compiled-program cache: a second load comes from the cache and is the same program; a
// damaged, foreign or planted entry is never used; an unsafe directory is not used at all.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "sandboxrun/seccomp.hpp"
#include "test_util.hpp"

namespace sandboxrun {
namespace {

const std::filesystem::path kProfile = std::filesystem::path(SANDBOXRUN_SOURCE_DIR) / "policies/untrusted.json";

bool same(const SeccompProgram& a, const SeccompProgram& b) {
  auto eq = [](const std::vector<sock_filter>& x, const std::vector<sock_filter>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(sock_filter)) == 0;
  };
  return eq(a.instructions, b.instructions) && eq(a.notify_instructions, b.notify_instructions);
}

std::vector<std::filesystem::path> entries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

TEST(SeccompCache, ASecondLoadComesFromTheCacheAndIsTheSameProgram) {
  test_util::TempDir d;
  const auto cache = d / "cache";
  bool hit = true;
  const SeccompProgram fresh = compile_seccomp_profile(kProfile, {});
  const SeccompProgram first = load_or_compile_seccomp_profile(kProfile, {}, cache, &hit);
  EXPECT_FALSE(hit);
  const SeccompProgram second = load_or_compile_seccomp_profile(kProfile, {}, cache, &hit);
  EXPECT_TRUE(hit);
  EXPECT_TRUE(same(fresh, first));
  EXPECT_TRUE(same(fresh, second));
  EXPECT_EQ(second.source, kProfile.string());
  EXPECT_FALSE(second.notify_instructions.empty()) << "the notify form is cached too";
  struct stat st {};
  ASSERT_EQ(::stat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(entries(cache).size(), 1u);
  // Another kernel release (minKernel conditions) or another capability set is another entry.
  load_or_compile_seccomp_profile(kProfile, {{}, "9.9.9-test"}, cache, &hit);
  EXPECT_FALSE(hit);
  load_or_compile_seccomp_profile(kProfile, {{"CAP_SYS_ADMIN"}, {}}, cache, &hit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(entries(cache).size(), 3u);
}

// Entries are keyed by the kernel release among others: every upgrade would add one forever.
TEST(SeccompCache, OnlyTheNewestSixteenEntriesAreKept) {
  test_util::TempDir d;
  const auto cache = d / "cache";
  for (int i = 0; i < 20; ++i) load_or_compile_seccomp_profile(kProfile, {{}, "9.9." + std::to_string(i)}, cache);
  EXPECT_EQ(entries(cache).size(), 16u);
  bool hit = false;
  load_or_compile_seccomp_profile(kProfile, {{}, "9.9.19"}, cache, &hit);
  EXPECT_TRUE(hit) << "the newest entry was kept";
  // A temporary file left by a writer that died long ago goes too; a fresh one stays.
  d.write("cache/.dead.1.1.tmp", "x");
  d.write("cache/.live.1.1.tmp", "x");
  const auto old = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::filesystem::last_write_time(cache / ".dead.1.1.tmp", old);
  load_or_compile_seccomp_profile(kProfile, {{}, "9.9.20"}, cache);
  EXPECT_FALSE(std::filesystem::exists(cache / ".dead.1.1.tmp"));
  EXPECT_TRUE(std::filesystem::exists(cache / ".live.1.1.tmp"));
}

TEST(SeccompCache, ADamagedEntryIsRecompiledNeverUsed) {
  test_util::TempDir d;
  const auto cache = d / "cache";
  const SeccompProgram fresh = compile_seccomp_profile(kProfile, {});
  load_or_compile_seccomp_profile(kProfile, {}, cache);
  const auto entry = entries(cache).at(0);
  std::string bytes = test_util::slurp(entry);
  // Flip one bit of one instruction: a filter that allows something else.
  bytes[8 + 32 + 8 + 6] ^= 1;
  test_util::put(entry, bytes, 0600);
  bool hit = true;
  const SeccompProgram again = load_or_compile_seccomp_profile(kProfile, {}, cache, &hit);
  EXPECT_FALSE(hit);
  EXPECT_TRUE(same(fresh, again));
  // ... and the entry was replaced by a good one.
  load_or_compile_seccomp_profile(kProfile, {}, cache, &hit);
  EXPECT_TRUE(hit);
  // A truncated entry likewise.
  test_util::put(entry, bytes.substr(0, bytes.size() / 2), 0600);
  EXPECT_TRUE(same(fresh, load_or_compile_seccomp_profile(kProfile, {}, cache, &hit)));
  EXPECT_FALSE(hit);
}

TEST(SeccompCache, APlantedSymlinkIsNotFollowed) {
  test_util::TempDir d;
  const auto cache = d / "cache";
  load_or_compile_seccomp_profile(kProfile, {}, cache);
  const auto entry = entries(cache).at(0);
  const std::string good = test_util::slurp(entry);
  // Another file with valid contents, linked in place of the entry: not read, not written through.
  const auto victim = d.write("victim", good);
  std::filesystem::remove(entry);
  std::filesystem::create_symlink(victim, entry);
  bool hit = true;
  load_or_compile_seccomp_profile(kProfile, {}, cache, &hit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(test_util::slurp(victim), good);
  EXPECT_FALSE(std::filesystem::is_symlink(entry)) << "the entry is replaced, not written through";
}

TEST(SeccompCache, ADirectoryOthersCanWriteIsNotUsed) {
  test_util::TempDir d;
  const auto cache = d / "cache";
  std::filesystem::create_directory(cache);
  ::chmod(cache.c_str(), 0777);
  bool hit = true;
  const SeccompProgram p = load_or_compile_seccomp_profile(kProfile, {}, cache, &hit);
  EXPECT_FALSE(hit);
  EXPECT_TRUE(entries(cache).empty()) << "nothing is written where others could swap it";
  EXPECT_GT(p.instructions.size(), 50u);
}

}  // namespace
}  // namespace sandboxrun
