// `sandboxrun repl [options]`: a session at a terminal (or fed by a pipe). Each block of lines
// is a cell: a block ends at an empty line, as Python's own prompt ends a compound statement, or
// at the end of the input. The cell's output is shown as a notebook would (its stdout and
// stderr, display items as text, the value of a trailing expression, the traceback), or with
// --json as one JSON object per cell.
#include <unistd.h>

#include <iostream>
#include <string>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/executor.hpp"
#include "session_cli.hpp"

namespace sandboxrun::cli {

namespace {

// The next cell: lines up to an empty one (or the end); nullopt at the end of the input.
std::optional<std::string> next_block(bool prompt) {
  std::string block, line;
  if (prompt) std::cerr << ">>> " << std::flush;
  while (std::getline(std::cin, line)) {
    if (line.empty()) {
      if (!block.empty()) return block;
      if (prompt) std::cerr << ">>> " << std::flush;
      continue;
    }
    block += line + "\n";
    if (prompt) std::cerr << "... " << std::flush;
  }
  if (!block.empty()) return block;
  return std::nullopt;
}

}  // namespace

int repl_command(const std::vector<std::string>& argv) {
  SessionOptions opt;
  bool json = false;
  CLI::App app{"Run Python blocks in one sandboxed interpreter that keeps its state (a session)", "sandboxrun repl"};
  add_session_options(app, opt);
  app.add_flag("--json", json, "print one JSON object per cell");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  auto setup = session_setup(opt);
  if (!setup) return exit_code::usage;
  try {
    Executor executor = Executor::open(setup->executor);
    load_session_inputs(opt, executor, setup->request);
    Session session = executor.open_session(setup->request);
    const bool prompt = !json && ::isatty(0);
    if (prompt) std::cerr << "sandboxrun session " << session.id() << " (an empty line runs a block; Ctrl-D ends)\n";
    int rc = 0;
    while (auto code = next_block(prompt)) {
      const CellResult c = session.run({.code = *code});
      if (json) std::cout << c.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      else print_cell(c.status, c.output, c.message);
      rc = cell_exit_code(c.status);
      if (c.status == CellStatus::lost) break;
    }
    session.close();
    return rc;
  } catch (const Error& e) {
    log::error("{}", e.describe());
    return exit_code::setup_failed;
  }
}

}  // namespace sandboxrun::cli
