// libFuzzer target over the assessor: tokenizer alone, then the whole built-in assessment
// (analyzer, decoders, rule engine with the shipped rules) on the same bytes.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "sandboxrun/assess.hpp"
#include "sandboxrun/assess_tokenizer.hpp"

namespace {

const sandboxrun::SecurityConfig& config() {
  // From the build (tests/CMakeLists.txt): __FILE__ is relative to the build directory under
  // Ninja, so it only worked when the fuzzer was started there.
  static const std::filesystem::path root = SANDBOXRUN_SOURCE_DIR;
  static const sandboxrun::SecurityConfig cfg = [] {
    auto c = sandboxrun::load_security_config(root / "config/security.yaml", root);
    c.max_bytes = 1 << 20;
    return c;
  }();
  return cfg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  sandboxrun::assess::Tokenizer tok(src);
  // Every token consumes input or is one of a bounded number of synthetic ones.
  for (size_t n = 0;; ++n) {
    auto t = tok.next();
    if (t.kind == sandboxrun::assess::TokKind::end) break;
    if (t.kind == sandboxrun::assess::TokKind::string) (void)sandboxrun::assess::string_value(t);
    if (n > 4 * size + 64 + 2000) __builtin_trap();  // the tokenizer stopped making progress
  }
  const auto a = sandboxrun::assess_source(src, config());
  if (a.score < 0) __builtin_trap();
  return 0;
}
