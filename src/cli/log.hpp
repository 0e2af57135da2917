// The command's messages on stderr ("sandboxrun: error: ..."), with "{}" placeholders filled
// in order. A few lines of our own instead of spdlog: the CLI only ever printed plain lines,
// and spdlog + libfmt were two shared libraries and a logger registry set up on every start.
#pragma once

#include <charconv>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace sandboxrun::cli::log {

enum class Level { info, warn, error };

// Messages below `level` are dropped (the default: warn; --verbose: info).
void set_level(Level level) noexcept;
void write(Level level, std::string_view message);

namespace detail {
inline void fill(std::ostringstream& out, std::string_view fmt) { out << fmt; }
template <class T, class... Rest>
void fill(std::ostringstream& out, std::string_view fmt, const T& first, const Rest&... rest) {
  const size_t at = fmt.find("{}");
  if (at == std::string_view::npos) {
    out << fmt;
    return;
  }
  out << fmt.substr(0, at);
  if constexpr (std::is_floating_point_v<T>) {
    char buf[32];  // the shortest form that reads back the same, as spdlog printed it
    out << std::string_view(buf, std::to_chars(buf, buf + sizeof buf, first).ptr);
  } else {
    out << first;
  }
  fill(out, fmt.substr(at + 2), rest...);
}
template <class... A>
std::string format(std::string_view fmt, const A&... args) {
  std::ostringstream out;
  fill(out, fmt, args...);
  return out.str();
}
}  // namespace detail

template <class... A>
void error(std::string_view fmt, const A&... args) { write(Level::error, detail::format(fmt, args...)); }
template <class... A>
void warn(std::string_view fmt, const A&... args) { write(Level::warn, detail::format(fmt, args...)); }
template <class... A>
void info(std::string_view fmt, const A&... args) { write(Level::info, detail::format(fmt, args...)); }

}  // namespace sandboxrun::cli::log
