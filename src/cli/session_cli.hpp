// What `sandboxrun repl` and `sandboxrun session` share: the options that make a session, and a
// cell as a terminal shows it.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandboxrun/executor.hpp"

namespace sandboxrun::cli {

struct SessionOptions {
  std::optional<std::string> trust, config, audit_log, image, memory, caller;
  std::optional<double> timeout, cpus, lifetime, idle_timeout;
  std::vector<std::string> env, labels, inputs;
  std::optional<std::string> requirements;
  bool svg_figures = false;
};

// --trust --config --audit-log --image --timeout --memory --cpus --lifetime --idle-timeout
// --caller -e/--env --label.
void add_session_options(CLI::App& app, SessionOptions& opt);

// The request and executor options they ask for; nullopt after a usage error (said on stderr).
struct SessionSetup {
  SessionRequest request;
  ExecutorOptions executor;
};
std::optional<SessionSetup> session_setup(const SessionOptions& opt);
// Reads the --input files into the request, bounded by the executor's input limits. Throws Error.
void load_session_inputs(const SessionOptions& opt, const Executor& executor, SessionRequest& request);

// A cell as a terminal shows it: its stdout, stderr, display items as text, the trailing value,
// the traceback, and what happened when it did not run or end.
void print_cell(CellStatus status, const CellOutput& out, const std::string& message);

// What a cell's command exits with: 0 ok, 1 it raised, 124 timeout, 126 blocked, 125 lost.
int cell_exit_code(CellStatus status);

}  // namespace sandboxrun::cli
