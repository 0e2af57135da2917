// The MCP tools over the Executor: their schemas, and what a call does (tools.cpp: runs and
// assessments; tools_session.cpp: sessions). Results are CallToolResult objects: content for the
// model, structuredContent = the command line's JSON of the same thing.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "sandboxrun/executor.hpp"
#include "sandboxrun/mcp.hpp"

namespace sandboxrun::mcp {

// A call's arguments do not fit its input schema: a JSON-RPC invalid-params error.
struct ParamError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// 2026-07-28: the call needs the human's answer first. Thrown by a tool; the server returns an
// input_required result asking `elicitation` (elicitation/create's params), and the client
// retries the call with the answer (CallContext::input_answer).
struct InputRequired {
  nlohmann::json elicitation;
};

// What a running call may ask of the server, and how it learns it was cancelled.
struct CallContext {
  int cancel_fd = -1;                  // readable once the client cancelled the call
  std::atomic<bool> cancelled{false};
  // Reports progress when the client asked for it (a progressToken); a no-op otherwise.
  std::function<void(double progress, const std::string& message)> progress;
  // Asks the human through the client (elicitation/create); nullopt when the client cannot or
  // the call was cancelled. The answer is the client's result object.
  std::function<std::optional<nlohmann::json>(const nlohmann::json& params)> elicit;
  // 2026-07-28: the client can answer a question (may_ask: its envelope names elicitation), and
  // the answer its retry carried, checked against the question's requestState.
  bool may_ask = false;
  std::optional<nlohmann::json> input_answer;
  // Set while a session cell runs: interrupts it on cancel.
  std::mutex interrupt_mu;
  std::function<void()> interrupt;
  std::optional<std::string> caller;
  std::map<std::string, std::string> labels;  // mcp.client, mcp.session
};

class Tools {
 public:
  Tools(const Executor& executor, const Options& options);
  ~Tools();
  Tools(const Tools&) = delete;
  Tools& operator=(const Tools&) = delete;

  nlohmann::json list() const;  // the tools/list result
  // Throws ParamError for an unknown tool or arguments that do not fit; any other failure is a
  // result with isError.
  nlohmann::json call(const std::string& name, const nlohmann::json& args, CallContext& ctx);
  // resources/read of sandboxrun://runs/ID/outputs/PATH: nullopt when unknown (or dropped).
  std::optional<nlohmann::json> read_resource(const std::string& uri);
  // Closes every session (the MCP session that made them ended).
  void close_sessions();

 private:
  nlohmann::json run_python(const nlohmann::json& args, CallContext& ctx);
  nlohmann::json assess_python(const nlohmann::json& args);
  nlohmann::json session_call(const std::string& name, const nlohmann::json& args, CallContext& ctx);
  // Asks the human for an override reason of a BLOCKED verdict; nullopt: none given.
  std::optional<std::string> ask_override(const Assessment& a, const std::string& what, CallContext& ctx);
  void keep_outputs(const std::string& run_id, std::map<std::string, std::string> files);

  const Executor& ex_;
  Options opt_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
  // Output files of recent runs (run id -> path -> bytes), oldest dropped past max_kept_outputs.
  std::map<std::string, std::map<std::string, std::string>> outputs_;
  std::vector<std::string> outputs_order_;
  size_t outputs_bytes_ = 0;
};

// Arguments: a string, number or object member, checked (ParamError says which).
std::string arg_text(const nlohmann::json& args, const char* key);
std::optional<std::string> opt_text(const nlohmann::json& args, const char* key);
std::optional<double> opt_seconds(const nlohmann::json& args, const char* key);
// {"type": "text", "text": ...}, {"type": "image", ...}
nlohmann::json text_content(std::string text);
nlohmann::json image_content(const std::string& base64, const std::string& mime);

}  // namespace sandboxrun::mcp
