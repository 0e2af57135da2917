// MCP over Streamable HTTP: one endpoint. 2025-06-18 and 2025-11-25: a session per
// Mcp-Session-Id, each with its own Server as a stdio client has. 2026-07-28: no session; every
// request (its envelope says who calls) goes to one shared Server, under an id of the server's
// own so that two clients' equal ids never meet, and gets its own id back in the answer. A
// tools/call is answered on an SSE stream (its progress and the questions asked while it runs go
// there first); other requests get their JSON response. cpp-httplib does the HTTP.
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <thread>

#include "mcp/server.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/mcp.hpp"

namespace sandboxrun::mcp {

namespace {

using nlohmann::json;

constexpr const char* kPath = "/mcp";
// An MCP session without a request for this long is ended, as a DELETE would (its runs and
// sandbox sessions with it): a client that vanished without one.
constexpr auto kIdleSession = std::chrono::hours(1);

// What the server says about one client request, in order; done after its response.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<json> out;
  bool done = false;
};

// One MCP session.
class Conn {
 public:
  Conn(const Executor& ex, const Options& opt, std::string id)
      : server_(ex, opt, [this](const json& m, const Id& related) { deliver(m, related); }, std::move(id)) {}
  Server& server() {
    last_used_ = std::chrono::steady_clock::now().time_since_epoch().count();
    return server_;
  }
  // No request for this long (and none running): the client is gone without a DELETE.
  bool idle_for(std::chrono::steady_clock::duration d) const {
    std::lock_guard lock(mu_);
    return streams_.empty() &&
           std::chrono::steady_clock::now().time_since_epoch().count() - last_used_.load() > d.count();
  }
  std::shared_ptr<Stream> open(const Id& id) {
    auto s = std::make_shared<Stream>();
    std::lock_guard lock(mu_);
    streams_[id.dump()] = s;
    return s;
  }
  void close(const Id& id) {
    std::lock_guard lock(mu_);
    streams_.erase(id.dump());
  }

 private:
  // Messages not tied to a request have no stream to go on (no GET stream is offered).
  void deliver(const json& m, const Id& related) {
    std::shared_ptr<Stream> s;
    {
      std::lock_guard lock(mu_);
      if (const auto it = streams_.find(related.dump()); !related.is_null() && it != streams_.end()) s = it->second;
    }
    if (!s) return;
    std::lock_guard lock(s->mu);
    s->out.push_back(m);
    if (m.contains("id") && !m.contains("method") && m["id"] == related) s->done = true;
    s->cv.notify_all();
  }

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Stream>> streams_;
  std::atomic<std::chrono::steady_clock::rep> last_used_{std::chrono::steady_clock::now().time_since_epoch().count()};
  Server server_;  // last: destroyed first, while deliver() still has its streams
};

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

// An Origin header names a page that wants to talk to us (DNS rebinding): only local pages, or
// the ones allowed.
bool origin_allowed(const std::string& origin, const std::vector<std::string>& allowed) {
  if (origin.empty()) return true;  // not a browser
  if (!allowed.empty()) return std::find(allowed.begin(), allowed.end(), origin) != allowed.end();
  for (const char* local : {"http://localhost", "https://localhost", "http://127.0.0.1", "https://127.0.0.1",
                            "http://[::1]", "https://[::1]"}) {
    const std::string l = local;
    if (origin == l || (origin.rfind(l + ":", 0) == 0)) return true;
  }
  return false;
}

void json_reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(serialize(body), "application/json");
}

// The answer to request `id` (the server's name for it; the client's is `theirs`): JSON, or for
// a tools/call server-sent events until its response, its progress and questions first. A
// client that closes the stream withdraws the call.
void answer(httplib::Response& res, const std::shared_ptr<Conn>& conn, const std::shared_ptr<Stream>& stream,
            const Id& id, const Id& theirs, bool call) {
  auto as_theirs = [id, theirs](json m) {
    if (m.contains("id") && !m.contains("method") && m["id"] == id) m["id"] = theirs;
    return m;
  };
  if (!call) {
    std::unique_lock lock(stream->mu);
    stream->cv.wait_for(lock, std::chrono::seconds(60), [&] { return stream->done; });
    const json reply = stream->out.empty() ? error_message(theirs, code::internal_error, "no response")
                                           : as_theirs(stream->out.back());
    lock.unlock();
    conn->close(id);
    return json_reply(res, 200, reply);
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [conn, stream, id, as_theirs](size_t, httplib::DataSink& sink) {
        std::unique_lock lock(stream->mu);
        stream->cv.wait_for(lock, std::chrono::seconds(1), [&] { return !stream->out.empty() || stream->done; });
        while (!stream->out.empty()) {
          const std::string event = "event: message\ndata: " + serialize(as_theirs(stream->out.front())) + "\n\n";
          stream->out.pop_front();
          if (!sink.write(event.data(), event.size())) {
            lock.unlock();
            conn->server().cancel_request(id);  // the client went away: its run goes too
            return false;
          }
        }
        if (stream->done) {
          sink.done();
          return true;
        }
        if (!sink.is_writable()) {
          lock.unlock();
          conn->server().cancel_request(id);
          return false;
        }
        return true;
      },
      [conn, id](bool) { conn->close(id); });
}

}  // namespace

int serve_http(const Executor& executor, const Options& opt, const HttpOptions& http) {
  if (!loopback(http.host) && !http.token)
    throw Error("refusing to listen on " + http.host + " without a bearer token",
                "give --token-file FILE (clients send `Authorization: Bearer TOKEN`), or listen on 127.0.0.1")
        .as(ErrorKind::usage);
  std::mutex conns_mu;
  std::map<std::string, std::shared_ptr<Conn>> conns;
  // 2026-07-28's requests, from every client: one Server (its sandbox sessions are reached by
  // their unguessable ids and end on their idle timeout, or with the server).
  const auto modern_conn = std::make_shared<Conn>(executor, opt, "stateless");
  std::atomic<uint64_t> modern_seq{0};
  httplib::Server svr;
  svr.new_task_queue = [&opt] { return new httplib::ThreadPool(std::max<size_t>(16, opt.max_concurrent * 4)); };
  svr.set_payload_max_length(opt.max_message);

  // Every request: the token, the origin, the protocol revision.
  auto admitted = [&](const httplib::Request& req, httplib::Response& res) {
    if (http.token && req.get_header_value("Authorization") != "Bearer " + *http.token) {
      res.set_header("WWW-Authenticate", "Bearer");
      json_reply(res, 401, error_message(nullptr, code::invalid_request, "a bearer token is required"));
      return false;
    }
    if (!origin_allowed(req.get_header_value("Origin"), http.allowed_origins)) {
      json_reply(res, 403, error_message(nullptr, code::invalid_request, "this Origin may not use the server"));
      return false;
    }
    const std::string version = req.get_header_value("MCP-Protocol-Version");
    if (!version.empty() && std::none_of(std::begin(kProtocolVersions), std::end(kProtocolVersions),
                                         [&](const char* v) { return version == v; }) &&
        version != "2025-03-26" && version != kModernVersion) {
      json_reply(res, 400, error_message(nullptr, code::invalid_request, "unsupported MCP-Protocol-Version " + version));
      return false;
    }
    return true;
  };
  auto conn_of = [&](const httplib::Request& req, httplib::Response& res) -> std::shared_ptr<Conn> {
    const std::string id = req.get_header_value("Mcp-Session-Id");
    if (id.empty()) {
      json_reply(res, 400, error_message(nullptr, code::invalid_request, "no Mcp-Session-Id: send initialize first"));
      return nullptr;
    }
    std::lock_guard lock(conns_mu);
    const auto it = conns.find(id);
    if (it == conns.end()) {
      json_reply(res, 404, error_message(nullptr, code::invalid_request, "no such session (ended?)"));
      return nullptr;
    }
    return it->second;
  };

  svr.Post(kPath, [&](const httplib::Request& req, httplib::Response& res) {
    if (!admitted(req, res)) return;
    Message m = parse_message(req.body, opt.max_message);
    if (const auto* bad = std::get_if<Invalid>(&m)) return json_reply(res, 400, error_message(bad->id, bad->code, bad->message));
    std::shared_ptr<Conn> conn;
    const auto* request = std::get_if<Request>(&m);
    const auto* note = std::get_if<Notification>(&m);
    const bool modern = (request && (request->method == "server/discover" || is_modern(request->params))) ||
                        (note && is_modern(note->params));
    const bool modern_header = req.get_header_value("MCP-Protocol-Version") == kModernVersion;
    if (modern_header && !modern)
      return json_reply(res, 400, error_message(request ? request->id : Id(), code::invalid_params,
                                                std::string("MCP-Protocol-Version is ") + kModernVersion +
                                                    " but the message has no 2026-07-28 _meta envelope"));
    if (modern) {
      if (!request) {  // over HTTP a modern client cancels by closing the call's stream
        res.status = 202;
        return;
      }
      Request own = *request;
      own.id = "h" + std::to_string(++modern_seq);
      const Id theirs = request->id;
      auto stream = modern_conn->open(own.id);
      modern_conn->server().handle(own);
      return answer(res, modern_conn, stream, own.id, theirs, own.method == "tools/call");
    }
    if (request && request->method == "initialize") {
      const std::string id = new_run_id();
      conn = std::make_shared<Conn>(executor, opt, id);
      std::lock_guard lock(conns_mu);
      conns[id] = conn;
      res.set_header("Mcp-Session-Id", id);
    } else if (!(conn = conn_of(req, res))) {
      return;
    }
    if (!request) {  // a notification or a response to our question
      conn->server().handle(m);
      res.status = 202;
      return;
    }
    const Id id = request->id;
    auto stream = conn->open(id);
    conn->server().handle(m);
    answer(res, conn, stream, id, id, request->method == "tools/call");
  });
  svr.Delete(kPath, [&](const httplib::Request& req, httplib::Response& res) {
    if (!admitted(req, res)) return;
    std::shared_ptr<Conn> conn = conn_of(req, res);
    if (!conn) return;
    {
      std::lock_guard lock(conns_mu);
      conns.erase(req.get_header_value("Mcp-Session-Id"));
    }
    conn->server().shutdown();
    res.status = 204;
  });
  svr.Get(kPath, [&](const httplib::Request& req, httplib::Response& res) {
    if (!admitted(req, res)) return;
    res.status = 405;  // no stream of server-initiated messages: they all belong to a request
    res.set_header("Allow", "POST, DELETE");
  });

  int port = http.port;
  if (port == 0) port = svr.bind_to_any_port(http.host);
  else if (!svr.bind_to_port(http.host, port)) port = -1;
  if (port < 0) throw Error("cannot listen on " + http.host + ":" + std::to_string(http.port), "is the port in use?");
  std::cerr << "sandboxrun mcp: listening on http://" << http.host << ":" << port << kPath << std::endl;

  // SIGINT, SIGTERM, SIGHUP stop the server: blocked in every thread (see mcp.hpp), taken here.
  // The runs leave them alone (ExecutorOptions::stop_signals = false), so no run's monitor
  // takes one meant for the server.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread stopper([&svr, set] {
    int sig = 0;
    ::sigwait(&set, &sig);
    svr.stop();
  });
  // Abandoned MCP sessions: looked for once a minute.
  std::mutex reap_mu;
  std::condition_variable reap_cv;
  bool done = false;
  std::thread reaper([&] {
    std::unique_lock lock(reap_mu);
    while (!reap_cv.wait_for(lock, std::chrono::minutes(1), [&] { return done; })) {
      std::vector<std::shared_ptr<Conn>> idle;
      {
        std::lock_guard conns_lock(conns_mu);
        for (auto it = conns.begin(); it != conns.end();) {
          if (it->second->idle_for(kIdleSession)) {
            idle.push_back(it->second);
            it = conns.erase(it);
          } else {
            ++it;
          }
        }
      }
      for (auto& c : idle) c->server().shutdown();
    }
  });
  svr.listen_after_bind();
  ::pthread_kill(stopper.native_handle(), SIGTERM);  // wakes it when the server stopped another way
  stopper.join();
  {
    std::lock_guard lock(reap_mu);
    done = true;
  }
  reap_cv.notify_all();
  reaper.join();
  std::lock_guard lock(conns_mu);
  for (auto& [id, conn] : conns) conn->server().shutdown();
  conns.clear();
  modern_conn->server().shutdown();
  return 0;
}

}  // namespace sandboxrun::mcp
