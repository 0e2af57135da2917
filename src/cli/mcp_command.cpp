// `sandboxrun mcp`: serves the Model Context Protocol to one client over stdio (an MCP host
// starts it: {"command": "sandboxrun", "args": ["mcp", "--trust", "untrusted"]}).
#include <unistd.h>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/mcp.hpp"

namespace sandboxrun::cli {

int mcp_command(const std::vector<std::string>& argv, const std::string& version) {
  std::optional<std::string> trust, config, audit_log;
  mcp::Options opt;
  opt.version = version;
  CLI::App app{"Serve the Model Context Protocol on stdin/stdout: tools that run and assess Python in the sandbox",
               "sandboxrun mcp"};
  app.add_option("--trust", trust, "trust level of every run and session (default from config); the model "
                                   "cannot change it")
      ->check(CLI::IsMember({"untrusted", "unknown", "trusted"}));
  app.add_option("--config", config, "sandbox.yaml, or the directory holding it");
  app.add_option("--audit-log", audit_log, "audit log file (overrides config)");
  app.add_option("--caller", opt.caller, "who the code runs for (audited, with the client's name as a label)");
  app.add_option("--image", opt.image, "default image of run_python and session_start");
  app.add_option("--max-concurrent", opt.max_concurrent, "tool calls running at once; the rest queue")
      ->check(CLI::Range(size_t{1}, size_t{64}));
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  if (trust) opt.trust = parse_trust(*trust);
  try {
    ExecutorOptions eo;
    if (config) eo.config = *config;
    if (audit_log) eo.audit_log = *audit_log;
    eo.warm = true;
    Executor executor = Executor::open(eo);
    return mcp::serve_stdio(executor, opt, STDIN_FILENO, STDOUT_FILENO);
  } catch (const Error& e) {
    log::error("{}", e.describe());
    return exit_code::setup_failed;
  }
}

}  // namespace sandboxrun::cli
