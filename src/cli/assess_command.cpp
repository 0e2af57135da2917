// `sandboxrun assess [--json] [--config-dir DIR] FILE.py...`
#include <iostream>

#include "cli.hpp"
#include "sandboxrun/assess.hpp"
#include "sandboxrun/config.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/install_paths.hpp"

namespace sandboxrun::cli {

namespace {

constexpr const char* kUsage =
    "usage: sandboxrun assess [--json] [--config-dir DIR | --config PATH] FILE.py...\n"
    "  Assess Python files without running them: LOW, MEDIUM, HIGH or BLOCKED, with findings.\n"
    "  --json            print one JSON object per file, one per line: {file, level, score, findings, notes}\n"
    "  --config-dir DIR  directory holding security.yaml (default: beside the sandbox.yaml that\n"
    "                    `sandboxrun run` uses: $SANDBOXRUN_CONFIG, /etc/sandboxrun, the project's config/)\n"
    "  --config PATH     as `sandboxrun run --config`: a sandbox.yaml, or its directory; security.yaml is beside it\n";

int usage_error(const std::string& what) {
  std::cerr << "sandboxrun assess: " << what << "\n" << kUsage;
  return exit_code::usage;
}

// The same search as `run`, so that both commands judge a file by the same rules.
std::filesystem::path default_config_dir() { return find_config(std::nullopt).parent_path(); }

}  // namespace

int assess_command(const std::vector<std::string>& args) {
  bool json = false;
  std::optional<std::filesystem::path> config_dir;
  // Many files in one call: the rules are loaded once, which is most of a single file's cost.
  std::vector<std::filesystem::path> files;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!options_done && a == "--json") {
      json = true;
    } else if (!options_done && (a == "-h" || a == "--help")) {
      std::cout << kUsage;
      return 0;
    } else if (!options_done && a == "--config-dir") {
      if (i + 1 >= args.size()) return usage_error("--config-dir needs a directory");
      config_dir = args[++i];
    } else if (!options_done && a.starts_with("--config-dir=")) {
      config_dir = a.substr(13);
    } else if (!options_done && (a == "--config" || a.starts_with("--config="))) {
      if (a == "--config" && i + 1 >= args.size()) return usage_error("--config needs a sandbox.yaml or its directory");
      try {
        config_dir = find_config(a == "--config" ? args[++i] : a.substr(9)).parent_path();
      } catch (const Error& e) {
        std::cerr << "sandboxrun assess: " << e.describe() << "\n";
        return exit_code::usage;
      }
    } else if (!options_done && a == "--") {
      options_done = true;
    } else if (!options_done && a.size() > 1 && a[0] == '-') {
      return usage_error("unknown option '" + a + "'");
    } else {
      files.emplace_back(a);
    }
  }
  if (files.empty()) return usage_error("no file to assess");

  SecurityConfig config;
  try {
    const std::filesystem::path dir = config_dir ? *config_dir : default_config_dir();
    config = load_security_config(dir / "security.yaml", install_paths().data_dir);
  } catch (const Error& e) {
    std::cerr << "sandboxrun assess: " << e.describe() << "\n";
    return exit_code::usage;
  }
  int status = 0;
  for (const auto& file : files) {
    Assessment a;
    try {
      a = assess_file(file, config);
    } catch (const Error& e) {
      // The other files are still assessed; the exit status says that one was not.
      std::cerr << "sandboxrun assess: " << e.describe() << "\n";
      status = exit_code::file_missing;
      continue;
    }
    if (json) {
      nlohmann::json j = a.to_json();
      j["file"] = file.string();
      std::cout << j.dump() << "\n";
      continue;
    }
    std::cout << file.string() << ": " << to_string(a.level) << " (score " << a.score << ", " << a.findings.size()
              << (a.findings.size() == 1 ? " finding" : " findings") << ")\n";
    for (const auto& f : a.findings)
      std::cout << "  " << file.string() << ":" << f.line << ": [" << f.severity << "] " << f.rule << " " << f.message
                << "\n";
    for (const auto& n : a.notes) std::cout << "  note: " << n << "\n";
  }
  return status;
}

}  // namespace sandboxrun::cli
