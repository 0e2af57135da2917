// What goes into a run's /work and what comes back out: --input files read on the host, and
// --output files copied from the sandbox's /work tmpfs after the run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandboxrun/fd.hpp"
#include "sandboxrun/record.hpp"

namespace sandboxrun {

// One file copied into /work before the run.
struct InputFile {
  std::string path;    // plain relative path under /work ("data/a.csv")
  std::string data;    // the bytes, read once on the host
  uint32_t mode = 0644;
};

// One entry of the inputs/outputs manifest.
struct FileRecord {
  std::string path;
  uint64_t size = 0;
  std::string sha256;
  uint32_t mode = 0;
  static constexpr auto fields = std::tuple{record::field("path", &FileRecord::path), record::field("size", &FileRecord::size),
                                            record::field("sha256", &FileRecord::sha256), record::field("mode", &FileRecord::mode)};
  bool operator==(const FileRecord&) const = default;
};

// What --output found under /work.
struct OutputManifest {
  std::vector<FileRecord> files;    // copied into the output directory
  // Not copied, with why (symlink, FIFO, bad name; over a cap): the first kMaxListed of each.
  struct Skipped {
    std::string path;
    std::string reason;
  };
  std::vector<Skipped> skipped;
  uint64_t skipped_count = 0;       // all of them, listed or not
  bool truncated = false;           // a cap stopped a regular file from being copied
  std::string error;                // the copy itself failed (the output directory ...)
  static constexpr size_t kMaxListed = 100;
  // The manifest's paths together: the run_end record carrying it must stay well below the
  // audit log's 1 MiB record limit, whatever names the program chose.
  static constexpr size_t kMaxPathBytes = 256 << 10;
};

struct InputLimits {
  uint64_t bytes = 64ull << 20;
  uint64_t files = 1000;
};

// True for "a", "a/b.py": no leading '/', no empty, "." or ".." component, no control bytes.
bool plain_relative_path(std::string_view path) noexcept;

// Reads `src` (a regular file, or a directory tree) into `into` under `name` (default: its base
// name), never following a symlink: a symlink, FIFO, device or socket is refused by name.
// Throws Error naming the input and the limit when `into` would exceed `limits`.
void load_input(const std::filesystem::path& src, const std::optional<std::string>& name,
                const InputLimits& limits, std::vector<InputFile>& into);

// Parses "SRC[:NAME]" (the last ':' splits only when what follows is a plain relative path).
std::pair<std::filesystem::path, std::optional<std::string>> parse_input_arg(const std::string& arg);

// Creates `dir` (or accepts it when it is an empty directory, not a symlink) and returns a
// directory fd opened with openat2(RESOLVE_BENEATH). Throws Error with the fix.
UniqueFd open_output_dir(const std::filesystem::path& dir);

struct OutputLimits {
  uint64_t files = 1000;
  uint64_t bytes = 64ull << 20;
};

// Copies every regular file under `work_dir` (an fd of the run's /work) that is not one of
// `unchanged` (same path, same bytes) into `out_dir`, keeping relative paths. Never follows a
// symlink on either side; every file is created O_EXCL|O_NOFOLLOW beneath out_dir. `on_copied`,
// when set, is called with each copied file's entry and bytes (e.g. to keep them in the audit
// object store); it must not throw.
OutputManifest collect_outputs(int work_dir, int out_dir, const std::vector<InputFile>& unchanged,
                               const OutputLimits& limits,
                               const std::function<void(const FileRecord&, std::string_view)>& on_copied = {});
FileRecord record_of(const InputFile& f);

}  // namespace sandboxrun
