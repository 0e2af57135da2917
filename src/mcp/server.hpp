// One MCP client's server side (2025-06-18 and 2025-11-25 revisions): the lifecycle, tools/list,
// tools/call on a bounded pool of workers, cancellation, progress, elicitation round trips and
// resources/read. Transport-free: messages come in through handle() and go out through `send`.
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

// The revisions spoken, newest first: a client asking for another gets the first.
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18"};

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
    UniqueFd cancel;  // an eventfd, written on cancel
    CallContext ctx;
  };

  void send(const nlohmann::json& message);  // a response: related to its own id
  void on_request(const Request& r);
  void on_notification(const Notification& n);
  void on_response(const Response& r);
  nlohmann::json initialize(const nlohmann::json& params);
  void enqueue_call(const Request& r);
  void cancel(const std::string& key);
  void worker();
  void run_call(Call& call);
  std::optional<nlohmann::json> elicit(const nlohmann::json& params, Call& call);

  Tools tools_;
  Options opt_;
  Send send_;
  std::string connection_id_;

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
