// pid 1's filesystem setup is data (launch/mount_plan.hpp): its order and every flag are checked
// here as a golden list, without root and without a sandbox. A change to what a sandbox sees
// shows up as a diff of this list, beside the integration tests that run it for real.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <string>
#include <vector>

#include "launch/mount_plan.hpp"

namespace {

using sandboxrun::InputFile;
using sandboxrun::launch::describe;
using sandboxrun::launch::EtcPlan;
using sandboxrun::launch::MountInputs;
using sandboxrun::launch::plan_mounts;

EtcPlan etc_plan(const std::string& root, bool shadow) {
  EtcPlan e;
  e.dir = root + "/run/sandboxrun";
  e.image_etc = root + "/etc";
  for (const char* name : {"hosts", "passwd"}) {
    e.file_path.push_back(e.dir + "/" + name);
    e.file_content.push_back(std::string(name) + "\n");
    e.target.push_back(e.image_etc + "/" + name);
  }
  if (shadow) {
    e.shadow = true;
    e.image_etc_copy = e.dir + "/image-etc";
    e.image_remount_flags = MS_RDONLY | MS_NOSUID;
    e.link_path = {e.image_etc + "/os-release"};
    e.link_target = {"../usr/lib/os-release"};
  }
  return e;
}

std::vector<std::string> described(const MountInputs& in) {
  std::vector<std::string> out;
  for (const auto& op : plan_mounts(in)) out.push_back(describe(op));
  return out;
}

// The steps that never change: /proc, /dev, the pivot and /proc's masks.
const std::vector<std::string> kDev = {
    "mount proc /img/proc [proc nosuid,nodev,noexec]",
    "mount tmpfs /img/dev [tmpfs nosuid,noexec] size=64k,nr_inodes=64,mode=0755",
    "create /img/dev/null 0666",
    "mount /dev/null /img/dev/null [- bind]",
    "mount - /img/dev/null [- nosuid,noexec,remount,bind]",
    "create /img/dev/zero 0666",
    "mount /dev/zero /img/dev/zero [- bind]",
    "mount - /img/dev/zero [- nosuid,noexec,remount,bind]",
    "create /img/dev/full 0666",
    "mount /dev/full /img/dev/full [- bind]",
    "mount - /img/dev/full [- nosuid,noexec,remount,bind]",
    "create /img/dev/random 0666",
    "mount /dev/random /img/dev/random [- bind]",
    "mount - /img/dev/random [- nosuid,noexec,remount,bind]",
    "create /img/dev/urandom 0666",
    "mount /dev/urandom /img/dev/urandom [- bind]",
    "mount - /img/dev/urandom [- nosuid,noexec,remount,bind]",
    "symlink /img/dev/fd -> /proc/self/fd",
    "symlink /img/dev/stdin -> /proc/self/fd/0",
    "symlink /img/dev/stdout -> /proc/self/fd/1",
    "symlink /img/dev/stderr -> /proc/self/fd/2",
    "symlink /img/dev/ptmx -> pts/ptmx",
    "mkdir /img/dev/pts 0755",
    "mkdir /img/dev/shm 1777",
    "mount devpts /img/dev/pts [devpts nosuid,noexec] newinstance,ptmxmode=0666,mode=0620",
    "mount tmpfs /img/dev/shm [tmpfs nosuid,nodev,noexec] size=1024,mode=1777",
    "mount - /img/dev [- ro,nosuid,noexec,remount] size=64k,nr_inodes=64,mode=0755",
    "mount tmpfs /img/tmp [tmpfs nosuid,nodev] size=1024,mode=1777",
};
const std::vector<std::string> kPivotAndProc = {
    "mount - /img [- ro,nosuid,nodev,remount,bind]",
    "chdir /img",
    "pivot_root",
    "detach .",
    "chdir /",
    "mount /proc/sys /proc/sys [- bind,rec] (if present)",
    "mount - /proc/sys [- ro,nosuid,nodev,noexec,remount,bind] (if present)",
    "mount /proc/sysrq-trigger /proc/sysrq-trigger [- bind,rec] (if present)",
    "mount - /proc/sysrq-trigger [- ro,nosuid,nodev,noexec,remount,bind] (if present)",
    "mount /proc/irq /proc/irq [- bind,rec] (if present)",
    "mount - /proc/irq [- ro,nosuid,nodev,noexec,remount,bind] (if present)",
    "mount /proc/bus /proc/bus [- bind,rec] (if present)",
    "mount - /proc/bus [- ro,nosuid,nodev,noexec,remount,bind] (if present)",
    "mount /proc/fs /proc/fs [- bind,rec] (if present)",
    "mount - /proc/fs [- ro,nosuid,nodev,noexec,remount,bind] (if present)",
    "mount /dev/null /proc/kcore [- bind] (if present)",
    "mount /dev/null /proc/keys [- bind] (if present)",
    "mount /dev/null /proc/timer_list [- bind] (if present)",
    "mount /dev/null /proc/sched_debug [- bind] (if present)",
    "mount /dev/null /proc/kallsyms [- bind] (if present)",
    "mount /dev/null /proc/latency_stats [- bind] (if present)",
    "mount tmpfs /proc/acpi [tmpfs ro,nosuid,nodev,noexec] size=0,mode=0555 (if present)",
    "mount tmpfs /proc/scsi [tmpfs ro,nosuid,nodev,noexec] size=0,mode=0555 (if present)",
    "mount tmpfs /proc/asound [tmpfs ro,nosuid,nodev,noexec] size=0,mode=0555 (if present)",
    "mount tmpfs /proc/firmware [tmpfs ro,nosuid,nodev,noexec] size=0,mode=0555 (if present)",
};

std::vector<std::string> joined(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

MountInputs base_inputs(const EtcPlan* etc) {
  return {.rootfs = "/img", .uid = 1000, .gid = 1001, .tmp_bytes = 1024, .work_bytes = 2048, .run_bytes = 4096,
          .root_remount_flags = MS_RDONLY | MS_NOSUID | MS_NODEV, .etc = etc};
}

TEST(MountPlan, AnUnprivilegedRunInOrder) {
  const EtcPlan etc = etc_plan("/img", false);
  const std::vector<InputFile> inputs = {{"data/a.csv", "1,2\n", 0644}, {"data/sub/b.txt", "b", 0600}, {"c.py", "", 0444}};
  MountInputs in = base_inputs(&etc);
  in.inputs = &inputs;
  in.pass_work_dir = true;
  const std::vector<std::string> expected = joined({
      {"mount - / [- rec,private]", "mount /img /img [- bind]"},
      kDev,
      {"mount tmpfs /img/run [tmpfs nosuid,nodev,noexec] size=4096,mode=0755",
       "mkdir /img/run/sandbox 0755",
       "mkdir /img/run/sandboxrun 0755",
       "write /img/run/sandboxrun/hosts 0444 6 bytes",
       "write /img/run/sandboxrun/passwd 0444 7 bytes",
       "mount tmpfs /img/work [tmpfs nosuid,nodev] size=2048,mode=0755,uid=1000,gid=1001",
       "mkdir /img/work/data 0755 (user)",
       "mkdir /img/work/data/sub 0755 (user)",
       "write /img/work/data/a.csv 0644 4 bytes (user)",
       "write /img/work/data/sub/b.txt 0600 1 bytes (user)",
       "write /img/work/c.py 0444 0 bytes (user)",
       "pass /img/work",
       "mount /img/run/sandboxrun/hosts /img/etc/hosts [- bind]",
       "mount - /img/etc/hosts [- ro,nosuid,nodev,noexec,remount,bind]",
       "mount /img/run/sandboxrun/passwd /img/etc/passwd [- bind]",
       "mount - /img/etc/passwd [- ro,nosuid,nodev,noexec,remount,bind]"},
      kPivotAndProc,
  });
  EXPECT_EQ(described(in), expected);
}

TEST(MountPlan, ARootRunAttachesClonesAndShadowsAnEtcThatLacksAFile) {
  const EtcPlan etc = etc_plan("/img", true);
  MountInputs in = base_inputs(&etc);
  in.root_tree = 7;
  in.run_binds = {{"deps", 9}};
  in.test_bind_tree = 11;
  const auto got = described(in);
  // The image: a private tmpfs on /tmp, then the clone attached below it (rootfs is where pid 1
  // sees it; "/img" stands for kAttachedRoot here).
  ASSERT_GE(got.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(got.begin(), got.begin() + 4),
            (std::vector<std::string>{"mount - / [- rec,private]",
                                      "mount tmpfs /tmp [tmpfs nosuid,nodev,noexec] size=4k,nr_inodes=4,mode=0700",
                                      "mkdir /tmp/sandboxrun-root 0700", "attach fd 7 /tmp/sandboxrun-root"}));
  const std::vector<std::string> run_to_pivot = {
      "mount tmpfs /img/run [tmpfs nosuid,nodev,noexec] size=4096,mode=0755",
      "mkdir /img/run/sandbox 0755",
      "mkdir /img/run/sandboxrun 0755",
      "write /img/run/sandboxrun/hosts 0444 6 bytes",
      "write /img/run/sandboxrun/passwd 0444 7 bytes",
      "mkdir /img/run/sandboxrun/image-etc 0755",
      "mkdir /img/run/deps 0755",
      "attach fd 9 /img/run/deps",
      "attach fd 11 /img/mnt",
      "mount tmpfs /img/work [tmpfs nosuid,nodev] size=2048,mode=0755,uid=1000,gid=1001",
      "mount /img/etc /img/run/sandboxrun/image-etc [- bind]",
      "mount - /img/run/sandboxrun/image-etc [- ro,nosuid,remount,bind]",
      "mount tmpfs /img/etc [tmpfs nosuid,nodev,noexec] size=1m,mode=0755",
      "symlink /img/etc/os-release -> ../usr/lib/os-release",
      "create /img/etc/hosts 0444",
      "create /img/etc/passwd 0444",
      "mount - /img/etc [- ro,nosuid,nodev,noexec,remount] size=1m,mode=0755",
      "mount /img/run/sandboxrun/hosts /img/etc/hosts [- bind]",
      "mount - /img/etc/hosts [- ro,nosuid,nodev,noexec,remount,bind]",
      "mount /img/run/sandboxrun/passwd /img/etc/passwd [- bind]",
      "mount - /img/etc/passwd [- ro,nosuid,nodev,noexec,remount,bind]"};
  EXPECT_EQ(std::vector<std::string>(got.begin() + 4, got.end()), joined({kDev, run_to_pivot, kPivotAndProc}));
}

// What the plan must never do, whatever the inputs: mount anything writable over the image
// after its read-only remount, or leave a host path reachable after the pivot.
TEST(MountPlan, NothingAfterThePivotButProcMasks) {
  const EtcPlan etc = etc_plan("/img", true);
  const auto ops = plan_mounts(base_inputs(&etc));
  size_t pivot = 0;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == sandboxrun::launch::MountOp::Kind::pivot_root) pivot = i;
  ASSERT_GT(pivot, 0u);
  EXPECT_EQ(ops[pivot + 1].kind, sandboxrun::launch::MountOp::Kind::detach);
  for (size_t i = pivot + 3; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].target.rfind("/proc/", 0), 0u) << describe(ops[i]);
    EXPECT_TRUE(ops[i].optional) << describe(ops[i]);
    EXPECT_TRUE((ops[i].flags & MS_RDONLY) || ops[i].source == "/dev/null" || (ops[i].flags & MS_REC))
        << describe(ops[i]);
  }
}

}  // namespace
