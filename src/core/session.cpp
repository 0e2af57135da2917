// Sessions (docs/sessions.md): a run whose program is the session driver, kept going on a thread
// of the session's, and cells sent to it one at a time, each assessed in the context of the cells
// before it and recorded before it runs.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "common/base64.hpp"
#include "common/sha256.hpp"
#include "session/driver_source.hpp"
#include "session_impl.hpp"

namespace sandboxrun {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long an interrupted cell gets to answer before the session is killed, and a closed
// session's interpreter to end on its own.
constexpr milliseconds kInterruptGrace{2000};
constexpr milliseconds kCloseGrace{3000};
constexpr milliseconds kStartTimeout{60000};

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
void pidfd_signal(int pidfd, int sig) { ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0); }

// Seconds as people write them: 1, 0.5, 30.
std::string seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

// What the audit keeps of a cell's output: sizes and digests of what the host received (the
// bytes themselves would put a cell's data, perhaps secrets it printed, into the log).
std::vector<audit::CellOutputItem> output_manifest(const CellResult& cr) {
  std::vector<audit::CellOutputItem> items;
  const auto text = [&](std::string kind, const std::string& data, bool truncated) {
    if (data.empty() && !truncated) return;
    items.push_back({.kind = std::move(kind), .index = std::nullopt, .mime = std::nullopt, .size = data.size(),
                     .sha256 = sha256_hex(data), .truncated = truncated ? std::optional(true) : std::nullopt});
  };
  const auto bundle = [&](const char* kind, std::optional<uint64_t> index, const MimeBundle& b) {
    for (const auto& [mime, data] : b) {
      // The protocol accepted these as base64 already; a failed decode cannot happen, but keep
      // the text's measure rather than none.
      const auto raw = session::base64_type(mime) ? base64_decode(data) : std::nullopt;
      const std::string& bytes = raw ? *raw : data;
      items.push_back({.kind = kind, .index = index, .mime = mime, .size = bytes.size(),
                       .sha256 = sha256_hex(bytes), .truncated = std::nullopt});
    }
  };
  if (cr.status == CellStatus::lost) return items;
  text("stdout", cr.output.stdout_data, cr.output.stdout_truncated);
  text("stderr", cr.output.stderr_data, cr.output.stderr_truncated);
  if (cr.output.result) bundle("result", std::nullopt, *cr.output.result);
  for (size_t i = 0; i < cr.output.display.size(); ++i) bundle("display", i, cr.output.display[i]);
  return items;
}

// pid 1's children (the driver, and orphans of the cells): what an interrupt goes to.
std::vector<pid_t> children_of(pid_t pid1) {
  std::ifstream f("/proc/" + std::to_string(pid1) + "/task/" + std::to_string(pid1) + "/children");
  std::vector<pid_t> out;
  for (pid_t p; f >> p;) out.push_back(p);
  return out;
}

}  // namespace

const char* to_string(CellStatus s) {
  switch (s) {
    case CellStatus::ok: return "ok";
    case CellStatus::error: return "error";
    case CellStatus::timeout: return "timeout";
    case CellStatus::blocked: return "blocked";
    case CellStatus::lost: return "lost";
  }
  return "lost";
}

nlohmann::json CellResult::to_json() const {
  nlohmann::json j = output;
  j["status"] = sandboxrun::to_string(status);
  j["assessment"] = assessment.to_json();
  if (!message.empty()) j["message"] = message;
  j["duration_ms"] = duration.count();
  j["resources"] = resources ? nlohmann::json(*resources) : nlohmann::json();
  j["audit_seq"] = audit_seq ? nlohmann::json(*audit_seq) : nlohmann::json();
  return j;
}

void Session::Impl::kill_sandbox() {
  if (pid1_fd) pidfd_signal(pid1_fd.get(), SIGKILL);
}

void Session::Impl::interrupt() {
  for (pid_t p : children_of(pid1))
    if (UniqueFd fd(pidfd_open(p)); fd) pidfd_signal(fd.get(), SIGINT);
}

void Session::Impl::lose(const std::string& why) {
  lost = true;
  lost_why = why;
  kill_sandbox();
  from_driver.reset();  // a monitor blocked writing to us gets EPIPE instead
  to_driver.reset();
}

std::optional<std::string> Session::Impl::await_frame(Clock::time_point deadline, size_t max_frame) {
  frames.set_max(max_frame);
  for (;;) {
    if (auto body = frames.next()) return body;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{from_driver.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR)
      throw_errno("cannot wait for the session's interpreter");
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[65536];
    const ssize_t n = ::read(from_driver.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("the session's interpreter ended").as(ErrorKind::host);
    frames.feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

std::string Session::Impl::exchange(const std::string& frame, size_t max_frame) {
  check_alive();
  try {
    if (!write_all(to_driver.get(), frame.data(), frame.size()))
      throw Error("the session's interpreter no longer reads its requests").as(ErrorKind::host);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(cell_timeout_s));
    if (auto body = await_frame(deadline, max_frame)) return std::move(*body);
    throw Error("the session's interpreter did not answer within " + seconds(cell_timeout_s) + " s")
        .as(ErrorKind::host);
  } catch (const Error& e) {
    const std::string why = driver_stderr();
    lose(e.describe() + (why.empty() ? "" : " (" + why.substr(0, 1000) + ")"));
    throw Error("the session was lost: " + lost_why, "open a new session").as(ErrorKind::host);
  }
}

std::string Session::Impl::ended_message() const {
  return idled ? "the session was closed after " + seconds(idle_timeout_s) +
                     " s without a cell (sessions.idle_timeout); open a new one"
               : "the session has ended" + (lost ? ": " + lost_why : std::string()) + "; open a new one";
}

void Session::Impl::check_alive() const {
  if (ended || lost || idled) throw Error(ended_message()).as(ErrorKind::host);
}

Session::Impl::Verdict Session::Impl::judge(std::string_view code, const std::optional<std::string>& override_reason) const {
  Verdict v{ex->assess_text(code_so_far + std::string(code)), {}, {}};
  const Assessment& a = v.assessment;
  v.decision = decide(a.level, trust, override_reason, ex->security, ProcessIdentity::of_this_process());
  const Decision& d = v.decision;
  if (d.override_refused) v.refusal = "override refused: " + *d.override_refused;
  else if (d.refused()) v.refusal = "the session's code so far rates BLOCKED";
  else if (*d.used != trust)
    v.refusal = "the session's code so far rates " + std::string(to_string(a.level)) + ", which allows at most trust " +
                to_string(*d.used) + "; this session runs at " + to_string(trust) + " (open a session at " +
                to_string(*d.used) + ")";
  return v;
}

std::string Session::Impl::driver_stderr() {
  std::string text;
  char buf[4096];
  for (ssize_t n; stderr_read && text.size() < 4096 && (n = ::read(stderr_read.get(), buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  return text;
}

Session::Impl::Busy::Busy(Impl& si) : si_(si) {
  std::lock_guard idle(si_.idle_mu);
  si_.busy = true;
}

Session::Impl::Busy::~Busy() {
  std::lock_guard idle(si_.idle_mu);
  si_.busy = false;
  si_.last_active = Clock::now();
  si_.idle_cv.notify_all();
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() {
  if (impl_) close();
}

const std::string& Session::id() const { return impl_->who.run_id; }

std::optional<CgroupUsage> Session::usage() const { return impl_->last_usage(); }

bool Session::alive() const {
  std::lock_guard lock(impl_->mu);
  return !impl_->ended && !impl_->lost && !impl_->idled;
}

Session Executor::open_session(const SessionRequest& sr) const {
  const Impl& im = *impl_;
  auto s = std::make_unique<Session::Impl>();
  Session::Impl& si = *s;
  si.ex = &im;
  si.slot = Session::Impl::Slot(im, sr.caller.value_or(""));
  si.trust = sr.trust.value_or(im.cfg.default_trust);
  const double lifetime_s = std::min(sr.lifetime_s.value_or(im.cfg.sessions.lifetime_s), im.cfg.sessions.lifetime_s);
  si.idle_timeout_s = std::min(sr.idle_timeout_s.value_or(im.cfg.sessions.idle_timeout_s), im.cfg.sessions.idle_timeout_s);
  // The level's limits, as the run will resolve them: a cell's output and its timeout.
  const SandboxSpec spec = resolve_spec(im.cfg, si.trust, sr.limits, im.host);
  si.cell_timeout_s = spec.limits.timeout_s;
  si.limits.output_bytes = spec.limits.output_bytes;
  si.input_limit = im.cfg.input_limit;
  si.output_bytes = spec.limits.output_total_bytes;
  si.output_files = spec.limits.output_files;
  for (const auto& f : sr.inputs)
    if (f.path.ends_with(".py")) si.code_so_far += f.data + "\n";
  si.frames = session::FrameReader(si.limits.max_frame());

  Pipe in = make_pipe(), out = make_pipe(), err = make_pipe();
  // The driver's own stderr (not the cells'): read only to say why a session was lost, so it
  // must never block the monitor that writes it.
  ::fcntl(err.write.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err.read.get(), F_SETFL, O_NONBLOCK);
  si.to_driver = std::move(in.write);
  si.stdin_read = std::move(in.read);
  si.from_driver = std::move(out.read);
  si.stdout_write = std::move(out.write);
  si.stderr_read = std::move(err.read);
  si.stderr_write = std::move(err.write);

  RunRequest req;
  req.code = std::string(session::kDriverSource);
  req.name = "session.py";
  req.trust = si.trust;
  req.limits = sr.limits;
  req.image = sr.image;
  req.env = sr.env;
  req.inputs = sr.inputs;
  req.requirements = sr.requirements;
  req.requirements_origin = sr.requirements_origin;
  req.env["SANDBOXRUN_SESSION_OUTPUT_LIMIT"] = std::to_string(si.limits.output_bytes);
  req.env["SANDBOXRUN_SESSION_DISPLAY_LIMIT"] = std::to_string(si.limits.display_bytes);
  req.env["SANDBOXRUN_SESSION_DISPLAY_ITEMS"] = std::to_string(si.limits.display_items);
  if (sr.svg_figures) req.env["SANDBOXRUN_SESSION_SVG_FIGURES"] = "1";
  req.caller = sr.caller;
  req.labels = sr.labels;
  req.run_id = new_run_id();
  req.capture = false;
  req.stdin_fd = si.stdin_read.get();
  req.stdout_fd = si.stdout_write.get();
  req.stderr_fd = si.stderr_write.get();
  if (im.cfg.monitoring)
    req.on_sample = [&si](const CgroupUsage& u, milliseconds) {
      std::lock_guard lock(si.usage_mu);
      si.usage = u;
    };
  si.who.run_id = *req.run_id;
  si.who.caller = sr.caller;
  si.who.labels = sr.labels;

  Impl::SessionPlan plan{.lifetime_s = lifetime_s, .on_started = [&si](pid_t pid) {
                           std::lock_guard lock(si.mu);
                           si.pid1 = pid;
                           si.pid1_fd.reset(pidfd_open(pid));
                           si.watchdog_pid1.reset(pidfd_open(pid));
                           si.started = true;
                           si.started_cv.notify_all();
                         }};
  si.runner = std::thread([&si, &im, req = std::move(req), plan = std::move(plan)] {
    RunResult r = im.execute(req, &plan);
    // Only the monitor used these: closing them gives a reader waiting for a reply its EOF.
    si.stdout_write.reset();
    si.stderr_write.reset();
    si.stdin_read.reset();
    std::lock_guard lock(si.mu);
    si.result = std::move(r);
    si.ended = true;
    si.pid1_fd.reset();
    si.started_cv.notify_all();
  });
  std::unique_lock lock(si.mu);
  si.started_cv.wait(lock, [&] { return si.started || si.ended; });
  if (!si.started) {
    lock.unlock();
    si.runner.join();
    throw Error("cannot start the session: " + si.result.error).as(si.result.error_kind);
  }
  lock.unlock();
  // The driver's empty reply to cell 0: it runs (so run_start is in the log) and reads cells.
  Session session(std::move(s));
  try {
    auto hello = si.await_frame(Clock::now() + kStartTimeout, si.limits.max_frame());
    if (hello) session::parse_reply(*hello, 0, si.limits);
    else
      throw Error("the session's interpreter did not start within " + std::to_string(kStartTimeout.count() / 1000) +
                  " s").as(ErrorKind::host);
  } catch (const Error& e) {
    const std::string why = si.driver_stderr();
    {
      std::lock_guard relock(si.mu);
      si.lose(e.describe());
    }
    session.close();
    throw Error("cannot start the session: " + e.describe() + (why.empty() ? "" : " (" + why.substr(0, 1000) + ")"))
        .as(ErrorKind::host);
  }
  si.watchdog = std::thread([&si] {
    std::unique_lock idle(si.idle_mu);
    while (!si.stopping) {
      const auto until = si.last_active + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(si.idle_timeout_s));
      if (!si.busy && Clock::now() >= until) {
        si.idled = true;
        pidfd_signal(si.watchdog_pid1.get(), SIGKILL);
        return;
      }
      si.idle_cv.wait_until(idle, si.busy ? Clock::now() + std::chrono::hours(1) : until);
    }
  });
  return session;
}

CellResult Session::run(const CellRequest& cell) {
  Impl& si = *impl_;
  std::lock_guard lock(si.mu);
  CellResult cr;
  if (si.ended || si.lost || si.idled) {
    cr.message = si.ended_message();
    return cr;
  }
  const Impl::Busy busy(si);
  const uint64_t n = ++si.cells;
  const std::string name = "<cell " + std::to_string(n) + ">";
  Impl::Verdict v = si.judge(cell.code, cell.override_reason);
  cr.assessment = std::move(v.assessment);
  const Assessment& a = cr.assessment;
  const CodeRef code = si.ex->store_code(cell.code, name);
  audit::CellEvent rec{.run = {.code = code}, .cell = n, .level = to_string(a.level), .score = a.score,
                       .findings = a.findings, .refused = false,
                       .override_reason = v.decision.overridden ? cell.override_reason : std::nullopt};
  if (!v.refusal.empty()) {
    cr.status = CellStatus::blocked;
    cr.message = v.refusal + "; the cell did not run";
    rec.refused = true;
    cr.audit_seq = si.ex->append(rec, si.who);
    return cr;
  }
  if (cell.stdin_data.size() > si.input_limit) {
    cr.status = CellStatus::blocked;
    cr.message = "the cell's stdin holds " + std::to_string(cell.stdin_data.size()) + " bytes; input_limit is " +
                 std::to_string(si.input_limit);
    rec.refused = true;
    cr.audit_seq = si.ex->append(rec, si.who);
    return cr;
  }
  si.ex->append(rec, si.who);
  {
    std::lock_guard audit_lock(si.ex->audit_mu);
    si.ex->audit->sync();  // recorded before it runs
  }

  const auto t0 = Clock::now();
  const std::optional<CgroupUsage> before = si.last_usage();
  const double timeout_s = std::min(cell.timeout_s.value_or(si.cell_timeout_s), si.cell_timeout_s);
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::optional<CellOutput> out;
  try {
    const std::string frame = session::encode_run(n, cell.code, cell.stdin_data);
    if (!write_all(si.to_driver.get(), frame.data(), frame.size()))
      throw Error("the session's interpreter no longer reads its cells").as(ErrorKind::host);
    auto body = si.await_frame(deadline, si.limits.max_frame());
    if (!body) {
      si.interrupt();
      body = si.await_frame(Clock::now() + kInterruptGrace, si.limits.max_frame());
      if (body) {
        cr.status = CellStatus::timeout;
        cr.message = "the cell ran past its timeout (" + seconds(timeout_s) + " s) and was interrupted";
      } else {
        si.lose("the cell ran past its timeout and did not stop when interrupted; the session was killed");
      }
    }
    if (body) out = session::parse_reply(*body, n, si.limits);
  } catch (const Error& e) {
    const std::string why = si.driver_stderr();
    si.lose(e.describe() + (why.empty() ? "" : " (" + why.substr(0, 1000) + ")"));
    // The monitor's last sample comes once the sandbox has ended (without `mu`, which we hold):
    // an OOM kill is told as such, from the cgroup's count, not from anything the driver said.
    const uint64_t ooms_before = before ? before->oom_kills : 0;
    for (int i = 0; i < 40; ++i) {
      if (const auto u = si.last_usage(); u && u->oom_kills > ooms_before) {
        si.lost_why = "the interpreter was killed: out of memory (the session's memory limit; --memory, or the "
                      "trust level's mem_limit)";
        break;
      }
      std::this_thread::sleep_for(milliseconds(25));
    }
  }
  cr.duration = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
  if (const auto after = si.last_usage()) {
    cr.resources = ResourcesRecord::of(*after);
    cr.resources->cpu_ms = (after->cpu_usec - (before ? std::min(before->cpu_usec, after->cpu_usec) : 0)) / 1000;
  }
  if (out) {
    cr.output = std::move(*out);
    if (cr.status != CellStatus::timeout) cr.status = cr.output.status == "ok" ? CellStatus::ok : CellStatus::error;
    si.code_so_far += cell.code + "\n";
  } else {
    cr.status = CellStatus::lost;
    cr.message = si.lost_why;
  }
  cr.audit_seq = si.ex->append(
      audit::CellEndEvent{.run = {}, .cell = n, .status = to_string(cr.status),
                          .duration_ms = static_cast<uint64_t>(cr.duration.count()),
                          .ename = cr.output.error ? std::optional(cr.output.error->ename) : std::nullopt,
                          .resources = cr.resources, .outputs = output_manifest(cr)},
      si.who);
  return cr;
}

void Session::interrupt() {
  // pid1 is set once, before open_session returned; `mu` is held by the running cell.
  impl_->interrupt();
}

const RunResult& Session::close() {
  Impl& si = *impl_;
  {
    std::lock_guard lock(si.mu);
    si.to_driver.reset();  // EOF: the driver returns
  }
  if (si.runner.joinable()) {
    const auto until = Clock::now() + kCloseGrace;
    for (;;) {
      {
        std::lock_guard lock(si.mu);
        if (si.ended) break;
        if (Clock::now() > until) si.kill_sandbox();
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    si.runner.join();
  }
  {
    std::lock_guard idle(si.idle_mu);
    si.stopping = true;
    si.idle_cv.notify_all();
  }
  if (si.watchdog.joinable()) si.watchdog.join();
  si.slot.release();
  return si.result;
}

}  // namespace sandboxrun
