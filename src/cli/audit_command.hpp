// The subcommands of `sandboxrun audit`, each run on the log audit_command() resolved.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "sandboxrun/audit.hpp"

namespace sandboxrun::cli::audit_cmd {

// The log a subcommand works on (absolute) and the audit.yaml settings that go with it.
struct Resolved {
  AuditConfig cfg;
  std::filesystem::path log;
};

// Each returns the exit status: 0 done (intact), 1 damage found, 2 a usage error; failures
// throw Error. verify: audit_verify.cpp; show, tail: audit_show.cpp; the rest: audit_repair.cpp.
// `anchor`: a checkpoint file instead of the log's own anchor ("" = the log's).
int verify(const Resolved& r, const std::string& key_path, const std::string& anchor, bool as_json, bool objects);
// With `session`: its cells, files and end in order, or (with `diff`) the diff between two cells.
int show(const Resolved& r, bool as_json, const std::string& run, const std::string& diff, const std::string& caller,
         size_t last, const std::string& session);
int tail(const Resolved& r, size_t n, bool as_json);
int prune_objects(const Resolved& r, const std::string& grace_text);
int repair(const Resolved& r);

}  // namespace sandboxrun::cli::audit_cmd
