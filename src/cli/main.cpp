// sandboxrun: run untrusted Python with Docker-grade isolation, without a daemon.
#include <cstring>
#include <filesystem>
#include <string_view>
#include <iostream>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/assess.hpp"
#include "sandboxrun/audit.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/error.hpp"
#include "image/image.hpp"
#include "common/yaml_strict.hpp"

extern char** environ;

namespace {

void usage() {
  std::cout <<
      R"(usage: sandboxrun [run] [options] FILE.py [-- ARGS...]
       sandboxrun assess [--json] [--config DIR] FILE.py...
       sandboxrun audit verify|show|tail|repair|prune-objects [--log PATH]
       sandboxrun image unpack|ls|rm|build-default [default|science] ...
       sandboxrun deps ls|rm|gc [--config PATH]
       sandboxrun doctor [--config PATH]
       sandboxrun help | --version

Run `sandboxrun run --help` for the run options, `sandboxrun COMMAND --help` for a command's.
)";
}

constexpr std::string_view kCommands[] = {"run", "assess", "audit", "image", "deps", "doctor", "help"};

// A first word that is no command and no file is a mistyped command, not a program to run:
// `sandboxrun asess job.py` must not answer "cannot open asess" (127).
bool looks_like_a_command(const std::string& word) {
  if (word.empty() || word[0] == '-' || word.find('/') != std::string::npos || word.find('.') != std::string::npos)
    return false;
  std::error_code ec;
  return !std::filesystem::exists(word, ec);
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
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    usage();
    return args.empty() ? sandboxrun::exit_code::usage : 0;
  }
  if (args[0] == "--version" || args[0] == "-V") {
    std::cout << "sandboxrun " SANDBOXRUN_VERSION "\n";
    return 0;
  }
  try {
    const std::string& cmd = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (cmd == "doctor") return sandboxrun::cli::doctor_command(rest);
    if (cmd == "deps") return sandboxrun::cli::deps_command(rest);
    if (cmd == "assess") return sandboxrun::assess_command(rest);
    if (cmd == "image" && !rest.empty() && rest[0] == "build-default")
      return sandboxrun::cli::image_build_default({rest.begin() + 1, rest.end()});
    if (cmd == "image") return sandboxrun::image::image_command(rest);
    if (cmd == "audit") {
      // audit.yaml beside the sandbox.yaml that `run` would use; none found: the defaults.
      std::optional<std::filesystem::path> audit_yaml;
      try {
        audit_yaml = sandboxrun::find_config(std::nullopt).parent_path() / "audit.yaml";
      } catch (const sandboxrun::Error&) {
      }
      return sandboxrun::audit_command(rest, audit_yaml);
    }
    auto [wb, we] = arg_env_span(argc, argv);
    if (cmd == "run") return sandboxrun::cli::run_command(rest, wb, we);
    if (looks_like_a_command(cmd)) {
      const std::string_view near = sandboxrun::StrictYaml::nearest(cmd, kCommands);
      sandboxrun::cli::log::error("'{}' is not a command{}; to run a file, give its path (./{} or {}.py)", cmd,
                                  near.empty() ? "" : " (did you mean '" + std::string(near) + "'?)", cmd, cmd);
      usage();
      return sandboxrun::exit_code::usage;
    }
    return sandboxrun::cli::run_command(args, wb, we);
  } catch (const sandboxrun::Error& e) {
    sandboxrun::cli::log::error("{}", e.describe());
    return sandboxrun::exit_code::setup_failed;
  } catch (const std::exception& e) {
    sandboxrun::cli::log::error("{}", e.what());
    return sandboxrun::exit_code::setup_failed;
  }
}
