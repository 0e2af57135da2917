// MCP over stdio: one JSON-RPC message per line, both ways. A line longer than max_message is
// skipped as it streams past (never buffered whole) and answered with an error.
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "mcp/server.hpp"
#include "sandboxrun/mcp.hpp"

namespace sandboxrun::mcp {

int serve_stdio(const Executor& executor, const Options& options, int in_fd, int out_fd) {
  std::mutex out_mu;
  bool out_open = true;
  auto send = [&](const nlohmann::json& message, const Id&) {
    const std::string line = serialize(message) + "\n";
    std::lock_guard lock(out_mu);
    if (out_open && !write_all(out_fd, line.data(), line.size())) out_open = false;  // the client went away
  };
  Server server(executor, options, send, new_run_id());
  std::string line;
  bool skipping = false;  // inside a line over the limit
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      const size_t nl = chunk.find('\n');
      const std::string_view part = chunk.substr(0, nl);
      if (!skipping) {
        if (line.size() + part.size() > options.max_message) {
          skipping = true;
          line.clear();
          line.shrink_to_fit();
        } else {
          line.append(part);
        }
      }
      if (nl == std::string_view::npos) break;
      chunk.remove_prefix(nl + 1);
      if (skipping) {
        send(error_message(nullptr, code::invalid_request,
                           "a message over " + std::to_string(options.max_message) + " bytes was skipped"),
             nullptr);
        skipping = false;
      } else if (line.find_first_not_of(" \t\r") != std::string::npos) {
        server.handle(parse_message(line, options.max_message));
      }
      line.clear();
    }
  }
  server.shutdown();
  return 0;
}

}  // namespace sandboxrun::mcp
