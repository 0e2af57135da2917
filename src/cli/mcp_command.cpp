// `sandboxrun mcp`: serves the Model Context Protocol to one client over stdio (an MCP host
// starts it: {"command": "sandboxrun", "args": ["mcp", "--trust", "untrusted"]}), or with --http
// to clients over Streamable HTTP, which the sandboxrun-mcp-http helper does (it links the HTTP
// library; this binary does not).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/install_paths.hpp"
#include "sandboxrun/mcp.hpp"

namespace sandboxrun::cli {

namespace {

// The helper beside this binary (the build tree), else in PREFIX/libexec/sandboxrun.
std::filesystem::path http_helper() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path() / "sandboxrun-mcp-http")) return self.parent_path() / "sandboxrun-mcp-http";
  return self.parent_path().parent_path() / "libexec" / "sandboxrun" / "sandboxrun-mcp-http";
}

}  // namespace

int mcp_command(const std::vector<std::string>& argv, const std::string& version, HttpServe http_serve) {
  std::optional<std::string> trust, config, audit_log, listen, token_file;
  std::vector<std::string> origins;
  mcp::Options opt;
  opt.version = version;
  CLI::App app{"Serve the Model Context Protocol: tools that run and assess Python in the sandbox (stdio, or "
               "Streamable HTTP with --http)",
               "sandboxrun mcp"};
  app.add_option("--trust", trust, "trust level of every run and session (default from config); the model "
                                   "cannot change it")
      ->check(CLI::IsMember({"untrusted", "unknown", "trusted"}));
  app.add_option("--config", config, "sandbox.yaml, or the directory holding it");
  app.add_option("--audit-log", audit_log, "audit log file (overrides config)");
  app.add_option("--caller", opt.caller, "who the code runs for (audited, with the client's name as a label)");
  app.add_option("--image", opt.image, "default image of run_python and session_start");
  app.add_option("--max-concurrent", opt.max_concurrent, "tool calls running at once per client; the rest queue")
      ->check(CLI::Range(size_t{1}, size_t{64}));
  app.add_option("--http", listen, "serve Streamable HTTP on HOST:PORT (e.g. 127.0.0.1:8765; port 0: any)");
  app.add_option("--token-file", token_file, "with --http: clients must send this token (Authorization: Bearer); "
                                             "required to listen beyond loopback");
  app.add_option("--allow-origin", origins, "with --http: an Origin allowed besides local pages (repeatable)")
      ->allow_extra_args(false);
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  if (trust) opt.trust = parse_trust(*trust);
  mcp::HttpOptions http;
  if (listen) {
    const auto colon = listen->rfind(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(*listen);
      http.host = listen->substr(0, colon);
      if (http.host.size() > 2 && http.host.front() == '[' && http.host.back() == ']')
        http.host = http.host.substr(1, http.host.size() - 2);
      size_t used = 0;
      http.port = std::stoi(listen->substr(colon + 1), &used);
      if (used != listen->size() - colon - 1 || http.port < 0 || http.port > 65535 || http.host.empty())
        throw std::invalid_argument(*listen);
    } catch (const std::logic_error&) {
      log::error("--http {}: expected HOST:PORT, such as 127.0.0.1:8765", *listen);
      return exit_code::usage;
    }
    if (!http_serve) {  // this binary has no HTTP server: the helper does it, with the same arguments
      const std::string helper = http_helper().string();
      std::vector<char*> args{const_cast<char*>(helper.c_str())};
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(helper.c_str(), args.data());
      log::error("cannot run {}: {} (it serves --http; is the installation complete?)", helper, std::strerror(errno));
      return exit_code::setup_failed;
    }
    if (token_file) {
      std::ifstream in(*token_file);
      std::string token((std::istreambuf_iterator<char>(in)), {});
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
      if (!in.good() && token.empty()) {
        log::error("--token-file {}: cannot read a token from it", *token_file);
        return exit_code::usage;
      }
      http.token = token;
    }
    http.allowed_origins = origins;
    // Before any thread: the HTTP server's stop thread takes these signals, no other thread.
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  } else if (token_file || !origins.empty()) {
    log::error("--token-file and --allow-origin go with --http");
    return exit_code::usage;
  }
  try {
    ExecutorOptions eo;
    if (config) eo.config = *config;
    if (audit_log) eo.audit_log = *audit_log;
    eo.warm = true;
    // Over HTTP the server's stop thread takes them and withdraws every run (http.cpp); a run's
    // monitor reading them from its signalfd would stop only that run and keep the server up.
    eo.stop_signals = !listen;
    eo.stdout_is_protocol = !listen;
    Executor executor = Executor::open(eo);
    if (listen) return http_serve(executor, opt, http);
    return mcp::serve_stdio(executor, opt, STDIN_FILENO, STDOUT_FILENO);
  } catch (const Error& e) {
    log::error("{}", e.describe());
    return e.kind() == ErrorKind::usage ? exit_code::usage : exit_code::setup_failed;
  }
}

}  // namespace sandboxrun::cli
