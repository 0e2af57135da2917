// The image cache (ensure_image, list, remove).
#include <gmock/gmock.h>
#include <sys/wait.h>

#include <fstream>

#include "image_fixture.hpp"
#include "sandboxrun/error.hpp"

namespace {

using namespace image_test;
using sandboxrun::Error;
using sandboxrun::image::ensure_image;
using sandboxrun::image::list_cached_images;
using sandboxrun::image::remove_cached_image;
using testing::HasSubstr;
using testing::ThrowsMessage;

using Cache = TwoImageLayout;

// The cache is filled (as root) and run from: a symlink on its path, a planted lock file or a
// directory another user controls is refused, and nothing is written where they point.
TEST_F(Cache, SymlinksAndForeignDirectoriesAreRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "plants directories owned by another user: needs root";
  const fs::path elsewhere = tmp_ / "elsewhere";
  fs::create_directory(elsewhere);
  fs::create_directory_symlink(elsewhere, cache_);
  EXPECT_THAT([&] { ensure_image({layout_, "latest"}, cache_); },
              ThrowsMessage<Error>(HasSubstr(cache_.string() + " is a symlink; refusing to follow it")));
  fs::remove(cache_);

  const fs::path victim = tmp_ / "victim";
  put(victim, "precious");
  fs::create_directory(cache_);
  fs::create_symlink(victim, cache_ / ("sha256-" + digest_.substr(7) + ".lock"));
  EXPECT_THAT([&] { ensure_image({layout_, "latest"}, cache_); },
              ThrowsMessage<Error>(HasSubstr(".lock is a symlink; refusing to follow it")));
  EXPECT_EQ(slurp(victim), "precious");
  fs::remove_all(cache_);

  fs::create_directory(cache_);
  ASSERT_EQ(chown(cache_.c_str(), 65534, 65534), 0);
  EXPECT_THAT([&] { ensure_image({layout_, "latest"}, cache_); },
              ThrowsMessage<Error>(HasSubstr("directory " + cache_.string() + " is owned by uid 65534")));
  EXPECT_TRUE(fs::is_empty(cache_));
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

TEST_F(Cache, UnpacksOnceAndReuses) {
  const auto first = ensure_image({layout_, "latest"}, cache_);
  EXPECT_EQ(first.manifest_digest, digest_);
  EXPECT_EQ(first.rootfs, cache_ / ("sha256-" + digest_.substr(7)) / "rootfs");
  EXPECT_EQ(slurp(first.rootfs / "f7"), std::string(4096, 'x'));
  EXPECT_EQ(first.config.env[0], "PATH=/usr/bin:/bin");
  EXPECT_EQ(first.bytes, 300u * 4096);
  EXPECT_EQ(first.source, fs::absolute(layout_).string() + ":latest");

  // A second call must not unpack again: a marker file in the rootfs survives.
  put(first.rootfs / "marker", "m");
  const auto second = ensure_image({layout_, "latest"}, cache_);
  EXPECT_EQ(second.rootfs, first.rootfs);
  EXPECT_TRUE(fs::exists(second.rootfs / "marker"));
  EXPECT_EQ(second.config.cmd, std::vector<std::string>{"python3"});

  struct stat st {};
  ASSERT_EQ(stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // the image's setuid files are not reachable by others
}

TEST_F(Cache, ConcurrentFirstUseUnpacksOnce) {
  constexpr int workers = 6;
  std::vector<pid_t> pids;
  const fs::path results = tmp_ / "results";
  fs::create_directories(results);
  for (int i = 0; i < workers; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        const auto img = ensure_image({layout_, "latest"}, cache_);
        // The rootfs must be complete whenever ensure_image returns it.
        int files = 0;
        for ([[maybe_unused]] const auto& e : fs::directory_iterator(img.rootfs)) ++files;
        std::ofstream(results / std::to_string(i)) << img.rootfs.string() << " " << files;
        _exit(0);
      } catch (const std::exception& e) {
        fprintf(stderr, "worker %d: %s\n", i, e.what());
        _exit(1);
      }
    }
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const std::string expected = (cache_ / ("sha256-" + digest_.substr(7)) / "rootfs").string() + " 300";
  for (int i = 0; i < workers; ++i) EXPECT_EQ(slurp(results / std::to_string(i)), expected);
  // Exactly one entry plus its lock: no leftover temporaries, no second copy.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(cache_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"sha256-" + digest_.substr(7), "sha256-" + digest_.substr(7) + ".lock"}));
}

TEST_F(Cache, PartialUnpackIsNeverUsed) {
  // A crashed unpack leaves a temporary; it is neither listed nor used, and is cleaned up.
  const std::string entry = "sha256-" + digest_.substr(7);
  fs::create_directories(cache_ / (entry + ".tmp-crashed") / "rootfs");
  EXPECT_TRUE(list_cached_images(cache_).empty());
  const auto img = ensure_image({layout_, "latest"}, cache_);
  EXPECT_TRUE(fs::exists(img.rootfs / "f299"));
  EXPECT_FALSE(fs::exists(cache_ / (entry + ".tmp-crashed")));
}

TEST_F(Cache, FailedUnpackLeavesNoEntry) {
  const auto manifest = nlohmann::json::parse(slurp(layout_ / "blobs" / "sha256" / digest_.substr(7)));
  const fs::path layer = layout_ / "blobs" / "sha256" / std::string(manifest["layers"][0]["digest"]).substr(7);
  std::string data = slurp(layer);
  data[100] ^= 1;
  put(layer, data);
  EXPECT_THROW(ensure_image({layout_, "latest"}, cache_), Error);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(cache_)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"sha256-" + digest_.substr(7) + ".lock"});
}

TEST_F(Cache, ListAndRemove) {
  EXPECT_TRUE(list_cached_images(tmp_ / "no-cache-yet").empty());
  const auto a = ensure_image({layout_, "latest"}, cache_);
  const auto b = ensure_image({layout_, "other"}, cache_);
  const auto listed = list_cached_images(cache_);
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& img : listed) {
    EXPECT_TRUE(img.manifest_digest == a.manifest_digest || img.manifest_digest == b.manifest_digest);
    EXPECT_FALSE(img.unpacked_at.empty());
    EXPECT_EQ(img.config.env.size(), 2u);
  }
  EXPECT_THAT([&] { remove_cached_image(cache_, "sha256:0000000000000"); },
              testing::ThrowsMessage<Error>(HasSubstr("no cached image matches")));
  EXPECT_THAT([&] { remove_cached_image(cache_, "abc"); },
              testing::ThrowsMessage<Error>(HasSubstr("is not an image digest")));
  EXPECT_EQ(remove_cached_image(cache_, a.manifest_digest.substr(0, 7 + 12)), a.manifest_digest);
  EXPECT_FALSE(fs::exists(a.rootfs.parent_path()));
  ASSERT_EQ(list_cached_images(cache_).size(), 1u);
  EXPECT_EQ(list_cached_images(cache_)[0].manifest_digest, b.manifest_digest);
}

TEST(ImageCacheDefault, FollowsXdgForUsers) {
  if (geteuid() == 0) {
    EXPECT_EQ(sandboxrun::image::default_cache_dir(), "/var/lib/sandboxrun/images");
    return;
  }
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(sandboxrun::image::default_cache_dir(), "/x/cache/sandboxrun/images");
}

}  // namespace
