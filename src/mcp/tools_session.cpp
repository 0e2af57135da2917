// The session tools: session_start, session_run, session_upload, session_download,
// session_stop. The sessions belong to this MCP connection and end with it.
#include <string_view>

#include "common/base64.hpp"
#include "mcp/tools.hpp"

namespace sandboxrun::mcp {

namespace {

using nlohmann::json;

bool valid_utf8(std::string_view s) {
  try {
    (void)json(std::string(s)).dump();  // the strict handler throws on invalid UTF-8
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// While a cell runs, cancelling the call interrupts it.
class Interruptible {
 public:
  Interruptible(CallContext& ctx, std::shared_ptr<Session> s) : ctx_(ctx) {
    std::lock_guard lock(ctx_.interrupt_mu);
    ctx_.interrupt = [s = std::move(s)] { s->interrupt(); };
  }
  ~Interruptible() {
    std::lock_guard lock(ctx_.interrupt_mu);
    ctx_.interrupt = nullptr;
  }
  Interruptible(const Interruptible&) = delete;
  Interruptible& operator=(const Interruptible&) = delete;

 private:
  CallContext& ctx_;
};

// A cell for the model: what it printed, its value, its traceback; figures as images.
json cell_content(const CellResult& c) {
  std::string text = "status: " + std::string(to_string(c.status));
  if (!c.message.empty()) text += "\n" + c.message;
  if (!c.output.stdout_data.empty()) text += "\n--- stdout ---\n" + c.output.stdout_data;
  if (!c.output.stderr_data.empty()) text += "\n--- stderr ---\n" + c.output.stderr_data;
  if (c.output.result) text += "\n--- result ---\n" + c.output.result->at("text/plain");
  if (c.output.error) {
    text += "\n--- error ---\n";
    for (const auto& line : c.output.error->traceback) text += line;
  }
  json content = json::array({text_content(text)});
  for (const auto& d : c.output.display) {
    if (const auto png = d.find("image/png"); png != d.end()) content.push_back(image_content(png->second, "image/png"));
    else if (const auto html = d.find("text/html"); html != d.end()) content.push_back(text_content(html->second));
    else content.push_back(text_content(d.at("text/plain")));
  }
  return content;
}

}  // namespace

void Tools::close_sessions() {
  std::map<std::string, std::shared_ptr<Session>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sessions_);
  }
  for (auto& [id, s] : all) s->close();
}

json Tools::session_call(const std::string& name, const json& args, CallContext& ctx) {
  if (name == "session_start") {
    SessionRequest req;
    req.trust = opt_.trust;
    req.image = opt_text(args, "image");
    if (!req.image) req.image = opt_.image;
    req.caller = ctx.caller;
    req.labels = ctx.labels;
    try {
      auto s = std::make_shared<Session>(ex_.open_session(req));
      const std::string id = s->id();
      std::lock_guard lock(mu_);
      sessions_[id] = std::move(s);
      return {{"content", {text_content("session " + id + " started")}},
              {"structuredContent", {{"session_id", id}}},
              {"isError", false}};
    } catch (const Error& e) {
      return {{"content", {text_content("cannot start a session: " + e.describe())}}, {"isError", true}};
    }
  }
  const std::string id = arg_text(args, "session_id");
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mu_);
    const auto it = sessions_.find(id);
    if (it == sessions_.end())
      return {{"content", {text_content("no session " + id + " in this connection; start one with session_start")}},
              {"isError", true}};
    s = it->second;
  }
  if (name == "session_stop") {
    {
      std::lock_guard lock(mu_);
      sessions_.erase(id);
    }
    const RunResult& r = s->close();
    return {{"content", {text_content("session " + id + " ended")}}, {"structuredContent", r.to_json()}, {"isError", false}};
  }
  try {
    if (name == "session_run") {
      CellRequest cell{.code = arg_text(args, "code"), .stdin_data = opt_text(args, "stdin").value_or(""),
                       .timeout_s = opt_seconds(args, "timeout"), .override_reason = std::nullopt};
      const Interruptible interruptible(ctx, s);
      CellResult c = s->run(cell);
      if (c.status == CellStatus::blocked && c.assessment.level == RiskLevel::blocked && !ctx.cancelled)
        if (auto reason = ask_override(c.assessment, "this cell", ctx)) {
          cell.override_reason = *reason;
          c = s->run(cell);
        }
      return {{"content", cell_content(c)}, {"structuredContent", c.to_json()}, {"isError", c.status != CellStatus::ok}};
    }
    if (name == "session_upload") {
      const std::string path = arg_text(args, "path");
      std::string data;
      if (auto b64 = opt_text(args, "content_base64")) {
        auto decoded = base64_decode(*b64);
        if (!decoded) throw ParamError("'content_base64' is not base64");
        data = std::move(*decoded);
      } else {
        data = arg_text(args, "content");
      }
      const FilePut put = s->put_file(path, data);
      return {{"content", {text_content(put.refused ? put.message : path + " written (" + std::to_string(data.size()) +
                                                                        " bytes)")}},
              {"structuredContent", put.to_json()},
              {"isError", put.refused}};
    }
    if (name == "session_download") {
      const std::string path = arg_text(args, "path");
      const std::string data = s->get_file(path);
      const std::string b64 = base64_encode(data);
      json content = valid_utf8(data) ? json::array({text_content(data)})
                                      : json::array({{{"type", "resource"},
                                                      {"resource", {{"uri", "sandboxrun://sessions/" + id + "/work/" + path},
                                                                    {"mimeType", "application/octet-stream"},
                                                                    {"blob", b64}}}}});
      return {{"content", content},
              {"structuredContent", {{"path", path}, {"size", data.size()}, {"content_base64", b64}}},
              {"isError", false}};
    }
  } catch (const ParamError&) {
    throw;
  } catch (const Error& e) {
    return {{"content", {text_content(e.describe())}}, {"isError", true}};
  }
  throw ParamError("unknown tool '" + name + "'");
}

}  // namespace sandboxrun::mcp
