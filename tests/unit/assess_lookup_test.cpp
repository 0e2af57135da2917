// Rule lookup by name is memoised per file: what a bare name means changes with a star import
// (from os import *), so a name seen before the import is looked up again after it.
#include <gtest/gtest.h>

#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

namespace {

const std::filesystem::path kRoot = SANDBOXRUN_SOURCE_DIR;

size_t count(const Assessment& a, std::string_view rule) {
  size_t n = 0;
  for (const auto& f : a.findings) n += f.rule == rule;
  return n;
}

}  // namespace

TEST(AssessLookup, ANameSeenBeforeAStarImportMeansTheModulesNameAfterIt) {
  static const SecurityConfig config = load_security_config(kRoot / "config/security.yaml", kRoot);
  const Assessment a = assess_source("system(cmd)\nfrom os import *\nsystem(cmd)\nsystem(other)\n", config);
  EXPECT_EQ(count(a, "SR-PROC-001"), 2u) << a.to_json().dump(1);
  for (const auto& f : a.findings) {
    if (f.rule == "SR-PROC-001") {
      EXPECT_GE(f.line, 3);
    }
  }
}
