// Helpers shared by the audit log's unit tests (audit_log_test.cpp, audit_writer_view_test.cpp,
// cli_audit_test.cpp).
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "sandboxrun/audit.hpp"
#include "sandboxrun/audit_verify.hpp"

namespace audit_test {

namespace fs = std::filesystem;

inline std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

inline void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream out(p, std::ios::trunc | std::ios::binary);
  for (const auto& l : lines) out << l << "\n";
}

inline sandboxrun::AuditConfig test_config() {
  sandboxrun::AuditConfig cfg;
  cfg.sync = sandboxrun::AuditSync::none;
  cfg.checkpoint_every = 4;
  cfg.rotate_max_bytes = 0;
  return cfg;
}

// Writes `runs` runs of three events each (assessment, run_start, run_end).
inline void write_runs(sandboxrun::AuditLog& log, int runs, int first = 0) {
  for (int i = first; i < first + runs; ++i) {
    std::string id = "run-" + std::to_string(i);
    sandboxrun::CodeRef code{"job.py", std::string(64, 'a'), 10};
    log.append("assessment", id, {{"level", "LOW"}, {"score", i}, {"code", code}});
    log.append("run_start", id, {{"trust_used", "untrusted"}, {"code", code}}, true);
    log.append("run_end", id, {{"status", "exited"}, {"exit_code", 0}, {"code", code}});
  }
}

inline sandboxrun::AuditVerifyResult verify(const fs::path& log, std::optional<std::string> key = std::nullopt) {
  sandboxrun::AuditVerifyOptions opt;
  opt.log = log;
  opt.anchor = fs::path(log.string() + ".anchor");
  opt.key = std::move(key);
  return sandboxrun::verify_audit_log(opt);
}

inline std::string kind(const sandboxrun::AuditVerifyResult& r) {
  return r.damage ? sandboxrun::to_string(r.damage->kind) : "intact";
}

}  // namespace audit_test
