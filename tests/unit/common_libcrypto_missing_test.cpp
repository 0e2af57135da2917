// Without libcrypto.so.3 the first use fails with an error naming the library and the package,
// and a later call tries again rather than keeping a broken table. Checked in a child whose
// mount namespace hides the library; in a binary of its own, so that nothing has loaded the
// library before the child hides it.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "common/libcrypto.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {
namespace {

// Where the dynamic loader finds libcrypto.so.3 on this host.
std::filesystem::path installed_libcrypto() {
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                          "/usr/lib64", "/usr/lib"}) {
    std::error_code ec;
    const auto p = std::filesystem::canonical(std::filesystem::path(dir) / "libcrypto.so.3", ec);
    if (!ec) return p;
  }
  return {};
}

// The child's verdict, as its exit status.
int check_hidden() {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      libcrypto();
      return 11;  // loaded although hidden
    } catch (const Error& e) {
      const std::string d = e.describe();
      if (d.find("libcrypto.so.3") == std::string::npos || d.find("libssl3") == std::string::npos) return 12;
    }
  }
  return 0;
}

TEST(LibCryptoMissing, IsAnErrorNamingTheLibraryAndThePackage) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to hide the library in a mount namespace";
  const auto lib = installed_libcrypto();
  ASSERT_FALSE(lib.empty()) << "libcrypto.so.3 not found where the loader looks";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The mounts die with the child's namespace; the host never sees them.
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("/dev/null", lib.c_str(), nullptr, MS_BIND, nullptr) != 0)
      ::_exit(10);
    ::_exit(check_hidden());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  const int code = WEXITSTATUS(status);
  ASSERT_NE(code, 10) << "could not hide " << lib << " in a mount namespace";
  EXPECT_NE(code, 11) << "libcrypto loaded although it was hidden";
  EXPECT_NE(code, 12) << "the error does not name libcrypto.so.3 and the package libssl3";
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace sandboxrun
