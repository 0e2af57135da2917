#include "log.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace sandboxrun::cli::log {

namespace {

Level g_level = Level::warn;

// Colour the level name only for a terminal that shows colours (as spdlog's colour sink did).
bool colour() {
  static const bool on = [] {
    if (::isatty(STDERR_FILENO) != 1) return false;
    if (const char* c = std::getenv("COLORTERM"); c && *c) return true;
    const char* t = std::getenv("TERM");
    return t && *t && std::strcmp(t, "dumb") != 0;
  }();
  return on;
}

}  // namespace

void set_level(Level level) noexcept { g_level = level; }

void write(Level level, std::string_view message) {
  if (level < g_level) return;
  static constexpr const char* kName[] = {"info", "warning", "error"};
  static constexpr const char* kColour[] = {"\033[32m", "\033[33m\033[1m", "\033[31m\033[1m"};
  const auto i = static_cast<size_t>(level);
  std::string line = "sandboxrun: ";
  if (colour()) line = line + kColour[i] + kName[i] + "\033[m";
  else line += kName[i];
  line += ": ";
  line += message;
  line += '\n';
  // One write per message, so lines from concurrent writers do not interleave.
  for (std::string_view rest = line; !rest.empty();) {
    const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n <= 0) break;
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace sandboxrun::cli::log
