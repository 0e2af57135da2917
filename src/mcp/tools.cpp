#include "mcp/tools.hpp"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/base64.hpp"
#include "mcp/message.hpp"

namespace sandboxrun::mcp {

namespace {

using nlohmann::json;

constexpr const char* kOutputsUri = "sandboxrun://runs/";

json schema_object(json properties, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
}

const json kCode = {{"type", "string"}, {"description", "Python source to run"}};
const json kTimeout = {{"type", "number"}, {"exclusiveMinimum", 0},
                       {"description", "seconds (may only shorten the trust level's timeout)"}};
const json kSessionId = {{"type", "string"}, {"description", "from session_start"}};

// What structuredContent of each tool holds: the command's JSON, described loosely (extra
// members are allowed, so a new field never breaks a client that validates).
json run_output_schema() {
  return schema_object({{"run_id", {{"type", "string"}}},
                        {"status", {{"type", "string"}}},
                        {"exit_code", {{"type", "integer"}}},
                        {"stdout", {{"type", "string"}}},
                        {"stderr", {{"type", "string"}}}},
                       {"run_id", "status", "exit_code"});
}

std::string mime_of(const std::string& path) {
  if (path.ends_with(".png")) return "image/png";
  if (path.ends_with(".svg")) return "image/svg+xml";
  if (path.ends_with(".jpg") || path.ends_with(".jpeg")) return "image/jpeg";
  if (path.ends_with(".json")) return "application/json";
  if (path.ends_with(".csv")) return "text/csv";
  if (path.ends_with(".txt") || path.ends_with(".py") || path.ends_with(".md")) return "text/plain";
  return "application/octet-stream";
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A temporary directory, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sandboxrun-mcp-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw_errno("cannot make a temporary directory for a run's outputs");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::string findings_text(const Assessment& a) {
  std::string t = std::string(to_string(a.level)) + " (score " + std::to_string(a.score) + ")";
  for (const auto& f : a.findings)
    t += "\n  line " + std::to_string(f.line) + ": [" + f.severity + "] " + f.rule + " " + f.message;
  return t;
}

}  // namespace

std::string arg_text(const json& args, const char* key) {
  auto v = opt_text(args, key);
  if (!v) throw ParamError(std::string("'") + key + "' is required (a string)");
  return *v;
}

std::optional<std::string> opt_text(const json& args, const char* key) {
  const auto it = args.find(key);
  if (it == args.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw ParamError(std::string("'") + key + "' must be a string");
  return it->get<std::string>();
}

std::optional<double> opt_seconds(const json& args, const char* key) {
  const auto it = args.find(key);
  if (it == args.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || !(it->get<double>() > 0) || it->get<double>() > 1e6)
    throw ParamError(std::string("'") + key + "' must be a number of seconds above 0");
  return it->get<double>();
}

json text_content(std::string text) { return {{"type", "text"}, {"text", std::move(text)}}; }

json image_content(const std::string& base64, const std::string& mime) {
  return {{"type", "image"}, {"data", base64}, {"mimeType", mime}};
}

Tools::Tools(const Executor& executor, const Options& options) : ex_(executor), opt_(options) {}

Tools::~Tools() { close_sessions(); }

json Tools::list() const {
  json files = {{"type", "object"},
                {"additionalProperties", {{"type", "string"}}},
                {"description", "files put into /work beside the code: relative path -> text"}};
  json tools = json::array();
  tools.push_back(
      {{"name", "run_python"},
       {"title", "Run Python in a sandbox"},
       {"description",
        "Runs Python code in a fresh sandbox (no network unless the trust level allows it). The code is assessed "
        "first: a BLOCKED verdict does not run (only a human may override it). Files the code writes under /work "
        "come back: images as images, others as resource links."},
       {"inputSchema",
        schema_object({{"code", kCode},
                       {"files", files},
                       {"stdin", {{"type", "string"}, {"description", "what the program reads on stdin"}}},
                       {"timeout", kTimeout},
                       {"requirements", {{"type", "string"}, {"description", "pip requirement lines"}}},
                       {"image", {{"type", "string"}, {"description", "image name, e.g. science"}}}},
                      {"code"})},
       {"outputSchema", run_output_schema()}});
  tools.push_back({{"name", "assess_python"},
                   {"title", "Assess Python without running it"},
                   {"description", "The assessor's verdict (LOW, MEDIUM, HIGH, BLOCKED) and findings; nothing runs."},
                   {"inputSchema", schema_object({{"code", kCode}}, {"code"})},
                   {"outputSchema", schema_object({{"level", {{"type", "string"}}},
                                                   {"score", {{"type", "integer"}}},
                                                   {"findings", {{"type", "array"}}}},
                                                  {"level", "score", "findings"})}});
  tools.push_back(
      {{"name", "session_start"},
       {"title", "Start a Python session"},
       {"description", "Starts a sandboxed interpreter whose cells keep their variables, imports and files, as a "
                       "notebook's do. It ends with session_stop or when this MCP connection ends."},
       {"inputSchema", schema_object({{"image", {{"type", "string"}, {"description", "image name, e.g. science"}}}}, {})},
       {"outputSchema", schema_object({{"session_id", {{"type", "string"}}}}, {"session_id"})}});
  tools.push_back(
      {{"name", "session_run"},
       {"title", "Run a cell in a session"},
       {"description", "Runs code as the session's next cell. The value of a trailing expression, display() and "
                       "matplotlib figures come back (figures as images). Every cell is assessed with the cells "
                       "before it."},
       {"inputSchema", schema_object({{"session_id", kSessionId}, {"code", kCode},
                                      {"stdin", {{"type", "string"}}}, {"timeout", kTimeout}},
                                     {"session_id", "code"})},
       {"outputSchema", schema_object({{"status", {{"type", "string"}}}}, {"status"})}});
  tools.push_back({{"name", "session_upload"},
                   {"title", "Put a file into a session's /work"},
                   {"description", "Writes text (or base64 bytes) to a path under the session's /work. A .py file "
                                   "is assessed with the session's code."},
                   {"inputSchema", schema_object({{"session_id", kSessionId},
                                                  {"path", {{"type", "string"}}},
                                                  {"content", {{"type", "string"}}},
                                                  {"content_base64", {{"type", "string"}}}},
                                                 {"session_id", "path"})},
                   {"outputSchema", schema_object({{"refused", {{"type", "boolean"}}}}, {"refused"})}});
  tools.push_back({{"name", "session_download"},
                   {"title", "Get a file from a session's /work"},
                   {"description", "Reads a file under the session's /work."},
                   {"inputSchema", schema_object({{"session_id", kSessionId}, {"path", {{"type", "string"}}}},
                                                 {"session_id", "path"})},
                   {"outputSchema", schema_object({{"path", {{"type", "string"}}},
                                                   {"size", {{"type", "integer"}}},
                                                   {"content_base64", {{"type", "string"}}}},
                                                  {"path", "size", "content_base64"})}});
  tools.push_back({{"name", "session_stop"},
                   {"title", "End a session"},
                   {"description", "Ends the session: its interpreter and sandbox."},
                   {"inputSchema", schema_object({{"session_id", kSessionId}}, {"session_id"})},
                   {"outputSchema", run_output_schema()}});
  return {{"tools", tools}};
}

json Tools::call(const std::string& name, const json& args, CallContext& ctx) {
  if (!args.is_object()) throw ParamError("'arguments' must be an object");
  if (name == "run_python") return run_python(args, ctx);
  if (name == "assess_python") return assess_python(args);
  if (name.starts_with("session_")) return session_call(name, args, ctx);
  throw ParamError("unknown tool '" + name + "'");
}

json Tools::assess_python(const json& args) {
  const Assessment a = ex_.assess(arg_text(args, "code"));
  return {{"content", {text_content(findings_text(a))}}, {"structuredContent", a.to_json()}, {"isError", false}};
}

std::optional<std::string> Tools::ask_override(const Assessment& a, const std::string& what, CallContext& ctx) {
  if (!ctx.elicit && !ctx.may_ask && !ctx.input_answer) return std::nullopt;
  const json params = {
      {"message", "sandboxrun's assessor refused " + what + " as " + findings_text(a) +
                      "\n\nRun it anyway? Only a person may decide: give the reason (it is recorded in the audit "
                      "log), or decline."},
      {"requestedSchema",
       {{"type", "object"},
        {"properties", {{"reason", {{"type", "string"}, {"title", "Override reason"},
                                    {"description", "why this code may run anyway (audited)"}, {"minLength", 4}}}}},
        {"required", {"reason"}}}}};
  std::optional<json> answer;
  if (ctx.input_answer) answer = ctx.input_answer;  // 2026-07-28: asked before, answered in the retry
  else if (ctx.may_ask) {
    json form = params;
    form["mode"] = "form";
    throw InputRequired{std::move(form)};
  }
  else answer = ctx.elicit(params);
  if (!answer || text_field(*answer, "action") != "accept") return std::nullopt;
  const auto content = answer->find("content");
  if (content == answer->end() || !content->is_object() || !(*content)["reason"].is_string()) return std::nullopt;
  return (*content)["reason"].get<std::string>();
}

json Tools::run_python(const json& args, CallContext& ctx) {
  RunRequest req;
  req.code = arg_text(args, "code");
  req.trust = opt_.trust;
  req.limits.timeout_s = opt_seconds(args, "timeout");
  req.image = opt_text(args, "image");
  if (!req.image) req.image = opt_.image;
  if (auto r = opt_text(args, "requirements")) {
    req.requirements = *r;
    req.requirements_origin = "the requirements argument";
  }
  if (auto s = opt_text(args, "stdin")) req.stdin_data = *s;
  if (const auto f = args.find("files"); f != args.end() && !f->is_null()) {
    if (!f->is_object()) throw ParamError("'files' must be an object of relative path -> text");
    for (const auto& [path, data] : f->items()) {
      if (!data.is_string()) throw ParamError("'files' values must be strings (the file's text)");
      req.inputs.push_back({path, data.get<std::string>(), 0644});
    }
  }
  req.caller = ctx.caller;
  req.labels = ctx.labels;
  req.cancel_fd = ctx.cancel_fd;
  const auto started = std::chrono::steady_clock::now();
  auto last = started;
  req.on_sample = [&](const CgroupUsage&, std::chrono::milliseconds elapsed) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(1)) return;
    last = now;
    ctx.progress(static_cast<double>(elapsed.count()) / 1000.0,
                 "running for " + std::to_string(elapsed.count() / 1000) + " s");
  };
  TempDir tmp;
  req.output_dir = tmp.path / "out";
  RunResult r = ex_.run(req);
  if (r.status == RunStatus::blocked && r.assessment.level == RiskLevel::blocked && !ctx.cancelled) {
    if (auto reason = ask_override(r.assessment, "this code", ctx)) {
      req.override_reason = *reason;
      req.labels["mcp.override"] = "elicited";  // a person answered the client's form
      std::filesystem::remove_all(*req.output_dir);
      r = ex_.run(req);
    }
  }
  std::string text = "status: " + std::string(to_string(r.status)) + " (exit " + std::to_string(r.exit_code) + ")";
  if (r.status == RunStatus::blocked) text += "\nblocked by the assessor: " + findings_text(r.assessment);
  if (!r.error.empty()) text += "\n" + r.error;
  if (!r.outcome.stdout_data.empty()) text += "\n--- stdout ---\n" + r.outcome.stdout_data;
  if (!r.outcome.stderr_data.empty()) text += "\n--- stderr ---\n" + r.outcome.stderr_data;
  json content = json::array({text_content(text)});
  std::map<std::string, std::string> kept;
  if (r.outputs)
    for (const auto& f : r.outputs->files) {
      std::string data = read_file(*req.output_dir / f.path);
      const std::string mime = mime_of(f.path);
      if (mime.starts_with("image/")) content.push_back(image_content(base64_encode(data), mime));
      else
        content.push_back({{"type", "resource_link"}, {"uri", kOutputsUri + r.run_id + "/outputs/" + f.path},
                           {"name", f.path}, {"mimeType", mime}, {"size", f.size}});
      kept[f.path] = std::move(data);
    }
  if (!kept.empty()) keep_outputs(r.run_id, std::move(kept));
  const bool failed = r.status != RunStatus::exited || r.exit_code != 0;
  return {{"content", content}, {"structuredContent", r.to_json()}, {"isError", failed}};
}

void Tools::keep_outputs(const std::string& run_id, std::map<std::string, std::string> files) {
  std::lock_guard lock(mu_);
  for (const auto& [path, data] : files) outputs_bytes_ += data.size();
  outputs_[run_id] = std::move(files);
  outputs_order_.push_back(run_id);
  while (outputs_bytes_ > opt_.max_kept_outputs && outputs_order_.size() > 1) {
    for (const auto& [path, data] : outputs_[outputs_order_.front()]) outputs_bytes_ -= data.size();
    outputs_.erase(outputs_order_.front());
    outputs_order_.erase(outputs_order_.begin());
  }
}

std::optional<json> Tools::read_resource(const std::string& uri) {
  if (!uri.starts_with(kOutputsUri)) return std::nullopt;
  const std::string rest = uri.substr(std::string(kOutputsUri).size());
  const size_t slash = rest.find("/outputs/");
  if (slash == std::string::npos) return std::nullopt;
  std::lock_guard lock(mu_);
  const auto run = outputs_.find(rest.substr(0, slash));
  if (run == outputs_.end()) return std::nullopt;
  const auto file = run->second.find(rest.substr(slash + 9));
  if (file == run->second.end()) return std::nullopt;
  return json{{"contents", {{{"uri", uri}, {"mimeType", mime_of(file->first)}, {"blob", base64_encode(file->second)}}}}};
}

}  // namespace sandboxrun::mcp
