// /etc/hosts, /etc/hostname and /etc/resolv.conf are generated per run, read-only, in any image:
// `localhost` resolves for sockets and asyncio whether the image has these files, has them empty,
// lacks them, or has a dangling symlink in their place, and the shared image is never written.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "harness.hpp"

using sandboxrun::testing::read_text;
using sandboxrun::testing::run_python;
using sandboxrun::testing::source_dir;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;
namespace fs = std::filesystem;

namespace {

const char* kProbe = R"(
import asyncio, errno, json, os, socket
res = {}
s = socket.socket()
s.bind(('localhost', 0))
s.listen()
c = socket.create_connection(('localhost', s.getsockname()[1]))
conn, _ = s.accept()
c.sendall(b'hi')
res['tcp'] = conn.recv(2).decode()
res['localhost'] = sorted({a[4][0] for a in socket.getaddrinfo('localhost', 80, type=socket.SOCK_STREAM)})
res['self'] = socket.gethostbyname(socket.gethostname())
res['extra'] = socket.gethostbyname('pypi.test')

async def main():
    async def echo(r, w):
        w.write(await r.read(5))
        await w.drain()
        w.close()
    srv = await asyncio.start_server(echo, 'localhost', 0)
    r, w = await asyncio.open_connection('localhost', srv.sockets[0].getsockname()[1])
    w.write(b'hello')
    await w.drain()
    data = await r.read(5)
    w.close()
    srv.close()
    await srv.wait_closed()
    return data.decode()
res['asyncio'] = asyncio.run(main())
res['readonly'] = {}
for p in ('/etc/hosts', '/etc/hostname', '/etc/resolv.conf'):
    try:
        open(p, 'a').close()
        res['readonly'][p] = 'written'
    except OSError as e:
        res['readonly'][p] = 'mount ro' if os.statvfs(p).f_flag & os.ST_RDONLY else errno.errorcode[e.errno]
res['hosts'] = open('/etc/hosts').read()
res['hostname'] = open('/etc/hostname').read()
res['resolv'] = open('/etc/resolv.conf').read()
res['passwd'] = open('/etc/passwd').read()
import getpass, grp, pwd
res['user'] = [getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir, grp.getgrgid(os.getgid()).gr_name]
print(json.dumps(res))
)";

// A throwaway copy of the default image (hard links: instant, and the test only unlinks and
// creates files in its copy, never changes a shared inode), removed at scope exit.
class ImageCopy {
 public:
  ImageCopy() {
    const std::string src = source_dir() + "/rootfs/default";
    path_ = source_dir() + "/rootfs/.etc-files-test." + std::to_string(getpid());
    fs::remove_all(path_);
    if (!fs::is_directory(src)) return;
    const std::string cmd = "cp -al '" + src + "' '" + path_ + "'";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  ~ImageCopy() { fs::remove_all(path_); }
  bool ok() const { return ok_; }
  std::string etc(const std::string& name) const { return path_ + "/etc/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool ok_ = false;
};

class EtcFiles : public testing::Test {
 protected:
  void SetUp() override {
    if (!image_.ok()) GTEST_SKIP() << "no default image at rootfs/default (scripts/build-image.sh)";
    config_ = write_config(dir_, "image: " + image_.path() + "\nextra_hosts: [\"pypi.test:10.9.8.7\"]\n");
    for (const char* f : {"hosts", "hostname", "resolv.conf"}) fs::remove(image_.etc(f));
  }

  // Runs the probe in the image copy and checks everything the payload must see.
  void expect_localhost_works() {
    auto r = run_python(kProbe, {"--config", config_});
    ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
    const auto j = nlohmann::json::parse(r.stdout_text(), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.stdout_text() << r.result.value("stderr", "");
    EXPECT_EQ(j["tcp"], "hi");
    EXPECT_EQ(j["asyncio"], "hello");
    EXPECT_EQ(j["localhost"], nlohmann::json({"127.0.0.1", "::1"}));
    EXPECT_EQ(j["self"], "127.0.1.1");
    EXPECT_EQ(j["extra"], "10.9.8.7");
    for (const auto& [path, how] : j["readonly"].items()) EXPECT_EQ(how, "mount ro") << path;
    const std::string hosts = j["hosts"];
    EXPECT_NE(hosts.find("127.0.0.1\tlocalhost\n"), std::string::npos) << hosts;
    EXPECT_NE(hosts.find("::1\tlocalhost ip6-localhost ip6-loopback\n"), std::string::npos) << hosts;
    EXPECT_NE(hosts.find("10.9.8.7\tpypi.test\n"), std::string::npos) << hosts;
    EXPECT_EQ(j["hostname"], "sandbox\n");
    EXPECT_EQ(std::string(j["resolv"]).find("nameserver"), std::string::npos) << j["resolv"];
    // The rest of the image's /etc is still there, whichever way the files were mounted; the
    // run's user is an account (getpass, pip and `~` need one) whether or not the image has it.
    const std::string image_passwd = fs::exists(image_.etc("passwd")) ? read_text(image_.etc("passwd")) : "";
    EXPECT_EQ(j["passwd"], image_passwd + "sandbox:x:1000:1000:sandbox:/tmp:/usr/sbin/nologin\n");
    EXPECT_EQ(j["user"], nlohmann::json({"sandbox", "/tmp", "sandbox"}));
  }

  ImageCopy image_;
  TempDir dir_;
  std::string config_;
};

}  // namespace

TEST_F(EtcFiles, ImageWithoutTheFiles) {
  expect_localhost_works();
  for (const char* f : {"hosts", "hostname", "resolv.conf"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(image_.etc(f)))) << "the image was written: " << f;
}

TEST_F(EtcFiles, ImageWithEmptyFiles) {
  // As OCI images built by Docker or buildah ship them: empty mount points.
  for (const char* f : {"hosts", "hostname", "resolv.conf"}) std::ofstream(image_.etc(f)).close();
  expect_localhost_works();
  for (const char* f : {"hosts", "hostname", "resolv.conf"})
    EXPECT_EQ(read_text(image_.etc(f)), "") << "the image was written: " << f;
}

TEST_F(EtcFiles, DanglingSymlinkIsNotFollowedOnTheHost) {
  // systemd images: /etc/resolv.conf -> /run/systemd/resolve/stub-resolv.conf. Binding onto it
  // before pivot_root would follow the link on the host.
  TempDir victim;
  const std::string target = victim.path() + "/resolv.conf";
  fs::create_symlink(target, image_.etc("resolv.conf"));
  expect_localhost_works();
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(fs::read_symlink(image_.etc("resolv.conf")), target);
}

TEST_F(EtcFiles, ImageWithoutAccountsFiles) {
  // Distroless images: no passwd, no group. The run's account is still there, and nothing else.
  fs::remove(image_.etc("passwd"));
  fs::remove(image_.etc("group"));
  expect_localhost_works();
  EXPECT_FALSE(fs::exists(fs::symlink_status(image_.etc("passwd")))) << "the image was written";
}

TEST_F(EtcFiles, AccountsFileSymlinkIsNotFollowedOnTheHost) {
  // An image's /etc/passwd -> a host file must not be read into the sandbox.
  TempDir victim;
  const std::string secret = victim.write("secret", "root:SECRET-HOST-LINE:0:0::/root:/bin/sh\n");
  fs::remove(image_.etc("passwd"));
  fs::create_symlink(secret, image_.etc("passwd"));
  auto r = run_python("print(open('/etc/passwd').read())\n", {"--config", config_});
  ASSERT_EQ(r.result.value("status", ""), "exited") << r.exec.out << r.exec.err;
  EXPECT_EQ(r.stdout_text().find("SECRET-HOST-LINE"), std::string::npos) << r.stdout_text();
  EXPECT_NE(r.stdout_text().find("sandbox:x:1000:1000"), std::string::npos) << r.stdout_text();
}
