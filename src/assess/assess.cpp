// assess_source / assess_file: analysis, rule matching, Bandit merge, and the score -> level
// step (BLOCKED only from critical rules, never by accumulation).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "internal.hpp"
#include "sandboxrun/assess.hpp"
#include "assess/assess_bandit.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/size.hpp"

namespace sandboxrun {

namespace {

// A built-in finding's severity is a floor (medium: at least MEDIUM, high: at least HIGH), so
// one capability decides its level on its own and capability rules can carry small scores that
// do not add up to HIGH. Second opinions (bandit:, semgrep:) count by score only.
RiskLevel level_for(const Assessment& a, const SecurityConfig& cfg) {
  RiskLevel floor = RiskLevel::low;
  for (const auto& f : a.findings) {
    if (f.severity == "critical") return RiskLevel::blocked;
    if (f.rule.find(':') != std::string::npos) continue;
    if (f.severity == "high") floor = RiskLevel::high;
    else if (f.severity == "medium" && floor < RiskLevel::medium) floor = RiskLevel::medium;
  }
  RiskLevel by_score = RiskLevel::low;
  if (a.score >= cfg.high_threshold) by_score = RiskLevel::high;
  else if (a.score >= cfg.medium_threshold) by_score = RiskLevel::medium;
  return std::max(floor, by_score);
}

// Reads at most `limit` bytes; sets `total` to the file's size.
std::string read_head(const std::filesystem::path& file, uint64_t limit, uint64_t& total) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are read.
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) throw_errno("cannot open " + file.string(), "check that the file exists and is readable");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat " + file.string());
  if (!S_ISREG(st.st_mode))
    throw Error("cannot read " + file.string(), "it is not a regular file (a directory, device or pipe)", EINVAL);
  total = static_cast<uint64_t>(st.st_size);
  std::string out;
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = ::read(fd.get(), buf, static_cast<size_t>(std::min<uint64_t>(sizeof buf, limit - out.size())));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read " + file.string());
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  total = std::max<uint64_t>(total, out.size());
  return out;
}

}  // namespace

const char* to_string(RiskLevel level) noexcept {
  switch (level) {
    case RiskLevel::low: return "LOW";
    case RiskLevel::medium: return "MEDIUM";
    case RiskLevel::high: return "HIGH";
    case RiskLevel::blocked: return "BLOCKED";
  }
  return "?";
}

std::optional<RiskLevel> parse_risk_level(std::string_view s) noexcept {
  for (auto l : {RiskLevel::low, RiskLevel::medium, RiskLevel::high, RiskLevel::blocked}) {
    std::string_view name = to_string(l);
    if (s.size() == name.size() &&
        std::equal(s.begin(), s.end(), name.begin(), [](char a, char b) { return (a & ~0x20) == b; }))
      return l;
  }
  return std::nullopt;
}

nlohmann::json Assessment::to_json() const {
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : findings)
    fs.push_back({{"rule", f.rule}, {"severity", f.severity}, {"line", f.line}, {"message", f.message}});
  return {{"level", to_string(level)}, {"score", score}, {"findings", std::move(fs)}, {"notes", notes}};
}

Assessment assess_source(std::string_view source, const SecurityConfig& config) {
  if (!config.rules) throw Error("assess_source: no assessor rules loaded", "load the configuration with load_security_config");
  Assessment a;
  assess::detail::RuleEngine engine(*config.rules, config.max_findings_per_rule);
  if (source.size() > config.max_bytes) {
    engine.on_detector(assess::Detector::truncated, 0, format_size(source.size()));
    a.notes.push_back("only the first " + format_size(config.max_bytes) + " of " + format_size(source.size()) +
                      " were assessed (limits.max_bytes)");
    source = source.substr(0, config.max_bytes);
  }
  assess::analyze(source, config.limits, engine);
  engine.finish(a.findings, a.score);
  a.level = level_for(a, config);
  return a;
}

Assessment assess_file(const std::filesystem::path& file, const SecurityConfig& config) {
  uint64_t total = 0;
  // One byte past the limit tells assess_source that the file was cut.
  std::string text = read_head(file, config.max_bytes + 1, total);
  Assessment a = assess_source(text, config);
  if (total > text.size() && !a.notes.empty()) a.notes.back() = "only the first " + format_size(config.max_bytes) +
                                                             " of " + format_size(total) + " were assessed (limits.max_bytes)";
  std::vector<assess::BanditResult> opinions;
  if (config.bandit.enabled) opinions.push_back(assess::run_bandit(file, config.bandit));
  if (config.semgrep.enabled) opinions.push_back(assess::run_semgrep(file, config.semgrep));
  for (const auto& b : opinions) {
    a.score += b.score;
    a.findings.insert(a.findings.end(), b.findings.begin(), b.findings.end());
    std::stable_sort(a.findings.begin(), a.findings.end(), [](const Finding& x, const Finding& y) { return x.line < y.line; });
    a.notes.insert(a.notes.end(), b.notes.begin(), b.notes.end());
    a.level = level_for(a, config);
  }
  return a;
}

}  // namespace sandboxrun
