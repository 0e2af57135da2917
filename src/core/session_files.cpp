// A session's /work from the host: put, get and list files through the session's driver, which
// does them inside the sandbox with the sandbox's own rights (so no host path is ever opened on
// the sandbox's behalf, and a symlink a cell planted leads nowhere outside it). What comes back is
// parsed strictly and bounded; a .py file put is assessed with the session's code, since a later
// `import` runs it.
#include <utility>

#include "common/sha256.hpp"
#include "session_impl.hpp"

namespace sandboxrun {

nlohmann::json FilePut::to_json() const {
  nlohmann::json j = {{"refused", refused}, {"file", file}};
  if (!message.empty()) j["message"] = message;
  j["assessment"] = assessment ? assessment->to_json() : nlohmann::json();
  j["audit_seq"] = audit_seq ? nlohmann::json(*audit_seq) : nlohmann::json();
  return j;
}

session::FileReply Session::Impl::file_request(session::FileOp op, const std::string& path, std::string_view data,
                                               uint64_t limit) {
  const uint64_t id = (uint64_t{1} << 32) + ++requests;
  const std::string body = exchange(session::encode_file(op, id, path, data, limit), session::max_file_frame(op, limit));
  try {
    return session::parse_file_reply(body, id, op, limit);
  } catch (const Error& e) {
    lose(e.describe());
    throw Error("the session was lost: " + lost_why, "open a new session").as(ErrorKind::host);
  }
}

FilePut Session::put_file(const std::string& path, std::string_view data,
                          const std::optional<std::string>& override_reason) {
  Impl& si = *impl_;
  session::check_work_path(path, false);
  std::lock_guard lock(si.mu);
  si.check_alive();
  if (data.size() > si.input_limit)
    throw Error(path + " holds " + std::to_string(data.size()) + " bytes; input_limit in " + si.ex->cfg.file.string() +
                    " is " + std::to_string(si.input_limit),
                "put a smaller file, or raise input_limit")
        .as(ErrorKind::limits);
  const Impl::Busy busy(si);
  FilePut put;
  put.file = {.path = path, .size = data.size(), .sha256 = sha256_hex(data), .mode = 0644};
  audit::FilePutEvent rec{.run = {}, .file = put.file, .level = {}, .findings = {}, .refused = false,
                          .override_reason = {}};
  const bool python = path.ends_with(".py");
  if (python) {
    Impl::Verdict v = si.judge(data, override_reason);
    rec.run.code = si.ex->store_code(data, path);
    rec.level = to_string(v.assessment.level);
    rec.findings = v.assessment.findings;
    rec.override_reason = v.decision.overridden ? override_reason : std::nullopt;
    put.assessment = std::move(v.assessment);
    if (!v.refusal.empty()) {
      put.refused = rec.refused = true;
      put.message = v.refusal + "; " + path + " was not written";
      put.audit_seq = si.ex->append(rec, si.who);
      return put;
    }
  }
  put.audit_seq = si.ex->append(rec, si.who);
  {
    std::lock_guard audit_lock(si.ex->audit_mu);
    si.ex->audit->sync();  // recorded before the sandbox has it
  }
  const session::FileReply r = si.file_request(session::FileOp::put, path, data, 0);
  if (!r.ok) throw Error("cannot put " + path + " into the session's /work: " + r.message);
  if (python) si.code_so_far += std::string(data) + "\n";
  return put;
}

std::string Session::get_file(const std::string& path) {
  Impl& si = *impl_;
  session::check_work_path(path, false);
  std::lock_guard lock(si.mu);
  const Impl::Busy busy(si);
  session::FileReply r = si.file_request(session::FileOp::get, path, {}, si.output_bytes);
  if (!r.ok)
    throw Error("cannot get " + path + " from the session's /work: " + r.message,
                r.message.find("larger than") != std::string::npos
                    ? "files come back up to output_bytes_limit of the session's trust level"
                    : "");
  si.ex->append(audit::FileGetEvent{.run = {}, .file = {.path = path, .size = r.data.size(),
                                                         .sha256 = sha256_hex(r.data), .mode = 0}},
                si.who);
  return std::move(r.data);
}

std::vector<WorkFile> Session::list_files(const std::string& dir) {
  Impl& si = *impl_;
  session::check_work_path(dir, true);
  std::lock_guard lock(si.mu);
  const Impl::Busy busy(si);
  session::FileReply r = si.file_request(session::FileOp::ls, dir, {}, si.output_files);
  if (!r.ok) throw Error("cannot list " + (dir.empty() ? std::string("/work") : dir) + " in the session: " + r.message);
  return std::move(r.files);
}

}  // namespace sandboxrun
