// The last line of a log, found by reading backwards from its end: every new record's prev hash
// comes from it. The reads start small and grow, so lines of any length up to the cap, and a
// torn tail, must come back whole and at the right offset.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "audit/internal.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "test_util.hpp"

namespace sandboxrun::audit {
namespace {

LastLine last_of(const std::string& content) {
  test_util::TempDir d;
  const std::string path = (d.path() / "log").string();
  test_util::put(path, content);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return read_last_line(fd.get(), content.size(), path);
}

TEST(AuditLastLine, LinesOfEveryLengthAroundTheReadSizesComeBackWhole) {
  for (size_t len : {1u, 100u, 4095u, 4096u, 4097u, 8191u, 8193u, 20000u, 65535u, 65537u, 200000u}) {
    const std::string before = "{\"first\":1}\n" + std::string(5000, 'b') + "\n";
    std::string line(len, 'x');
    line.front() = '{';
    line.back() = '}';
    const LastLine l = last_of(before + line + "\n");
    EXPECT_EQ(l.line, line) << len;
    EXPECT_EQ(l.offset, before.size()) << len;
    EXPECT_FALSE(l.torn) << len;
  }
}

TEST(AuditLastLine, ATornTailIsTheLastLineAndSaysSo) {
  const std::string before = std::string(9000, 'a') + "\n";
  const LastLine l = last_of(before + std::string(6000, 't'));
  EXPECT_EQ(l.line, std::string(6000, 't'));
  EXPECT_EQ(l.offset, before.size());
  EXPECT_TRUE(l.torn);
}

TEST(AuditLastLine, AFileOfOneLineStartsAtZero) {
  const LastLine l = last_of(std::string(10000, 'o') + "\n");
  EXPECT_EQ(l.line.size(), 10000u);
  EXPECT_EQ(l.offset, 0u);
}

TEST(AuditLastLine, ALineOverTheCapIsRefused) {
  EXPECT_THROW(last_of(std::string(5u << 20, 'z') + "\n"), Error);
}

}  // namespace
}  // namespace sandboxrun::audit
