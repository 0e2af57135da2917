// The release pid 1 waits for: what the launcher encodes comes back whole, and a release that is
// too large, names a script outside its directory or miscounts its strings is refused.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "launch/release.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {
namespace {

struct Channel {
  UniqueFd parent, child, err_read, err_write;
  ChildPlan plan;
  Channel() {
    int sv[2], ep[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    EXPECT_EQ(::pipe2(ep, O_CLOEXEC), 0);
    parent.reset(sv[0]);
    child.reset(sv[1]);
    err_read.reset(ep[0]);
    err_write.reset(ep[1]);
    plan.sync_read = child.get();
    plan.error_write = err_write.get();
    plan.max_script = 1 << 20;
  }
  // Sends `bytes` (from a thread: a release may exceed the socket buffer) and reads it back.
  bool roundtrip(const std::string& bytes, Release& rel) {
    std::thread writer([&] {
      write_all(parent.get(), bytes.data(), bytes.size());
      parent.reset();
    });
    const bool ok = read_release(plan, rel);
    child.reset();  // a reader that stopped early unblocks the writer
    writer.join();
    return ok;
  }
  std::string error() {
    err_write.reset();
    ChildError e{};
    return ::read(err_read.get(), &e, sizeof e) == sizeof e ? std::string(e.stage) + ": " + e.detail : "";
  }
};

TEST(Release, WhatIsEncodedComesBackWhole) {
  Channel c;
  const std::string script(300000, 'x');  // more than a socket buffer
  Release rel;
  ASSERT_TRUE(c.roundtrip(encode_release("job.py", script, {"/usr/bin/python3", "-B", "/work/job.py", "a b"},
                                         {"PATH=/usr/bin", "EMPTY="}),
                          rel));
  EXPECT_STREQ(rel.name, "job.py");
  EXPECT_EQ(std::string(rel.script, rel.script_len), script);
  ASSERT_NE(rel.argv, nullptr);
  EXPECT_STREQ(rel.argv[0], "/usr/bin/python3");
  EXPECT_STREQ(rel.argv[3], "a b");
  EXPECT_EQ(rel.argv[4], nullptr);
  EXPECT_STREQ(rel.envp[0], "PATH=/usr/bin");
  EXPECT_STREQ(rel.envp[1], "EMPTY=");
  EXPECT_EQ(rel.envp[2], nullptr);
}

TEST(Release, AnEmptyEnvironmentAndAnEmptyScriptAreFine) {
  Channel c;
  Release rel;
  ASSERT_TRUE(c.roundtrip(encode_release("e.py", "", {"/usr/bin/python3"}, {}), rel));
  EXPECT_EQ(rel.script_len, 0u);
  EXPECT_EQ(rel.argv[1], nullptr);
  EXPECT_EQ(rel.envp[0], nullptr);
}

TEST(Release, TheLauncherGoingAwayIsNoRelease) {
  Channel c;
  Release rel;
  EXPECT_FALSE(c.roundtrip("", rel));
  EXPECT_EQ(c.error(), "") << "EOF is not an error to report";
}

TEST(Release, ABadReleaseIsRefusedAndSaysWhy) {
  struct Case {
    std::string bytes, why;
  };
  std::string miscounted = encode_release("a.py", "", {"/x", "y"}, {"Z=1"});
  miscounted.pop_back();  // the last string loses its NUL: one string short
  std::string unterminated = encode_release("a.py", "", {"/x", "y"}, {"Z=1"});
  unterminated.pop_back();  // the same, with its header saying so: a string without its NUL
  ReleaseHeader h{};
  std::memcpy(&h, unterminated.data() + 1, sizeof h);
  --h.strings_len;
  std::memcpy(unterminated.data() + 1, &h, sizeof h);
  std::string huge = encode_release("a.py", "", {"/x"}, {});
  std::memcpy(&h, huge.data() + 1, sizeof h);
  h.script_len = (1 << 20) + 1;  // over plan.max_script
  std::memcpy(huge.data() + 1, &h, sizeof h);
  for (const Case& k : std::vector<Case>{{encode_release("../a.py", "", {"/x"}, {}), "bad script name"},
                                         {encode_release("a/b.py", "", {"/x"}, {}), "bad script name"},
                                         {encode_release(".hidden", "", {"/x"}, {}), "bad script name"},
                                         {encode_release("a.py", "", {}, {}), "sizes out of bounds"},
                                         {huge, "sizes out of bounds"},
                                         {miscounted, "short release"},
                                         {unterminated, "bad argument strings"},
                                         {"X" + encode_release("a.py", "", {"/x"}, {}).substr(1), "not a release"}}) {
    Channel c;
    Release rel;
    EXPECT_FALSE(c.roundtrip(k.bytes, rel)) << k.why;
    EXPECT_NE(c.error().find(k.why), std::string::npos) << k.why;
  }
}

}  // namespace
}  // namespace sandboxrun::launch
