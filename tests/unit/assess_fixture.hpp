// Test support for the assessor: the project's shipped security.yaml (loaded once per test
// binary) and the level it gives a source text.
#pragma once

#include <filesystem>
#include <string_view>

#include "sandboxrun/assess.hpp"

namespace assess_fixture {

inline const sandboxrun::SecurityConfig& config() {
  static const sandboxrun::SecurityConfig cfg = [] {
    const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
    return sandboxrun::load_security_config(root / "config/security.yaml", root);
  }();
  return cfg;
}

inline sandboxrun::RiskLevel level(std::string_view src) { return sandboxrun::assess_source(src, config()).level; }

}  // namespace assess_fixture
