// `sandboxrun image unpack|ls|rm`: output, messages and exit statuses.
#include <gmock/gmock.h>

#include "cli/cli.hpp"
#include "image/image.hpp"
#include "image_fixture.hpp"

namespace {

using namespace image_test;
using sandboxrun::image::ensure_image;
using testing::HasSubstr;

using ImageCommand = TwoImageLayout;

// Runs image_command with stdout/stderr captured.
struct CommandResult {
  int rc;
  std::string out;
  std::string err;
};
CommandResult run(const std::vector<std::string>& args) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int rc = sandboxrun::cli::image_command(args);
  return {rc, testing::internal::GetCapturedStdout(), testing::internal::GetCapturedStderr()};
}

TEST_F(ImageCommand, UnpackListRemove) {
  const std::string cache = cache_.string();
  auto r = run({"unpack", layout_.string() + ":other", (tmp_ / "dest").string()});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("unpacked " + layout_.string() + ":other"));
  EXPECT_EQ(slurp(tmp_ / "dest" / "b"), "b");

  // No tag: `latest`, as in Docker.
  r = run({"unpack", layout_.string(), (tmp_ / "dest2").string()});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp_ / "dest2" / "f0"));
  EXPECT_FALSE(fs::exists(tmp_ / "dest2" / "b"));

  r = run({"unpack", layout_.string() + ":other", (tmp_ / "dest").string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("already exists"));
  r = run({"unpack", "--force", layout_.string() + ":other", (tmp_ / "dest").string()});
  EXPECT_EQ(r.rc, 0) << r.err;

  EXPECT_EQ(run({}).rc, 2);
  EXPECT_EQ(run({"unpack", layout_.string()}).rc, 2);
  EXPECT_EQ(run({"frobnicate"}).rc, 2);
  r = run({"--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("unpack"));

  ensure_image({layout_, "latest"}, cache_);
  r = run({"ls", "--cache", cache});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr(digest_.substr(0, 19)));
  EXPECT_THAT(r.out, HasSubstr(":latest"));

  r = run({"rm", "--cache", cache, layout_.string() + ":latest"});  // by reference
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("removed " + digest_));
  r = run({"rm", "--cache", cache, digest_});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("no cached image matches"));
}

}  // namespace
