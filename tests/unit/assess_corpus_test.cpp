// Scores the labelled corpus (tests/fixtures/assess/manifest.txt) and reports exact-level
// agreement, recall on HIGH+BLOCKED, recall on BLOCKED and the false-positive rate on files
// labelled LOW (judged by label, not by folder). Fails below the targets of issue 13: exact
// >= 0.85, HIGH+BLOCKED recall >= 0.95, LOW false positives <= 0.05.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sandboxrun/assess.hpp"

using namespace sandboxrun;

TEST(AssessCorpus, AccuracyRecallFalsePositives) {
  const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
  const std::filesystem::path dir = root / "tests/fixtures/assess";
  const SecurityConfig cfg = load_security_config(root / "config/security.yaml", root);
  std::ifstream manifest(dir / "manifest.txt");
  ASSERT_TRUE(manifest) << "missing " << (dir / "manifest.txt");

  int total = 0, exact = 0, severe = 0, severe_found = 0, blocked = 0, blocked_found = 0, benign = 0,
      benign_flagged = 0, benign_high = 0;
  std::string line;
  std::ostringstream misses;
  while (std::getline(manifest, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string level_name, path;
    in >> level_name >> path;
    auto expected = parse_risk_level(level_name);
    ASSERT_TRUE(expected) << "bad level in manifest: " << line;
    ASSERT_TRUE(std::filesystem::is_regular_file(dir / path)) << "manifest names a missing file: " << path;
    const Assessment a = assess_file(dir / path, cfg);
    ++total;
    exact += a.level == *expected;
    if (a.level != *expected)
      misses << "  " << path << ": expected " << to_string(*expected) << ", got " << to_string(a.level)
             << " (score " << a.score << ")\n";
    if (*expected >= RiskLevel::high) {
      ++severe;
      severe_found += a.level >= RiskLevel::high;
    }
    if (*expected == RiskLevel::blocked) {
      ++blocked;
      blocked_found += a.level == RiskLevel::blocked;
    }
    if (*expected == RiskLevel::low) {
      ++benign;
      benign_flagged += a.level > RiskLevel::low;
      benign_high += a.level >= RiskLevel::high;
    }
  }
  ASSERT_GE(total, 60) << "the corpus should hold at least 60 files";
  ASSERT_GT(severe, 0);
  ASSERT_GT(blocked, 0);
  ASSERT_GT(benign, 0);
  const double accuracy = double(exact) / total;
  const double recall = double(severe_found) / severe;
  const double blocked_recall = double(blocked_found) / blocked;
  const double fp = double(benign_flagged) / benign;
  std::printf("assess corpus: %d files; exact %.3f (%d/%d); recall HIGH+BLOCKED %.3f (%d/%d); recall BLOCKED %.3f "
              "(%d/%d); LOW false positives %.3f (%d/%d above LOW, %d at HIGH or above)\n",
              total, accuracy, exact, total, recall, severe_found, severe, blocked_recall, blocked_found, blocked, fp,
              benign_flagged, benign, benign_high);
  if (!misses.str().empty()) std::printf("misassessed:\n%s", misses.str().c_str());
  EXPECT_GE(accuracy, 0.85);
  EXPECT_GE(recall, 0.95);
  EXPECT_LE(fp, 0.05);
}
