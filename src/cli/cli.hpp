#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sandboxrun {
class Executor;
namespace mcp {
struct Options;
struct HttpOptions;
}  // namespace mcp
}  // namespace sandboxrun

namespace sandboxrun::cli {

// `sandboxrun [run] ...`; argv0 wipe range is used to hide the caller's command line from the
// sandbox's /proc/1/cmdline.
int run_command(const std::vector<std::string>& args, char* wipe_begin, char* wipe_end);
int doctor_command(const std::vector<std::string>& args);
// `sandboxrun image unpack|ls|rm|build-default` (args exclude "image"). Exit: 0 done, 1 failed
// (said on stderr), 2 a usage error.
int image_command(const std::vector<std::string>& args);
// `sandboxrun image build-default [--rebuild]` (args exclude "image build-default").
int image_build_default(const std::vector<std::string>& args);
int deps_command(const std::vector<std::string>& args);
// `sandboxrun repl [options]` (args exclude "repl"): blocks of stdin run as cells of one session.
// Exit: the last cell's (0 ok, 1 it raised, 124 timeout, 126 blocked, 125 the session was lost or
// could not start), 2 a usage error.
int repl_command(const std::vector<std::string>& args);
// `sandboxrun session start|run|put|get|files|ls|stop` (args exclude "session"): sessions kept by
// a holder process between commands. Exit: run as repl's; start 0 or 125; the others 0 done,
// 1 failed (said on stderr), 126 a put refused by the verdict, 2 a usage error.
int session_command(const std::vector<std::string>& args);
// `sandboxrun mcp [options]` (args exclude "mcp"): an MCP server on stdio until EOF, or with
// --http through `http_serve` (the sandboxrun-mcp-http helper's; without it the helper is run).
// Exit: 0, 125 when the Executor cannot open or the server cannot listen, 2 a usage error.
using HttpServe = int (*)(const Executor&, const mcp::Options&, const mcp::HttpOptions&);
int mcp_command(const std::vector<std::string>& args, const std::string& version, HttpServe http_serve = nullptr);
// `sandboxrun assess [--json] [--config-dir DIR | --config PATH] FILE.py...` (args exclude
// "assess"). Exit: 0 assessed (any level), 2 usage or configuration error, 127 a file missing or
// unreadable.
int assess_command(const std::vector<std::string>& args);
// `sandboxrun audit verify|show|tail|repair|prune-objects` (args exclude "audit"). Exit: 0 ok,
// 1 damage found or the operation failed, 2 a usage error. `default_config`: the audit.yaml used
// without --config (absent: the built-in defaults).
int audit_command(const std::vector<std::string>& args,
                  const std::optional<std::filesystem::path>& default_config = std::nullopt);

// Parses a subcommand's arguments (in order). Returns the exit status when the command must
// stop here: 0 after --help, exit_code::usage (2) after a usage error, printed as "sandboxrun: error: ...".
std::optional<int> parse_or_exit(CLI::App& app, const std::vector<std::string>& args);

// Splits each KEY=VALUE of `option` into `into`; false (said on stderr) when one is not.
bool key_values(const char* option, const std::vector<std::string>& given, std::map<std::string, std::string>& into);

// Accepts a finite number greater than 0; the error names `what` ("seconds", "CPUs").
CLI::Validator positive_number(const std::string& what);

}  // namespace sandboxrun::cli
