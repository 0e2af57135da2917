// Semgrep bridge: like Bandit's, a second opinion whose findings add to the score but never
// make a file BLOCKED; a missing, failing or hanging Semgrep is a note.
#include <sys/wait.h>

#include <map>

#include "sandboxrun/assess_bandit.hpp"

namespace sandboxrun::assess {

BanditResult parse_semgrep_report(std::string_view text, const SemgrepSettings& settings) {
  BanditResult r;
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    r.notes.push_back("semgrep output is not a JSON report; its findings are missing");
    return r;
  }
  std::map<std::string, int> per_check;  // check id -> score of its most severe finding
  if (auto it = doc.find("results"); it != doc.end() && it->is_array()) {
    for (const auto& res : *it) {
      if (!res.is_object()) continue;
      const std::string id = res.value("check_id", std::string("unknown"));
      int line = 0;
      if (auto s = res.find("start"); s != res.end() && s->is_object()) line = s->value("line", 0);
      std::string sev = "INFO", msg;
      if (auto e = res.find("extra"); e != res.end() && e->is_object()) {
        sev = e->value("severity", std::string("INFO"));
        msg = e->value("message", std::string());
      }
      const int score = sev == "ERROR" ? settings.score_error : sev == "WARNING" ? settings.score_warning : settings.score_info;
      int& best = per_check[id];
      best = std::max(best, score);
      r.findings.push_back(Finding{"semgrep:" + id, sev == "ERROR" ? "high" : sev == "WARNING" ? "medium" : "low", line,
                                   msg + " (semgrep)"});
    }
  }
  if (auto it = doc.find("errors"); it != doc.end() && it->is_array()) {
    for (const auto& e : *it)
      if (e.is_object()) r.notes.push_back("semgrep: " + e.value("message", std::string("error")));
  }
  for (const auto& [id, s] : per_check) r.score += s;
  return r;
}

BanditResult run_semgrep(const std::filesystem::path& file, const SemgrepSettings& settings) {
  BanditResult none;
  auto exe = find_executable(settings.command);
  if (!exe) {
    none.notes.push_back("semgrep not found ('" + settings.command + "' is not on PATH); built-in rules only");
    return none;
  }
  std::vector<std::string> argv = {exe->string(), "scan", "--json", "--quiet", "--metrics=off"};
  for (const auto& c : settings.configs) {
    argv.push_back("--config");
    argv.push_back(c);
  }
  argv.push_back(std::filesystem::absolute(file).string());
  const ToolRun run = run_tool(argv, settings.timeout);
  if (!run.exited) {
    none.notes.push_back("semgrep " + run.error + "; built-in rules only");
    return none;
  }
  // Semgrep exits 0, or 1 with --error when it found issues; anything else is a failure.
  if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) > 1) {
    none.notes.push_back("semgrep failed (" + describe_failure(run) + "); built-in rules only");
    return none;
  }
  return parse_semgrep_report(run.out, settings);
}

}  // namespace sandboxrun::assess
