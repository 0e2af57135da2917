// `sandboxrun session start|run|put|get|files|ls|stop`: sessions that outlive one command,
// without a central daemon. `start` forks a holder process that keeps the session and serves it
// on a unix socket (sandboxrun/session_holder.hpp); the other subcommands are its clients.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli.hpp"
#include "log.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/session_holder.hpp"
#include "sandboxrun/session_limits.hpp"
#include "sandboxrun/size.hpp"
#include "session_cli.hpp"

namespace sandboxrun::cli {

namespace {

namespace holder = sandboxrun::holder;
using nlohmann::json;

std::string dumped(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The holder: a new process session, no terminal, signals left to the session's monitor (which
// kills the sandbox on SIGTERM/SIGINT/SIGHUP, after which the holder ends). Tells the waiting
// parent on `ready_fd` "ok" (and the info) or what failed.
[[noreturn]] void become_holder(const SessionOptions& opt, SessionSetup setup, int ready_fd) {
  ::setsid();
  if (const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
    // Nothing of the caller's stays open: a caller reading our stdout to its end must not wait
    // for the session to end.
    for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
    ::close(null);
  }
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&set, sig);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);  // before any thread: every thread inherits it
  auto tell = [ready_fd](const std::string& what) {
    write_all(ready_fd, what.data(), what.size());
    ::close(ready_fd);
  };
  try {
    Executor executor = Executor::open(setup.executor);
    load_session_inputs(opt, executor, setup.request);
    // Each holder has an Executor of its own: sessions.max and max_per_caller count the
    // sessions in the directory (a start racing another may pass both; the limits are for
    // resources, not security).
    const auto open = holder::list_sessions();
    const auto mine = std::count_if(open.begin(), open.end(), [&](const holder::SessionInfo& i) {
      return i.caller == setup.request.caller;
    });
    check_session_limits(executor.config(), open.size(), static_cast<size_t>(mine),
                         setup.request.caller.value_or(""), "stop one (`sandboxrun session ls`)");
    Session session = executor.open_session(setup.request);
    holder::SessionInfo info{.session_id = session.id(), .pid = ::getpid(), .uid = ::geteuid(),
                             .trust = setup.request.trust ? to_string(*setup.request.trust)
                                                          : to_string(executor.config().default_trust),
                             .image = setup.request.image, .caller = setup.request.caller,
                             .labels = setup.request.labels, .started_at = utc_now(), .cells = 0, .alive = true};
    const json shown = info;
    holder::serve(session, info, [&] { tell("ok\n" + dumped(shown)); });
    ::_exit(0);
  } catch (const Error& e) {
    tell(std::string("error\n") + to_string(e.kind()) + "\n" + e.describe());
  } catch (const std::exception& e) {
    tell(std::string("error\nother\n") + e.what());
  }
  ::_exit(1);
}

int start(const std::vector<std::string>& argv) {
  SessionOptions opt;
  bool as_json = false;
  CLI::App app{"Start a session kept by a holder process; prints its id", "sandboxrun session start"};
  add_session_options(app, opt);
  app.add_flag("--json", as_json, "print the session as a JSON object ({session_id, ...})");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  auto setup = session_setup(opt);
  if (!setup) return exit_code::usage;
  try {
    holder::sessions_dir();  // made (or refused) here, where the error can be shown
  } catch (const Error& e) {
    log::error("{}", e.describe());
    return exit_code::setup_failed;
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    log::error("cannot make a pipe: {}", std::strerror(errno));
    return exit_code::setup_failed;
  }
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid < 0) {
    log::error("cannot start the session's holder: {}", std::strerror(errno));
    return exit_code::setup_failed;
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    become_holder(opt, *setup, pipefd[1]);
  }
  ::close(pipefd[1]);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    said.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  if (said.rfind("ok\n", 0) == 0) {
    const json info = json::parse(said.substr(3));
    if (as_json) std::cout << dumped(info) << "\n";
    else {
      std::cerr << "session " << info.at("session_id").get<std::string>() << " started (holder pid "
                << info.at("pid") << "); `sandboxrun session stop ID` ends it\n";
      std::cout << info.at("session_id").get<std::string>() << "\n";
    }
    return 0;
  }
  const size_t nl = said.find('\n', 6);
  log::error("cannot start the session: {}", said.empty() ? std::string("the holder ended without a word")
                                                          : said.substr(nl == std::string::npos ? 0 : nl + 1));
  return exit_code::setup_failed;
}

// Reads FILE (or stdin for "-"): nullopt after saying why.
std::optional<std::string> read_source(const std::string& file) {
  if (file == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    log::error("cannot read {}: {}", file, std::strerror(errno));
    return std::nullopt;
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int failed(const Error& e) {
  log::error("{}", e.describe());
  return 1;
}

int run(const std::vector<std::string>& argv) {
  std::string id, file = "-";
  std::optional<std::string> stdin_file, override_reason;
  std::optional<double> timeout;
  bool as_json = false;
  CLI::App app{"Run a file (or stdin) as the next cell of a session", "sandboxrun session run"};
  app.add_option("ID", id, "the session's id (or a unique prefix)")->required();
  app.add_option("FILE", file, "the cell's code; - or nothing: stdin");
  app.add_option("--stdin", stdin_file, "a file the cell reads on its stdin");
  app.add_option("--timeout", timeout, "seconds for this cell (may only tighten)")->check(positive_number("seconds"));
  app.add_option("--override-reason", override_reason, "run a BLOCKED verdict anyway (audited; policy decides)");
  app.add_flag("--json", as_json, "print the cell as one JSON object");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  const auto code = read_source(file);
  if (!code) return exit_code::file_missing;
  std::optional<std::string> input;
  if (stdin_file && !(input = read_source(*stdin_file))) return exit_code::file_missing;
  try {
    const json reply = holder::Client::connect(id).run(
        {.code = *code, .stdin_data = input.value_or(""), .timeout_s = timeout, .override_reason = override_reason});
    const auto status = reply.at("status").get<std::string>();
    CellStatus s = CellStatus::lost;
    for (auto c : {CellStatus::ok, CellStatus::error, CellStatus::timeout, CellStatus::blocked, CellStatus::lost})
      if (status == to_string(c)) s = c;
    if (as_json) std::cout << dumped(reply) << "\n";
    else print_cell(s, reply.get<CellOutput>(), reply.value("message", ""));
    return cell_exit_code(s);
  } catch (const Error& e) {
    return failed(e);
  }
}

int put(const std::vector<std::string>& argv) {
  std::string id, local;
  std::optional<std::string> remote, override_reason;
  bool as_json = false;
  CLI::App app{"Copy a file into a session's /work (a .py file is assessed with the session's code)",
               "sandboxrun session put"};
  app.add_option("ID", id, "the session's id (or a unique prefix)")->required();
  app.add_option("FILE", local, "the file to copy; - for stdin")->required();
  app.add_option("PATH", remote, "where under /work (default: the file's name)");
  app.add_option("--override-reason", override_reason, "put a BLOCKED .py file anyway (audited; policy decides)");
  app.add_flag("--json", as_json, "print what was done as JSON");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  if (!remote && local == "-") {
    log::error("session put ID - needs a PATH under /work");
    return exit_code::usage;
  }
  const auto data = read_source(local);
  if (!data) return exit_code::file_missing;
  try {
    const json reply = holder::Client::connect(id).put(
        remote.value_or(std::filesystem::path(local).filename().string()), *data, override_reason);
    if (as_json) std::cout << dumped(reply) << "\n";
    const bool refused = reply.value("refused", false);
    if (refused && !as_json) log::error("{}", reply.value("message", "refused"));
    return refused ? exit_code::blocked : 0;
  } catch (const Error& e) {
    return failed(e);
  }
}

int get(const std::vector<std::string>& argv) {
  std::string id, remote;
  std::optional<std::string> local;
  CLI::App app{"Copy a file out of a session's /work", "sandboxrun session get"};
  app.add_option("ID", id, "the session's id (or a unique prefix)")->required();
  app.add_option("PATH", remote, "the file under /work")->required();
  app.add_option("DEST", local, "where to write it (default: its name here; - for stdout)");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  try {
    const std::string data = holder::Client::connect(id).get(remote);
    const std::string dest = local.value_or(std::filesystem::path(remote).filename().string());
    if (dest == "-") {
      std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
      std::cout.flush();
      return 0;
    }
    // Not through a symlink planted where DEST is (the name came from the session, too).
    UniqueFd fd(::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd || !write_all(fd.get(), data.data(), data.size())) {
      log::error("cannot write {}: {}", dest, std::strerror(errno));
      return 1;
    }
    return 0;
  } catch (const Error& e) {
    return failed(e);
  }
}

int files(const std::vector<std::string>& argv) {
  std::string id, dir;
  bool as_json = false;
  CLI::App app{"List the files under a session's /work", "sandboxrun session files"};
  app.add_option("ID", id, "the session's id (or a unique prefix)")->required();
  app.add_option("DIR", dir, "a directory under /work (default: all of it)");
  app.add_flag("--json", as_json, "print the list as JSON");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  try {
    const auto list = holder::Client::connect(id).files(dir);
    if (as_json) std::cout << dumped(json(list)) << "\n";
    else
      for (const auto& f : list) std::cout << f.type << "\t" << f.size << "\t" << f.path << "\n";
    return 0;
  } catch (const Error& e) {
    return failed(e);
  }
}

int ls(const std::vector<std::string>& argv) {
  bool as_json = false;
  CLI::App app{"List this user's sessions (root: all of /run/sandboxrun/sessions)", "sandboxrun session ls"};
  app.add_flag("--json", as_json, "print the list as JSON");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  try {
    const auto list = holder::list_sessions();
    if (as_json) {
      std::cout << dumped(json(list)) << "\n";
      return 0;
    }
    if (!list.empty())
      std::cout << "SESSION                           TRUST      CELLS  MEMORY     STARTED               CALLER\n";
    for (const auto& s : list) {
      std::string trust = s.trust;
      trust.resize(10, ' ');
      std::string cells = std::to_string(s.cells);
      cells.resize(6, ' ');
      // the sandbox's cgroup and the holder together: what one more idle session costs
      std::string memory = s.memory_bytes ? format_size(*s.memory_bytes + s.holder_pss_bytes) : "-";
      memory.resize(10, ' ');
      std::cout << s.session_id << "  " << trust << " " << cells << " " << memory << " " << s.started_at << "  "
                << s.caller.value_or("-") << "\n";
    }
    return 0;
  } catch (const Error& e) {
    return failed(e);
  }
}

int stop(const std::vector<std::string>& argv) {
  std::string id;
  bool as_json = false;
  CLI::App app{"End a session: its interpreter, its sandbox and its holder", "sandboxrun session stop"};
  app.add_option("ID", id, "the session's id (or a unique prefix)")->required();
  app.add_flag("--json", as_json, "print the session's sandbox result as JSON");
  if (auto rc = parse_or_exit(app, argv)) return *rc;
  try {
    const json r = holder::Client::connect(id).stop();
    if (as_json) std::cout << dumped(r) << "\n";
    return 0;
  } catch (const Error& e) {
    return failed(e);
  }
}

}  // namespace

int session_command(const std::vector<std::string>& args) {
  static constexpr struct {
    const char* name;
    int (*fn)(const std::vector<std::string>&);
  } kSub[] = {{"start", start}, {"run", run}, {"put", put}, {"get", get}, {"files", files}, {"ls", ls}, {"stop", stop}};
  if (!args.empty())
    for (const auto& s : kSub)
      if (args[0] == s.name) return s.fn(std::vector<std::string>(args.begin() + 1, args.end()));
  const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
  (help ? std::cout : std::cerr)
      << "usage: sandboxrun session start [options]        start a session; prints its id\n"
         "       sandboxrun session run ID [FILE|-] [--json] run a cell (exit as a run: 0, 1, 124, 125, 126)\n"
         "       sandboxrun session put ID FILE [PATH]       copy a file into its /work\n"
         "       sandboxrun session get ID PATH [DEST|-]     copy a file out of its /work\n"
         "       sandboxrun session files ID [DIR]           list its /work\n"
         "       sandboxrun session ls                       list the sessions\n"
         "       sandboxrun session stop ID                  end it\n"
         "(`sandboxrun session SUBCOMMAND --help` for each; docs/sessions.md)\n";
  if (help) return 0;
  if (!args.empty()) log::error("unknown session subcommand '{}'", args[0]);
  return exit_code::usage;
}

}  // namespace sandboxrun::cli
