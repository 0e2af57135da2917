#include "mcp/server.hpp"

#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>

#include "audit/audit_format.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::mcp {

namespace {

using nlohmann::json;

constexpr auto kElicitTimeout = std::chrono::minutes(10);
constexpr int kServerBusy = -32000;
constexpr int kResourceNotFound = -32002;
constexpr int kUnsupportedVersion = -32022;  // 2026-07-28: data {supported, requested}

// A 2026-07-28 result: complete, and cacheable ones say for how long (not at all: a server's
// tools and outputs are its own, and outputs come and go).
json complete(json result, bool cacheable = false) {
  result["resultType"] = "complete";
  if (cacheable) {
    result["ttlMs"] = 0;
    result["cacheScope"] = "private";
  }
  return result;
}

// Printable ASCII, at most `max` bytes: what the client calls itself goes into audit records.
std::string printable(std::string s, size_t max) {
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  if (s.size() > max) s.resize(max);
  return s;
}

constexpr const char* kInstructions =
    "Runs Python in a sandbox. Every piece of code is assessed first and recorded in a tamper-evident audit "
    "log. A BLOCKED verdict is refused; you cannot override it, only the user can, when asked. Use sessions "
    "(session_start, session_run) when cells should keep their state.";

const char* const kLogLevels[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};

}  // namespace

bool is_modern(const json& params) {
  const auto meta = params.find("_meta");
  return meta != params.end() && meta->is_object() && meta->contains(kMetaVersion);
}

Server::Server(const Executor& executor, const Options& options, Send send, std::string connection_id)
    : tools_(executor, options), opt_(options), send_(std::move(send)), connection_id_(std::move(connection_id)) {
  labels_["mcp.session"] = connection_id_;
  state_key_.resize(32);
  if (::getrandom(state_key_.data(), state_key_.size(), 0) != static_cast<ssize_t>(state_key_.size()))
    throw_errno("getrandom for the MCP server's request-state key");
  for (size_t i = 0; i < std::max<size_t>(1, opt_.max_concurrent); ++i) workers_.emplace_back([this] { worker(); });
}

Server::~Server() { shutdown(); }

void Server::shutdown() {
  std::vector<std::string> keys;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    queue_.clear();
    for (const auto& [key, call] : calls_) keys.push_back(key);
    for (auto& [key, p] : asked_) p.set_value(std::nullopt);
    asked_.clear();
  }
  for (const auto& k : keys) cancel(k);
  cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  tools_.close_sessions();
}

void Server::send(const json& message) {
  const bool response = message.contains("id") && !message.contains("method");
  send_(message, response ? message["id"] : Id());
}

void Server::cancel_request(const Id& id) { cancel(id.dump()); }

void Server::handle(const Message& m) {
  // A reader that missed a type check must cost the client one error reply, not the server.
  if (const auto* r = std::get_if<Request>(&m)) {
    try {
      return on_request(*r);
    } catch (const std::exception& e) {
      return send(error_message(r->id, code::internal_error, std::string("internal error: ") + e.what()));
    }
  }
  if (const auto* n = std::get_if<Notification>(&m)) {
    try {
      return on_notification(*n);
    } catch (const std::exception&) {
      return;  // a notification gets no reply
    }
  }
  if (const auto* r = std::get_if<Response>(&m)) return on_response(*r);
  const auto& bad = std::get<Invalid>(m);
  send(error_message(bad.id, bad.code, bad.message));
}

json Server::initialize(const json& params) {
  const std::string asked = text_field(params, "protocolVersion");
  std::string chosen = kProtocolVersions[0];
  for (const char* v : kProtocolVersions)
    if (asked == v) chosen = v;
  const json info = object_field(params, "clientInfo");
  const std::string client = printable(text_field(info, "name", "unknown"), 64) + " " + printable(text_field(info, "version", "?"), 32);
  {
    std::lock_guard lock(mu_);
    protocol_ = chosen;
    can_elicit_ = object_field(params, "capabilities").contains("elicitation");
    labels_["mcp.client"] = client;
    caller_ = opt_.caller ? opt_.caller : std::optional<std::string>("mcp:" + printable(text_field(info, "name", "unknown"), 64));
  }
  return {{"protocolVersion", chosen},
          {"capabilities", {{"tools", {{"listChanged", false}}}, {"resources", json::object()}, {"logging", json::object()}}},
          {"serverInfo", {{"name", "sandboxrun"}, {"title", "sandboxrun: sandboxed Python"}, {"version", opt_.version}}},
          {"instructions", kInstructions}};
}

json Server::discover() const {
  return complete({{"supportedVersions", {kModernVersion}},
                   {"capabilities", {{"tools", {{"listChanged", false}}}, {"resources", json::object()}}},
                   {"instructions", kInstructions},
                   {"_meta", {{kMetaServerInfo, {{"name", "sandboxrun"}, {"title", "sandboxrun: sandboxed Python"},
                                                  {"version", opt_.version}}}}}},
                  /*cacheable=*/true);
}

// 2026-07-28: no initialize; each request names its revision and the client's capabilities.
void Server::on_modern_request(const Request& r) {
  const json& meta = r.params["_meta"];
  const std::string version = text_field(meta, kMetaVersion);
  if (version != kModernVersion)
    return send(error_message(r.id, kUnsupportedVersion,
                              "unsupported protocol revision '" + version.substr(0, 64) + "': this server speaks " +
                                  kModernVersion + " (and 2025-11-25, 2025-06-18 after initialize)",
                              {{"supported", {kModernVersion}}, {"requested", version}}));
  if (!meta.contains(kMetaCapabilities) || !meta[kMetaCapabilities].is_object())
    return send(error_message(r.id, code::invalid_params,
                              std::string("the 2026-07-28 _meta envelope lacks ") + kMetaCapabilities + " (an object)"));
  if (r.method == "tools/list") return send(result_message(r.id, complete(tools_.list(), true)));
  if (r.method == "tools/call") return enqueue_call(r, std::optional<json>(meta));
  if (r.method == "resources/list")
    return send(result_message(r.id, complete({{"resources", json::array()}}, true)));
  if (r.method == "resources/read") {
    const std::string uri = text_field(r.params, "uri");
    if (uri.empty()) return send(error_message(r.id, code::invalid_params, "'uri' is required (a string)"));
    if (auto res = tools_.read_resource(uri)) return send(result_message(r.id, complete(std::move(*res), true)));
    return send(error_message(r.id, code::invalid_params, "no such resource (or no longer kept)", {{"uri", uri}}));
  }
  send(error_message(r.id, code::method_not_found,
                     "method not found in revision 2026-07-28: " + r.method.substr(0, 100)));
}

std::string Server::request_state(const std::string& tool, const json& args) const {
  // The audit chain's keyed hasher (OpenSSL's HMAC-SHA256); one per call: calls run on many threads.
  const audit::HexDigest mac = audit::RecordHasher(state_key_).digest(tool + '\n', args.dump());
  return std::string(mac.begin(), mac.end());
}

void Server::on_request(const Request& r) {
  if (r.method == "server/discover") return send(result_message(r.id, discover()));
  if (is_modern(r.params)) return on_modern_request(r);
  if (r.method == "initialize") {
    const json result = initialize(r.params);
    std::lock_guard lock(mu_);
    initialized_ = true;  // notifications/initialized follows; requests may come before it
    send(result_message(r.id, result));
    return;
  }
  if (r.method == "ping") return send(result_message(r.id, json::object()));
  {
    std::lock_guard lock(mu_);
    if (!initialized_) return send(error_message(r.id, code::invalid_request, "send initialize first"));
  }
  if (r.method == "tools/list") return send(result_message(r.id, tools_.list()));
  if (r.method == "tools/call") return enqueue_call(r, std::nullopt);
  if (r.method == "resources/list") return send(result_message(r.id, {{"resources", json::array()}}));
  if (r.method == "resources/read") {
    const auto uri = r.params.find("uri");
    if (uri == r.params.end() || !uri->is_string())
      return send(error_message(r.id, code::invalid_params, "'uri' is required (a string)"));
    if (auto res = tools_.read_resource(uri->get<std::string>())) return send(result_message(r.id, *res));
    return send(error_message(r.id, kResourceNotFound, "no such resource (or no longer kept)",
                               {{"uri", uri->get<std::string>()}}));
  }
  if (r.method == "logging/setLevel") {
    const std::string level = text_field(r.params, "level");
    if (std::find(std::begin(kLogLevels), std::end(kLogLevels), level) == std::end(kLogLevels))
      return send(error_message(r.id, code::invalid_params, "'level' must be one of debug ... emergency"));
    return send(result_message(r.id, json::object()));
  }
  send(error_message(r.id, code::method_not_found, "method not found: " + r.method.substr(0, 100)));
}

void Server::on_notification(const Notification& n) {
  if (n.method == "notifications/cancelled") {
    const auto id = n.params.find("requestId");
    if (id != n.params.end() && (id->is_string() || id->is_number_integer())) cancel(id->dump());
  }
  // notifications/initialized and anything else: nothing to do.
}

void Server::on_response(const Response& r) {
  std::lock_guard lock(mu_);
  const auto it = asked_.find(r.id.dump());
  if (it == asked_.end()) return;  // not ours, or given up on
  it->second.set_value(r.result);
  asked_.erase(it);
}

void Server::enqueue_call(const Request& r, const std::optional<json>& envelope) {
  auto call = std::make_shared<Call>();
  call->id = r.id;
  call->key = r.id.dump();
  const auto name = r.params.find("name");
  if (name == r.params.end() || !name->is_string())
    return send(error_message(r.id, code::invalid_params, "'name' is required (a string)"));
  call->tool = name->get<std::string>();
  call->args = r.params.contains("arguments") ? r.params["arguments"] : json::object();
  if (!call->args.is_object())
    return send(error_message(r.id, code::invalid_params, "'arguments' must be an object"));
  if (const auto meta = r.params.find("_meta"); meta != r.params.end() && meta->is_object())
    call->progress_token = meta->value("progressToken", json());
  if (envelope) {
    call->modern = true;
    call->ctx.may_ask = object_field(*envelope, kMetaCapabilities).contains("elicitation");
    // The retry of a call that asked: its answer counts only with the state we gave for it.
    if (const auto answers = r.params.find("inputResponses"); answers != r.params.end() && !answers->is_null()) {
      const std::string state = text_field(r.params, "requestState");
      const std::string want = request_state(call->tool, call->args);
      unsigned char diff = state.size() == want.size() ? 0 : 1;
      for (size_t i = 0; i < state.size() && i < want.size(); ++i) diff |= state[i] ^ want[i];  // constant time
      if (diff != 0)
        return send(error_message(r.id, code::invalid_params,
                                  "inputResponses without this call's requestState: answers go with the call that asked"));
      const json answer = object_field(*answers, "override");
      if (answer.empty()) return send(error_message(r.id, code::invalid_params, "inputResponses lacks 'override'"));
      call->ctx.input_answer = answer;
      call->ctx.may_ask = false;  // asked once; a decline is the answer
    }
  }
  call->cancel.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  call->ctx.cancel_fd = call->cancel.get();
  std::lock_guard lock(mu_);
  if (stopping_) return;
  if (calls_.count(call->key))
    return send(error_message(r.id, code::invalid_request, "a call with this id is still running"));
  if (queue_.size() >= opt_.max_queued)
    return send(error_message(r.id, kServerBusy, "busy: " + std::to_string(queue_.size()) +
                                                      " calls are waiting; try again when some have ended"));
  call->ctx.caller = caller_;
  call->ctx.labels = labels_;
  if (envelope) {  // 2026-07-28: who calls is said by each request
    const json info = object_field(*envelope, kMetaClientInfo);
    const std::string client = printable(text_field(info, "name", "unknown"), 64);
    call->ctx.labels["mcp.client"] = client + " " + printable(text_field(info, "version", "?"), 32);
    call->ctx.labels["mcp.protocol"] = kModernVersion;
    if (!opt_.caller) call->ctx.caller = "mcp:" + client;
  }
  calls_[call->key] = call;
  queue_.push_back(call);
  cv_.notify_one();
}

void Server::cancel(const std::string& key) {
  std::shared_ptr<Call> call;
  {
    std::lock_guard lock(mu_);
    const auto it = calls_.find(key);
    if (it == calls_.end()) return;
    call = it->second;
    const auto q = std::find(queue_.begin(), queue_.end(), call);
    if (q != queue_.end()) {  // never started: forgotten (no response is due to a cancelled request)
      queue_.erase(q);
      calls_.erase(it);
      return;
    }
  }
  call->ctx.cancelled = true;
  const uint64_t one = 1;
  if (::write(call->cancel.get(), &one, sizeof one) < 0) {
    // an eventfd counter cannot overflow from a handful of cancels
  }
  std::lock_guard lock(call->ctx.interrupt_mu);
  if (call->ctx.interrupt) call->ctx.interrupt();
}

void Server::worker() {
  for (;;) {
    std::shared_ptr<Call> call;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      call = queue_.front();
      queue_.pop_front();
    }
    run_call(*call);
    std::lock_guard lock(mu_);
    calls_.erase(call->key);
  }
}

void Server::run_call(Call& call) {
  call.ctx.progress = [this, &call](double progress, const std::string& message) {
    if (call.progress_token.is_null() || call.ctx.cancelled) return;
    send_(notification_message("notifications/progress",
                               {{"progressToken", call.progress_token}, {"progress", progress}, {"message", message}}),
          call.id);
  };
  if (!call.modern) call.ctx.elicit = [this, &call](const json& params) { return elicit(params, call); };
  json reply;
  try {
    json result = tools_.call(call.tool, call.args, call.ctx);
    reply = result_message(call.id, call.modern ? complete(std::move(result)) : std::move(result));
  } catch (const InputRequired& q) {
    reply = result_message(call.id, {{"resultType", "input_required"},
                                     {"inputRequests", {{"override", {{"method", "elicitation/create"},
                                                                      {"params", q.elicitation}}}}},
                                     {"requestState", request_state(call.tool, call.args)}});
  } catch (const ParamError& e) {
    reply = error_message(call.id, code::invalid_params, e.what());
  } catch (const std::exception& e) {
    reply = error_message(call.id, code::internal_error, e.what());
  }
  if (!call.ctx.cancelled) send(reply);
}

std::optional<json> Server::elicit(const json& params, Call& call) {
  std::future<std::optional<json>> answer;
  std::string key;
  {
    std::lock_guard lock(mu_);
    if (!can_elicit_ || stopping_) return std::nullopt;
    const json id = "sandboxrun-elicit-" + std::to_string(++next_ask_);
    key = id.dump();
    answer = asked_[key].get_future();
    send_(request_message(id, "elicitation/create", params), call.id);
  }
  const auto until = std::chrono::steady_clock::now() + kElicitTimeout;
  while (answer.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    if (call.ctx.cancelled || std::chrono::steady_clock::now() > until) {
      std::lock_guard lock(mu_);
      if (const auto it = asked_.find(key); it != asked_.end()) {
        it->second.set_value(std::nullopt);
        asked_.erase(it);
      }
      break;
    }
  }
  return answer.get();
}

}  // namespace sandboxrun::mcp
