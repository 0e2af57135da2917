#include "cli.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::cli {

std::optional<int> parse_or_exit(CLI::App& app, const std::vector<std::string>& args) {
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : exit_code::usage;
  }
  return std::nullopt;
}

}  // namespace sandboxrun::cli
