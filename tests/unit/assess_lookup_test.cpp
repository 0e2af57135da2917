// Rule lookup by name: memoised per file, though what a bare name means changes with a star
// import (from os import *); and by canonical spelling, which most names take a shortcut to.
#include <gtest/gtest.h>

#include "assess/internal.hpp"
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

// Names are looked up by their canonical spelling; most have nothing to rewrite and take a
// shortcut, which must not skip any rewrite.
TEST(AssessLookup, CanonicalSpellings) {
  using assess::detail::canonical;
  EXPECT_EQ(canonical("os.system"), "os.system");
  EXPECT_EQ(canonical("self.log.warning"), "self.log.warning");
  EXPECT_EQ(canonical("builtins.eval"), "eval");
  EXPECT_EQ(canonical("__builtins__.exec"), "exec");
  EXPECT_EQ(canonical("__main__.__builtins__.builtins.eval"), "eval");
  EXPECT_EQ(canonical("os.__dict__.system"), "os.system");
  EXPECT_EQ(canonical("os.system.__call__"), "os.system");
  EXPECT_EQ(canonical("posix.system"), "os.system");
  EXPECT_EQ(canonical("nt.spawnv"), "os.spawnv");
  EXPECT_EQ(canonical("subprocess.os.system"), "os.system");
  EXPECT_EQ(canonical("shutil.os.system"), "os.system");
  EXPECT_EQ(canonical("builtins."), "builtins.");
  // In place: the same spellings.
  for (std::string q : {"os.system", "builtins.eval", "posix.system", "subprocess.os.system", "os.__dict__.system"}) {
    const std::string want = canonical(q);
    assess::detail::canonicalize(q);
    EXPECT_EQ(q, want);
  }
}
