#include <cmath>
#include <cstdlib>
#include <iostream>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cli {

std::optional<int> parse_or_exit(CLI::App& app, const std::vector<std::string>& args) {
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // Every other error of ours reads "sandboxrun: error: ..."; CLI11's own would not.
    std::cerr << "sandboxrun: error: " << e.what() << " (see `" << app.get_name() << " --help`)\n";
    return exit_code::usage;
  }
  return std::nullopt;
}

CLI::Validator positive_number(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0)
          return "'" + s + "' is not " + what + " (a number greater than 0)";
        return {};
      },
      "NUMBER>0");
}

bool key_values(const char* option, const std::vector<std::string>& given, std::map<std::string, std::string>& into) {
  for (const auto& kv : given) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      log::error("{} {}: expected KEY=VALUE", option, kv);
      return false;
    }
    into[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return true;
}

}  // namespace sandboxrun::cli
