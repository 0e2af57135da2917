// sandboxrun inside a container, as a pod runs it (issue 40): the image deploy/build-image.sh
// writes, started by podman in the least-privileged configuration a cluster can give — uid 1000,
// every capability dropped, no-new-privileges, an unmasked /proc, deploy/seccomp.json, a private
// cgroup namespace on a read-only cgroupfs — with the pod's limits on the container. One run per
// container: the limits hold (OOM, threads), a looser container is refused naming the flag,
// doctor inside says it can run, nothing is left; the shipped Pod manifest runs under
// `podman kube play`, and so does the worker Deployment, up to the cgroupfs podman leaves
// read-only. test.sh installs podman and builds the image; elsewhere the tests skip,
// saying which is missing.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace sandboxrun::testing;

namespace {

const std::string kImage = "localhost/sandboxrun:latest";

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

std::string layout() { return std::filesystem::path(SANDBOXRUN_BIN).parent_path().string() + "/container-image"; }

// runc: crun refuses this VM's hybrid cgroup hierarchy ("drop all controllers from cgroupv2").
// Rootful podman gives every container (the pod's infra container too) 1,048,576 open files and
// processes unless told otherwise, which a runner without CAP_SYS_RESOURCE cannot raise to; a
// containers.conf of the test's own keeps this process's open-files limit and 4,096 processes.
std::string containers_conf() {
  static TempDir dir;
  static const std::string path = [] {
    rlimit files{};
    ::getrlimit(RLIMIT_NOFILE, &files);
    const std::string n = std::to_string(files.rlim_max);
    return dir.write("containers.conf", "[containers]\ndefault_ulimits = [\"nofile=" + n + ":" + n +
                                            "\", \"nproc=4096:4096\"]\n");
  }();
  return path;
}

Exec podman(const std::vector<std::string>& args) {
  std::vector<std::string> a{"--runtime", "runc"};
  a.insert(a.end(), args.begin(), args.end());
  return run_program("/usr/bin/podman", a, {"CONTAINERS_CONF=" + containers_conf()});
}

bool has_subids_for_containers() {
  std::ifstream in("/etc/subuid");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("containers:", 0) == 0) return true;
  return false;
}

class Podman : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // conmon writes a file `oom` into its working directory when the container's cgroup sees an
    // OOM kill (the sandbox's, here): podman runs from a scratch directory, not the checkout.
    static TempDir scratch;
    cwd_ = std::filesystem::current_path();
    std::filesystem::current_path(scratch.path());
    if (::access("/usr/bin/podman", X_OK) != 0 || ::access("/usr/sbin/runc", X_OK) != 0) {
      missing_ = "podman or runc is not installed (scripts/test.sh installs them: apt-get install podman runc catatonit)";
      return;
    }
    if (!std::filesystem::exists(layout() + "/index.json")) {
      missing_ = "no container image at " + layout() + " (scripts/test.sh builds it: deploy/build-image.sh)";
      return;
    }
    // podman names an image pulled from a layout after its path, which must then be lower case
    // (a checkout in /root/fresh.Ab12 is not): pulled through a link whose name is.
    const std::string link = "/run/sandboxrun-test-image." + std::to_string(::getpid());
    ::unlink(link.c_str());
    if (::symlink(layout().c_str(), link.c_str()) != 0) {
      missing_ = "cannot link " + link + " to " + layout() + ": " + std::strerror(errno);
      return;
    }
    const Exec pulled = podman({"pull", "--quiet", "oci:" + link + ":latest"});
    ::unlink(link.c_str());
    if (pulled.exit_code != 0) {
      missing_ = "podman cannot pull oci:" + layout() + ": " + pulled.err;
      return;
    }
    const std::string id = pulled.out.substr(0, pulled.out.find('\n'));
    if (podman({"tag", id, kImage}).exit_code != 0) missing_ = "podman cannot tag " + id;
    podman({"untag", id, "localhost" + link + ":latest"});  // without a name, untag drops them all
  }
  // The image pulled for the suite is removed with it: each run pulls a new one (~340 MB), and
  // one left behind per run filled a host's disk with untagged images.
  static void TearDownTestSuite() {
    if (missing_.empty()) podman({"rmi", kImage});
    std::filesystem::current_path(cwd_);
  }
  void SetUp() override {
    if (missing_.empty()) return;
    if (in_ci()) FAIL() << missing_;
    GTEST_SKIP() << missing_;
  }

  // podman run, least privileged, with the pod's limits; `jobs` is mounted at /job.
  Exec run(const std::vector<std::string>& limits, const std::vector<std::string>& args) {
    // A user namespace of 65,536 ids, as a pod with hostUsers: false has; no network (the runs need
  // none, and the host's firewall stays as it is).
    std::vector<std::string> a{"run", "--rm", "--uidmap", "0:200000:65536", "--gidmap", "0:200000:65536",
                               "--user", "1000:1000", "--cap-drop", "ALL",
                               "--security-opt", "no-new-privileges", "--security-opt", "unmask=ALL",
                               "--security-opt", "seccomp=" + source_dir() + "/deploy/seccomp.json",
                               "--cgroupns", "private", "--network", "none", "-v", dir_.path() + ":/job:ro"};
    a.insert(a.end(), limits.begin(), limits.end());
    a.push_back(kImage);
    a.insert(a.end(), args.begin(), args.end());
    return podman(a);
  }
  Exec run_job(const std::vector<std::string>& limits, const std::string& name, const std::string& code) {
    // For uid 1000 of the container's user namespace: someone else on the host.
    ::chmod(dir_.path().c_str(), 0755);
    ::chmod(dir_.write(name, code).c_str(), 0644);
    return run(limits, {"--json", "--trust", "untrusted", "/job/" + name});
  }
  static nlohmann::json result_of(const Exec& r) {
    return nlohmann::json::parse(r.out.substr(0, r.out.find('\n')), nullptr, false);
  }

  static const std::vector<std::string> kPod;  // untrusted's limits as a pod would set them
  static std::string missing_;
  static std::filesystem::path cwd_;
  TempDir dir_;
};

// `podman kube play` of the shipped manifests: hostUsers: false needs podman's id range.
class PodmanKube : public Podman {
 protected:
  void SetUp() override {
    Podman::SetUp();
    if (IsSkipped() || HasFailure() || has_subids_for_containers()) return;
    const std::string why = "hostUsers: false needs a subordinate id range for 'containers' in /etc/subuid (test.sh adds one)";
    if (in_ci()) FAIL() << why;
    GTEST_SKIP() << why;
  }
};

const std::vector<std::string> Podman::kPod{"--memory", "256m", "--memory-swap", "256m", "--cpus", "1"};
std::string Podman::missing_;
std::filesystem::path Podman::cwd_;

TEST_F(Podman, TheLeastPrivilegedContainerRunsUntrustedCodeIsolatedWithNoDegradation) {
  const Exec r = run_job(kPod, "who.py",
                         "import os\nprint(os.getuid(), open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
                         "print(sorted(os.listdir('/proc'))[:0], os.path.exists('/job'))\n");
  const auto j = result_of(r);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["status"], "exited") << r.out << r.err;
  EXPECT_EQ(j["stdout"], "1000 0000000000000000\n[] False\n") << "the sandbox, not the container, is what runs";
  EXPECT_EQ(j["cgroup"], "enclosing");
  EXPECT_TRUE(!j.contains("degradations") || j["degradations"].empty()) << j["degradations"].dump();
  EXPECT_TRUE(j["landlock"]["enforced"].get<bool>()) << j["landlock"].dump();
}

TEST_F(Podman, ThePodsMemoryLimitIsAnOomKillAndThreadsStopBelowThePidsLimit) {
  const Exec oom = run_job(kPod, "mem.py", "b = bytearray(1 << 30)\nb[::4096] = b'x' * len(b[::4096])\nprint('allocated')\n");
  const auto j = result_of(oom);
  ASSERT_TRUE(j.is_object()) << oom.out << oom.err;
  EXPECT_EQ(j["status"], "oom") << oom.out << oom.err;
  // podman's default pids limit (2048) is looser than untrusted's 64: the sandbox user's own
  // process limit holds instead.
  const Exec threads = run_job(kPod, "threads.py",
                               "import threading, time\nn = 0\ntry:\n    while n < 500:\n"
                               "        threading.Thread(target=time.sleep, args=(3,)).start()\n        n += 1\n"
                               "except RuntimeError:\n    pass\nprint(n)\n");
  const auto t = result_of(threads);
  ASSERT_TRUE(t.is_object()) << threads.out << threads.err;
  const int started = std::stoi(t.value("stdout", std::string("0")));
  EXPECT_GT(started, 0) << threads.out;
  EXPECT_LT(started, 64) << threads.out;
}

TEST_F(Podman, AContainerWithoutLimitsIsRefusedNamingTheFlag) {
  const Exec r = run_job({}, "ok.py", "print('ran')\n");
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_EQ(result_of(r).value("stdout", ""), "") << "untrusted code ran without limits";
  EXPECT_NE((r.out + r.err).find("podman --memory 256m"), std::string::npos) << r.out << r.err;
}

// Root in a user-namespaced pod with the runtime's default capabilities (no CAP_SYS_ADMIN): the
// image is bound inside the sandbox's own namespaces, the id maps are opened as the namespace's
// owner, and the id slots lie inside the pod's 65,536 ids (id_ranges.base 61440 here).
TEST_F(Podman, RootWithoutCapSysAdminRunsInAnIdSlotInsideThePodsIds) {
  ::chmod(dir_.path().c_str(), 0755);
  ::chmod(dir_.write("ok.py", "import os\nprint(os.getuid())\n").c_str(), 0644);
  const auto as_root = [&](const std::string& base) {
    std::vector<std::string> a{"run", "--rm", "--uidmap", "0:200000:65536", "--gidmap", "0:200000:65536",
                               "--user", "0", "--security-opt", "no-new-privileges", "--security-opt", "unmask=ALL",
                               "--security-opt", "seccomp=" + source_dir() + "/deploy/seccomp.json",
                               "--cgroupns", "private", "--network", "none", "-v", dir_.path() + ":/job:ro", "--entrypoint", "sh"};
    a.insert(a.end(), kPod.begin(), kPod.end());
    a.insert(a.end(), {kImage, "-c",
                       "mkdir /tmp/c && cp /etc/sandboxrun/*.yaml /tmp/c/ && sed -i 's/^  base: 100000000$/  base: " +
                           base + "/' /tmp/c/sandbox.yaml && grep -q '^  base: " + base +
                           "$' /tmp/c/sandbox.yaml && exec sandboxrun --json --config /tmp/c/sandbox.yaml "
                           "--audit-log /tmp/audit.log --trust untrusted /job/ok.py"});
    return podman(a);
  };
  const Exec r = as_root("61440");
  const auto j = result_of(r);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["status"], "exited") << r.out << r.err;
  EXPECT_EQ(j["stdout"], "1000\n");
  ASSERT_TRUE(j["id_slot"].is_object()) << r.out;
  const auto root = j["id_slot"]["host_root_uid"].get<uint64_t>();
  EXPECT_GE(root, 61440u);
  EXPECT_LT(root, 61440u + 2048u) << "a slot inside the pod's ids";
  EXPECT_EQ(j["cgroup"], "enclosing");
  EXPECT_TRUE(!j.contains("degradations") || j["degradations"].empty()) << j["degradations"].dump();

  // The host's default range is not the pod's: said, with the setting to change.
  const Exec outside = as_root("100000000");
  EXPECT_EQ(outside.exit_code, 125) << outside.out << outside.err;
  EXPECT_NE((outside.out + outside.err).find("not mapped in this user namespace"), std::string::npos) << outside.out;
  EXPECT_NE((outside.out + outside.err).find("base: 61440"), std::string::npos) << outside.out;
}

// doctor in each configuration of the container matrix (issue 40): what it says, and the setting it names.
TEST_F(Podman, DoctorNamesTheSettingInEachContainerConfiguration) {
  const std::string profile = "seccomp=" + source_dir() + "/deploy/seccomp.json";
  const std::vector<std::string> userns{"--uidmap", "0:200000:65536", "--gidmap", "0:200000:65536"};
  const auto doctor = [&](std::vector<std::string> opts, const std::string& sh = "") {
    std::vector<std::string> a{"run", "--rm", "--network", "none", "--cgroupns", "private"};
    a.insert(a.end(), userns.begin(), userns.end());
    a.insert(a.end(), opts.begin(), opts.end());
    if (sh.empty()) {
      a.insert(a.end(), {kImage, "doctor"});
    } else {
      a.insert(a.end(), {"--entrypoint", "sh", kImage, "-c", sh});
    }
    const Exec r = podman(a);
    return std::make_pair(r.exit_code, r.out + r.err);
  };
  const std::vector<std::string> least{"--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                                       "--memory", "256m", "--memory-swap", "256m", "--cpus", "1"};
  auto with = [](std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  // A masked /proc: no sandbox can mount its own.
  auto [masked, masked_out] = doctor(with(least, {"--security-opt", profile}));
  EXPECT_EQ(masked, 1) << masked_out;
  EXPECT_NE(masked_out.find("procMount: Unmasked"), std::string::npos) << masked_out;
  // podman's own profile refuses sethostname: runs, and says what it went without.
  auto [plain, plain_out] = doctor(with(least, {"--security-opt", "unmask=ALL"}));
  EXPECT_EQ(plain, 0) << plain_out;
  EXPECT_NE(plain_out.find("hostname not set"), std::string::npos) << plain_out;
  // No limits on the container: the trial is refused, naming the pod's resources.
  auto [loose, loose_out] = doctor({"--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "unmask=ALL",
                                    "--security-opt", profile});
  EXPECT_EQ(loose, 1) << loose_out;
  EXPECT_NE(loose_out.find("resources.limits"), std::string::npos) << loose_out;
  // Root in the pod's user namespace with the host's id range.
  auto [root, root_out] = doctor(with(least, {"--user", "0", "--security-opt", "unmask=ALL", "--security-opt", profile}));
  EXPECT_EQ(root, 1) << root_out;
  EXPECT_NE(root_out.find("MISSING  id range"), std::string::npos) << root_out;
  EXPECT_NE(root_out.find("base: 61440"), std::string::npos) << root_out;
  // A cgroup per run wanted on a container's read-only cgroupfs.
  auto [per_run, per_run_out] =
      doctor(with(least, {"--security-opt", "unmask=ALL", "--security-opt", profile}),
             "mkdir /tmp/c && cp /etc/sandboxrun/*.yaml /tmp/c/ && sed -i 's/^  mode: enclosing /  mode: per_run /' "
             "/tmp/c/sandbox.yaml && exec sandboxrun doctor --config /tmp/c/sandbox.yaml");
  EXPECT_EQ(per_run, 1) << per_run_out;
  EXPECT_NE(per_run_out.find("MISSING  cgroups"), std::string::npos) << per_run_out;
  EXPECT_NE(per_run_out.find("cgroup.mode: enclosing"), std::string::npos) << per_run_out;
}

TEST_F(Podman, DoctorInsideTheContainerSaysItCanRun) {
  const Exec r = run(kPod, {"doctor"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("enclosing cgroup"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trial run: a sandbox ran"), std::string::npos) << r.out;
}

// podman 4.3 plays Pods, not Jobs, and ignores procMount: Unmasked, so the pod's /proc stays
// masked and the sandbox's own procfs is refused (the kernel's rule, whatever the capabilities):
// this shows that the manifest is valid and that every other setting holds together — user
// namespace (hostUsers: false), uid 1000, the Localhost profile, dropped capabilities, the
// limits — and that sandboxrun names the one missing; a kubelet honours procMount.
TEST_F(PodmanKube, TheShippedPodManifestRunsUnderKubePlayUpToTheMaskedProc) {
  const std::string manifest = source_dir() + "/deploy/kubernetes/run-pod.yaml";
  // podman 4.3's kube down sometimes fails to unmount the infra container's /dev/shm at once
  // ("device or resource busy") and leaves an empty pod: removed again, then checked gone.
  const auto down = [&] {
    podman({"kube", "down", manifest});
    podman({"pod", "rm", "--force", "--ignore", "sandboxrun-run"});
    // podman makes an emptyDir a volume named after it: a pod removed by force leaves it.
    podman({"volume", "rm", "--force", "audit", "sandboxrun-job"});
  };
  down();  // a pod left by an interrupted run
  const Exec played = podman({"kube", "play", "--network", "none", "--seccomp-profile-root", source_dir() + "/deploy", manifest});
  const std::string ctr = "sandboxrun-run-run";
  EXPECT_TRUE(eventually([&] { return podman({"wait", ctr}).exit_code == 0; }, std::chrono::seconds(120)))
      << played.out << played.err;
  const Exec logs = podman({"logs", ctr});
  const Exec code = podman({"inspect", "--format", "{{.State.ExitCode}}", ctr});
  const Exec user = podman({"inspect", "--format", "{{.Config.User}}", ctr});
  down();
  EXPECT_NE(podman({"pod", "exists", "sandboxrun-run"}).exit_code, 0) << "the pod is left behind";
  EXPECT_NE(podman({"volume", "exists", "audit"}).exit_code, 0) << "the pod's audit volume is left behind";
  EXPECT_EQ(user.out.rfind("1000", 0), 0u) << user.out << user.err;
  EXPECT_EQ(code.out, "125\n") << logs.out << logs.err;
  EXPECT_NE((logs.out + logs.err).find("'mount proc'"), std::string::npos)
      << "if podman now honours procMount: Unmasked, expect the run itself here:\n" << logs.out << logs.err;
}

// The worker Deployment (and its Secret; podman 4.3 skips the Service) under `podman kube play`:
// root of the pod's user namespace with no capability serves MCP over HTTP with the Secret's
// token. A pool needs a cgroup namespace it may write, which podman does not give on this cgroup
// v1 host: the worker's runs of untrusted code are refused there, naming the pod settings that
// give one (the pool in a writable namespace: enclosing_test.cpp, on CI's v2 guest).
TEST_F(PodmanKube, TheShippedWorkerDeploymentServesAndRefusesUntrustedCodeWithoutAWritableCgroupns) {
  const std::string manifest = source_dir() + "/deploy/kubernetes/worker.yaml";
  const std::string pod = "sandboxrun-worker-pod-0", ctr = pod + "-worker";
  const auto down = [&] {
    podman({"kube", "down", manifest});
    podman({"pod", "rm", "--force", "--ignore", pod});
    podman({"volume", "rm", "--force", "worker-audit", "sandboxrun-worker-token"});
    podman({"secret", "rm", "sandboxrun-worker-token"});
  };
  down();
  // hostUsers: false gives a pod 65,536 ids; podman's userns=auto only as many as the image uses.
  const Exec played = podman({"kube", "play", "--network", "none", "--userns", "auto:size=65536", "--seccomp-profile-root",
                              source_dir() + "/deploy", manifest});
  Exec logs;
  const bool listening = eventually([&] {
    logs = podman({"logs", ctr});
    return (logs.out + logs.err).find("listening on http://0.0.0.0:8765") != std::string::npos;
  }, std::chrono::seconds(60));
  const Exec user = podman({"inspect", "--format", "{{.Config.User}}", ctr});
  const Exec refused = podman({"exec", ctr, "sh", "-c",
                               "echo 'print(1)' > /tmp/job.py && exec sandboxrun --json --config /etc/sandboxrun-worker "
                               "--audit-log /tmp/audit.log --trust untrusted /tmp/job.py"});
  down();
  EXPECT_NE(podman({"pod", "exists", pod}).exit_code, 0) << "the pod is left behind";
  EXPECT_NE(podman({"volume", "exists", "worker-audit"}).exit_code, 0) << "the pod's audit volume is left behind";
  ASSERT_TRUE(listening) << played.out << played.err << logs.out << logs.err;
  EXPECT_EQ(user.out.rfind("0", 0), 0u) << user.out << user.err;
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  const std::string said = refused.out + refused.err;
  EXPECT_NE(said.find("a container's /sys/fs/cgroup"), std::string::npos) << said;
  EXPECT_NE(said.find("cgroup2-mount-hierarchy-rw"), std::string::npos) << said;
  EXPECT_NE(said.find("cgroup.mode: enclosing"), std::string::npos) << said;
}

// The Job runs the Pod's template: one text of the settings, checked rather than kept by hand.
TEST(Manifests, TheJobsPodTemplateIsThePods) {
  const auto pod = YAML::LoadAllFromFile(source_dir() + "/deploy/kubernetes/run-pod.yaml");
  const auto job = YAML::LoadAllFromFile(source_dir() + "/deploy/kubernetes/run-job.yaml");
  ASSERT_EQ(pod.size(), 2u);
  ASSERT_EQ(job.size(), 2u);
  EXPECT_EQ(YAML::Dump(pod[0]), YAML::Dump(job[0])) << "the same ConfigMap";
  EXPECT_EQ(job[1]["kind"].as<std::string>(), "Job");
  EXPECT_EQ(YAML::Dump(pod[1]["spec"]), YAML::Dump(job[1]["spec"]["template"]["spec"]));
}

}  // namespace
