// `sandboxrun mcp`: a Model Context Protocol server over the Executor (docs/mcp.md). Tools:
// run_python, assess_python and session_start|run|upload|download|stop. The model never
// overrides a block: a BLOCKED verdict is a tool error, and only a human answering the client's
// elicitation form can give an override reason (then judged by security.yaml's policy).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

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

// Serves one client over stdio: newline-delimited JSON-RPC on `in_fd` / `out_fd` until EOF.
// Then every run still going is killed and every session closed. Returns 0.
int serve_stdio(const Executor& executor, const Options& options, int in_fd, int out_fd);

}  // namespace sandboxrun::mcp
