// One MCP client's server side: the lifecycle, tools/list, tools/call on a bounded pool of
// workers, cancellation, progress, elicitation and resources/read. Two eras: 2025-06-18 and
// 2025-11-25 (initialize, then a connection's state; elicitation is a request to the client) and
// 2026-07-28 (server/discover, then each request carries its own `_meta` envelope; elicitation is
// an `input_required` result the client answers by retrying the call). Transport-free: messages
// come in through handle() and go out through `send`.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mcp/message.hpp"
#include "mcp/tools.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::mcp {

// The revisions spoken through initialize, newest first: a client asking for another gets the first.
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18"};
// The revision spoken through server/discover, without initialize.
inline constexpr const char* kModernVersion = "2026-07-28";
// The 2026-07-28 envelope's keys in a request's (or a result's) `_meta`.
inline constexpr const char* kMetaVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kMetaCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";
// A request of the 2026-07-28 era: its params' _meta names a protocol revision.
bool is_modern(const nlohmann::json& params);

class Server {
 public:
  // Must be thread-safe. `related`: the client's request this message belongs to (a response
  // to it, its progress, a question asked while it runs), null for none; HTTP sends such
  // messages on that request's stream.
  using Send = std::function<void(const nlohmann::json& message, const Id& related)>;
  Server(const Executor& executor, const Options& options, Send send, std::string connection_id);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void handle(const Message& m);
  // The client's request `id` was withdrawn another way (its HTTP stream closed).
  void cancel_request(const Id& id);
  // The client is gone: every call is cancelled (its run killed), the workers end, the
  // sessions close. Idempotent.
  void shutdown();

 private:
  struct Call {
    Id id;
    std::string key;  // id.dump(): how notifications/cancelled names it
    std::string tool;
    nlohmann::json args;
    nlohmann::json progress_token;
    bool modern = false;  // 2026-07-28: the result carries resultType, questions are results
    UniqueFd cancel;  // an eventfd, written on cancel
    CallContext ctx;
  };

  void send(const nlohmann::json& message);  // a response: related to its own id
  void on_request(const Request& r);
  void on_notification(const Notification& n);
  void on_response(const Response& r);
  nlohmann::json initialize(const nlohmann::json& params);
  nlohmann::json discover() const;
  void on_modern_request(const Request& r);
  // The caller and labels of a call: the connection's (initialize) or the request's envelope.
  void enqueue_call(const Request& r, const std::optional<nlohmann::json>& envelope);
  // requestState of an input_required result: binds the human's answer to this tool and these
  // arguments (an HMAC with a key of this server's), so a retry cannot carry it to other code.
  std::string request_state(const std::string& tool, const nlohmann::json& args) const;
  void cancel(const std::string& key);
  void worker();
  void run_call(Call& call);
  std::optional<nlohmann::json> elicit(const nlohmann::json& params, Call& call);

  Tools tools_;
  Options opt_;
  Send send_;
  std::string connection_id_;
  std::string state_key_;  // 32 random bytes

  std::mutex mu_;
  std::condition_variable cv_;
  bool initialized_ = false, stopping_ = false, can_elicit_ = false;
  std::string protocol_;
  std::optional<std::string> caller_;
  std::map<std::string, std::string> labels_;
  std::deque<std::shared_ptr<Call>> queue_;
  std::map<std::string, std::shared_ptr<Call>> calls_;  // queued and running, by key
  std::map<std::string, std::promise<std::optional<nlohmann::json>>> asked_;  // our requests
  uint64_t next_ask_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace sandboxrun::mcp
