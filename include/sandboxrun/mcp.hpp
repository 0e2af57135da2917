// `sandboxrun mcp`: a Model Context Protocol server over the Executor (docs/mcp.md). Tools:
// run_python, assess_python and session_start|run|upload|download|stop. The model never
// overrides a block: a BLOCKED verdict is a tool error, and only a human answering the client's
// elicitation form can give an override reason (then judged by security.yaml's policy).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "sandboxrun/executor.hpp"

namespace sandboxrun::mcp {

struct Options {
  std::optional<Trust> trust{};        // every run and session; the model cannot change it
  std::optional<std::string> caller{}; // who the server runs code for (audited with clientInfo)
  std::optional<std::string> image{};  // default image of run_python and session_start
  size_t max_concurrent = 4;           // tool calls running at once; the rest queue
  size_t max_queued = 64;              // beyond: the call is refused (server busy)
  size_t max_message = 16u << 20;      // bytes per JSON-RPC message
  size_t max_kept_outputs = 64u << 20; // output files kept for resources/read, oldest dropped
  std::string version = "0";           // serverInfo.version
};

// Streamable HTTP (one endpoint, /mcp): POST a message, GET (not offered: 405), DELETE the
// session. Loopback unless a bearer token guards it.
struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8765;                    // 0: any free port (said on stderr)
  std::optional<std::string> token{}; // required in `Authorization: Bearer` when set
  std::vector<std::string> allowed_origins{};  // empty: only http(s)://localhost, 127.0.0.1, [::1]
};

// Serves clients over Streamable HTTP until SIGINT, SIGTERM or SIGHUP; each MCP session (an
// Mcp-Session-Id, made at initialize) is one client as on stdio, ended by DELETE or by the
// server's end. Those signals must be blocked in every thread (before any starts) and the
// Executor opened with stop_signals = false: a thread of the server's takes them. Throws Error when it cannot listen, or would listen beyond loopback without a
// token. Implemented in the sandboxrun-mcp-http helper (libcpp-httplib), which `sandboxrun
// mcp --http` runs: the sandboxrun binary itself stays free of libssl and the HTTP library.
int serve_http(const Executor& executor, const Options& options, const HttpOptions& http);

// Serves one client over stdio: newline-delimited JSON-RPC on `in_fd` / `out_fd` until EOF.
// Then every run still going is killed and every session closed. Returns 0.
int serve_stdio(const Executor& executor, const Options& options, int in_fd, int out_fd);

}  // namespace sandboxrun::mcp
