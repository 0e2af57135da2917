#include "sandboxrun/spec.hpp"

namespace sandboxrun {

const char* to_string(Trust t) {
  switch (t) {
    case Trust::untrusted: return "untrusted";
    case Trust::unknown: return "unknown";
    case Trust::trusted: return "trusted";
  }
  return "untrusted";
}

std::optional<Trust> parse_trust(const std::string& s) {
  if (s == "untrusted") return Trust::untrusted;
  if (s == "unknown") return Trust::unknown;
  if (s == "trusted") return Trust::trusted;
  return std::nullopt;
}

Trust stricter(Trust a, Trust b) { return static_cast<int>(a) < static_cast<int>(b) ? a : b; }

const char* to_string(NetworkMode m) { return m == NetworkMode::allowlist ? "allowlist" : "none"; }

const char* to_string(LandlockMode m) {
  switch (m) {
    case LandlockMode::required: return "required";
    case LandlockMode::best_effort: return "best_effort";
    case LandlockMode::off: return "off";
  }
  return "best_effort";
}

}  // namespace sandboxrun
