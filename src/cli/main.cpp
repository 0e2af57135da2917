// sandboxrun: run untrusted Python with Docker-grade isolation, without a daemon.
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string_view>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/suggest.hpp"

extern char** environ;

namespace {

namespace cli = sandboxrun::cli;

// What a subcommand gets: its arguments (after its name), and the span of argv and environ
// strings that `run` wipes inside the sandbox's pid 1.
struct Invocation {
  std::vector<std::string> args;
  char* wipe_begin;
  char* wipe_end;
};

// The command table: `sandboxrun NAME ARGS...` calls `run`; `synopsis` is its line in --help.
struct Command {
  const char* name;
  const char* synopsis;
  int (*run)(const Invocation&);
};

int audit(const Invocation& in) {
  // audit.yaml beside the sandbox.yaml that `run` would use; none found: the defaults.
  std::optional<std::filesystem::path> audit_yaml;
  try {
    audit_yaml = sandboxrun::find_config(std::nullopt).parent_path() / "audit.yaml";
  } catch (const sandboxrun::Error&) {
  }
  return cli::audit_command(in.args, audit_yaml);
}

void usage();

// The first entry is also what runs when the first argument names no command (`sandboxrun FILE.py`).
constexpr Command kCommands[] = {
    {"run", "[run] [options] FILE.py [-- ARGS...]",
     [](const Invocation& in) { return cli::run_command(in.args, in.wipe_begin, in.wipe_end); }},
    {"assess", "assess [--json] [--config DIR] FILE.py...",
     [](const Invocation& in) { return cli::assess_command(in.args); }},
    {"audit", "audit verify|show|tail|repair|prune-objects [--log PATH]", audit},
    {"image", "image unpack|ls|rm|build-default [default|science] ...", [](const Invocation& in) { return cli::image_command(in.args); }},
    {"deps", "deps ls|rm|gc [--config PATH]", [](const Invocation& in) { return cli::deps_command(in.args); }},
    {"repl", "repl [--trust LEVEL] [--json] [--timeout S] ...  (a session: blocks of stdin keep their state)",
     [](const Invocation& in) { return cli::repl_command(in.args); }},
    {"session", "session start|run|put|get|files|ls|stop ...  (sessions that outlive a command)",
     [](const Invocation& in) { return cli::session_command(in.args); }},
    {"mcp", "mcp [--trust LEVEL] [--caller WHO]  (a Model Context Protocol server on stdio)",
     [](const Invocation& in) { return cli::mcp_command(in.args, SANDBOXRUN_VERSION); }},
    {"doctor", "doctor [--config PATH]", [](const Invocation& in) { return cli::doctor_command(in.args); }},
    {"help", "help | --version", [](const Invocation&) { return usage(), 0; }},
};

void usage() {
  const char* lead = "usage: ";
  for (const Command& c : kCommands) {
    std::cout << lead << "sandboxrun " << c.synopsis << "\n";
    lead = "       ";
  }
  std::cout << "\nRun `sandboxrun run --help` for the run options, `sandboxrun COMMAND --help` for a command's.\n";
}

// A first word that is no command and no file is a mistyped command, not a program to run:
// `sandboxrun asess job.py` must not answer "cannot open asess" (127).
bool looks_like_a_command(const std::string& word) {
  if (word.empty() || word[0] == '-' || word.find('/') != std::string::npos || word.find('.') != std::string::npos)
    return false;
  std::error_code ec;
  return !std::filesystem::exists(word, ec);
}

int mistyped_command(const std::string& word) {
  std::vector<std::string_view> names;
  for (const Command& c : kCommands) names.emplace_back(c.name);
  const std::string_view near = sandboxrun::nearest_name(word, names);
  cli::log::error("'{}' is not a command{}; to run a file, give its path (./{} or {}.py)", word,
                  near.empty() ? "" : " (did you mean '" + std::string(near) + "'?)", word, word);
  usage();
  return sandboxrun::exit_code::usage;
}

// The span of argv and environ strings, to be wiped inside the sandbox's pid 1.
std::pair<char*, char*> arg_env_span(int argc, char** argv) {
  char* begin = argv[0];
  char* end = argv[argc - 1] + std::strlen(argv[argc - 1]) + 1;
  for (char** e = environ; e && *e; ++e) {
    if (*e < begin) continue;
    char* tail = *e + std::strlen(*e) + 1;
    if (*e == end) end = tail;  // environ strings follow argv contiguously
  }
  return {begin, end};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    usage();
    return args.empty() ? sandboxrun::exit_code::usage : 0;
  }
  if (args[0] == "--version" || args[0] == "-V") {
    std::cout << "sandboxrun " SANDBOXRUN_VERSION "\n";
    return 0;
  }
  try {
    const auto [wipe_begin, wipe_end] = arg_env_span(argc, argv);
    for (const Command& c : kCommands)
      if (args[0] == c.name) return c.run({{args.begin() + 1, args.end()}, wipe_begin, wipe_end});
    if (looks_like_a_command(args[0])) return mistyped_command(args[0]);
    return kCommands[0].run({std::move(args), wipe_begin, wipe_end});
  } catch (const sandboxrun::Error& e) {
    cli::log::error("{}", e.describe());
    return sandboxrun::exit_code::setup_failed;
  } catch (const std::exception& e) {
    cli::log::error("{}", e.what());
    return sandboxrun::exit_code::setup_failed;
  }
}
